// One call's three phases (docs/DESIGN.md), written once for the host path (aggregator.cc) and the GPU path
// (cuda/device_aggregation.cc), over an IntraNodePhase (the shared window, or GpuNode) and a CrossNodePhase (host or
// device backend):
//   1. intra-node reduce-scatter: this rank's stripe, summed over the node;
//   2. the quantized exchange of the stripe across nodes;
//   3. intra-node all-gather: every rank gets every stripe.
// Without a node phase (one rank per node, the gradient in one buffer) the stripe is the gradient itself and only
// phase 2 runs. On one node, a node phase that can runs 1 and 3 fused as one allreduce (the same sums).
#pragma once

#include <mpi.h>

#include <functional>
#include <vector>

#include "aggregator/cross_node_phase.h"
#include "gradagg/aggregation_stats.h"
#include "intra_node/flat_buffers.h"
#include "intra_node/intra_node_phase.h"
#include "quantize/bucket_layout.h"

namespace gradagg {

struct ThreePhases {
  IntraNodePhase* node = nullptr;   // null: the gradient is one buffer and one rank per node
  CrossNodePhase* cross = nullptr;  // null: one node
  MPI_Comm nodeComm = MPI_COMM_NULL;
  bool timing = false;
  std::function<void()> settle;  // with timing, waits for queued work before a phase's time is taken (may be empty)
  // Set: a reduce-scatter, phases 1 and 2 alone; the stripe ends at this range of the gradient (this rank's shard;
  // host memory, which FlatBuffers copies into).
  const ElementRange* keepStripeAt = nullptr;
};

// `flat` is the call's gradient in the phases' memory; `stripe` this rank's stripe buffer (shards[local rank] of
// the gradient, laid out as stripeLayout; unused without a node phase, when callLayout is the stripe's). Adds the
// phases' times, bytes and non-finite buckets to `stats`. With keepStripeAt, the rest of `flat` keeps this rank's
// input.
void RunThreePhases(const ThreePhases& phases, const FlatBuffers& flat, const BucketLayout& callLayout,
                    const std::vector<ElementRange>& shards, float* stripe, const BucketLayout& stripeLayout,
                    AggregationStats& stats);

}  // namespace gradagg
