// Phases 1 and 3 of docs/DESIGN.md behind one interface: the intra-node reduce-scatter and all-gather through peer
// memory. Implementations: SharedWindowPhase (host memory, an MPI shared window) and GpuNode (device memory, CUDA IPC
// over NVLink; its gradient is one device buffer). Buffers are the implementation's kind of memory.
#pragma once

#include <vector>

#include "common/value_arrays.h"
#include "intra_node/flat_buffers.h"

namespace gradagg {

class IntraNodePhase {
 public:
  virtual ~IntraNodePhase() = default;

  // Phase 1, collective over the node. Every rank passes its whole gradient and the same shard ranges (one per
  // local rank, in local-rank order, covering the gradient). Local rank l receives in `stripe` (shards[l].count
  // elements) the sum over local ranks 0, 1, ..., G-1 of their elements in shards[l]: the first term assigned,
  // the others added in that order, one float32 rounding each.
  virtual void ReduceScatter(const FlatBuffers& gradient, const std::vector<ElementRange>& shards, float* stripe) = 0;

  // Phase 3, collective over the node. Local rank l passes its aggregated stripe (shards[l].count elements); every
  // rank receives every local rank's stripe at that rank's shard of `gradient`.
  virtual void AllGather(const float* stripe, const std::vector<ElementRange>& shards, const FlatBuffers& gradient) = 0;

  // Phases 1 and 3 left to phase 2, where the implementation can: `terms` get every local rank's elements of this
  // rank's shard, in local-rank order, for a reader that sums them in that order as it reads them (phase 2's
  // quantizer: ReduceScatter's sums), and `copies` every local rank's gradient at this rank's shard, for a writer that
  // stores this rank's aggregated shard into all of them (AllGather's result). Collective over the node, like
  // ReduceScatter; returns false (having done nothing) where the phases must run. The terms hold until the copies are
  // written; FinishGather must follow before the gradient is read.
  virtual bool LeavePhasesToPhase2(const FlatBuffers&, const std::vector<ElementRange>&, ValueTerms&, ValueCopies&) {
    return false;
  }
  // Collective: every rank's copies are written, and visible here.
  virtual void FinishGather() {}
  // Where ReduceScatter may leave this rank's stripe in the gradient itself (its shard, when that lies in one
  // buffer), so that phase 2 works on it there and AllGather need not copy it back; null: in the caller's stripe.
  virtual float* StripeInPlace(const FlatBuffers&, const std::vector<ElementRange>&) { return nullptr; }
  // Phases 1 and 3 at once, in place: every rank's gradient becomes the node's sum, the same sums in local-rank order.
  // Returns false where the implementation has no fused path (then run the two phases).
  virtual bool AllReduce(const FlatBuffers&) { return false; }
  // Local: the node's ranks are out of step (a call failed here, or this rank is unwinding an exception), so the
  // destructor must not free collectively what it would otherwise: it leaves that to MPI_Finalize or MPI_Abort.
  virtual void Abandon() noexcept {}
};

}  // namespace gradagg
