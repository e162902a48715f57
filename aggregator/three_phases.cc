#include "aggregator/three_phases.h"

#include "aggregator/stopwatch.h"
#include "mpi/agreement.h"

namespace gradagg {

void RunThreePhases(const ThreePhases& phases, const FlatBuffers& flat, const BucketLayout& callLayout,
                    const std::vector<ElementRange>& shards, float* stripe, const BucketLayout& stripeLayout,
                    AggregationStats& stats) {
  PhaseTimes& times = stats.times;
  Stopwatch clock;
  const auto lap = [&] {
    if (!phases.timing) return 0.0;
    if (phases.settle) phases.settle();
    return clock.Lap();
  };
  // Phase 2 on `values`, with its byte counts and non-finite buckets. Each rank counted its own stripe's buckets:
  // the node's sum is the call's, the same on every rank.
  const auto acrossNodes = [&](float* values, const BucketLayout& layout, const ValueTerms* terms,
                                const ValueCopies* copies) {
    phases.cross->Aggregate(values, layout, phases.timing ? &times : nullptr, terms, copies);
    stats.interNodeBytesSent = phases.cross->lastBytesSent();
    stats.interNodeFloatBytes = phases.cross->lastFloatBytes();
    stats.nonFiniteBuckets = SumOver(phases.nodeComm, phases.cross->lastNonFiniteBuckets());
    lap();
  };
  if (flat.size() == 0) return;
  if (phases.node == nullptr) {
    if (phases.cross) acrossNodes(flat.Contiguous(), callLayout, nullptr, nullptr);
    return;
  }
  lap();
  // One node: 1 and 3 fused, timed as the reduce-scatter (not for a reduce-scatter alone).
  if (!phases.cross && !phases.keepStripeAt && phases.node->AllReduce(flat)) {
    times.reduceScatter = lap();
    return;
  }

  // 1. Intra-node reduce-scatter: our stripe, summed over the node (in our shard of the gradient where it can be).
  //    Where phase 2 reads the stripe only to quantize it, the node may leave phases 1 and 3 to phase 2 instead: its
  //    quantizer adds the node's terms as it reads them (the same sums), and its decode writes our aggregated shard
  //    into every rank's gradient; no stripe is stored.
  ValueTerms terms;
  ValueCopies copies;
  const bool inPhase2 = phases.cross != nullptr && phases.cross->TakesValueTerms() && !phases.keepStripeAt &&
                        phases.node->LeavePhasesToPhase2(flat, shards, terms, copies);
  float* const inPlace = inPhase2 ? nullptr : phases.node->StripeInPlace(flat, shards);
  if (inPlace) stripe = inPlace;
  if (!inPhase2) phases.node->ReduceScatter(flat, shards, stripe);
  times.reduceScatter = lap();

  // 2. Inter-node quantized exchange of the stripe.
  if (phases.cross) acrossNodes(stripe, stripeLayout, inPhase2 ? &terms : nullptr, inPhase2 ? &copies : nullptr);
  if (phases.keepStripeAt) {  // a reduce-scatter: the stripe into this rank's shard of the gradient, no phase 3
    if (stripe != inPlace) flat.CopyIn(*phases.keepStripeAt, stripe);
    return;
  }

  // 3. Intra-node all-gather: every rank gets every stripe (done by phase 2's decode: only its end).
  if (inPhase2) {
    phases.node->FinishGather();
  } else {
    phases.node->AllGather(stripe, shards, flat);
  }
  times.allGather = lap();
}

}  // namespace gradagg
