// The host-memory twin of the NVLink phase: ranks of one node share an MPI window (MPI_Win_allocate_shared) and
// read each other's segments directly, as GPUs read each other's memory over NVLink.
//
//   1. each rank copies its gradient into its own segment; node barrier;
//   2. reduce-scatter: local rank l reads shard l from every segment, in local-rank order, and sums;
//   3. (phase 2 runs on the stripe elsewhere)
//   4. all-gather: rank l writes its aggregated stripe into shard l of its own segment (only rank l read that part
//      in step 2, so no barrier is needed before); node barrier; every rank copies every shard out of its owner's
//      segment; node barrier, so the next call may overwrite segments.
#pragma once

#include <mpi.h>

#include <vector>

#include "nvlink/intra_node_phase.h"

namespace gradagg {

class SharedWindowPhase : public IntraNodePhase {
 public:
  // Collective over the node; does not take ownership of `node`. Freeing the window waits at most `timeoutSeconds`
  // (0: no limit) for the node's other ranks, and leaves it to MPI_Finalize or MPI_Abort if they do not come.
  SharedWindowPhase(MPI_Comm node, double timeoutSeconds);
  // Never blocks for ever: during unwinding, or after Abandon, the window is left to MPI (no collective free).
  ~SharedWindowPhase() override;
  SharedWindowPhase(const SharedWindowPhase&) = delete;
  SharedWindowPhase& operator=(const SharedWindowPhase&) = delete;

  void ReduceScatter(const FlatBuffers& gradient, const std::vector<ElementRange>& shards, float* stripe) override;
  void AllGather(const float* stripe, const std::vector<ElementRange>& shards, const FlatBuffers& gradient) override;
  void Abandon() noexcept override { abandoned_ = true; }

 private:
  void EnsureCapacity(size_t elements);  // collective: every rank asks for the same size
  // The collective free, after a node barrier that completes in time; returns false (the window left as it is) when
  // it does not.
  bool FreeWindow() noexcept;
  void NodeBarrier();  // memory barrier + process barrier + memory barrier, the shared-window idiom

  MPI_Comm node_;
  double timeoutSeconds_;
  bool abandoned_ = false;
  int localRank_ = 0;
  int localSize_ = 1;
  MPI_Win window_ = MPI_WIN_NULL;
  size_t capacity_ = 0;           // elements per segment
  std::vector<float*> segments_;  // every local rank's segment, mapped into this process
};

}  // namespace gradagg
