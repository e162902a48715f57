// The oracle: docs/DESIGN.md's algorithm run serially over every rank's input, written plainly and apart from the
// distributed code (sharing only the quantizer and the partition rule), so that it can judge it bit for bit.
// Tests and the CLI's --check compare AggregateGradients against it.
#pragma once

#include <vector>

#include "gradagg/options.h"
#include "mpi/node_topology.h"
#include "quantize/bucket_layout.h"

namespace gradagg {

class SerialSimulation {
 public:
  // placements[r]: where world rank r sits (NodeTopology::GatherPlacements). Throws std::invalid_argument when
  // the placements do not form M nodes of G ranks each.
  SerialSimulation(std::vector<RankPlacement> placements, const AggregatorOptions& options);

  // One aggregation step. inputs[r] is world rank r's whole gradient (all the same length); contributes[r] false
  // means rank r's header said numSamples == 0 (empty: all contribute); `tensors` are the lengths of the call's
  // tensors, end to end (empty: one tensor). Returns what every rank must hold after AggregateGradients. Residuals
  // carry over to the next Run of the same layout, as in the distributed version.
  std::vector<float> Run(const std::vector<std::vector<float>>& inputs, const std::vector<bool>& contributes = {},
                         const std::vector<size_t>& tensors = {});

  void ResetResiduals();
  // Buckets that came out of the last Run non-finite (what LastStats().nonFiniteBuckets reports on every rank).
  size_t lastNonFiniteBuckets() const { return lastNonFiniteBuckets_; }

 private:
  std::vector<RankPlacement> placements_;
  AggregatorOptions options_;
  size_t nodes_ = 1;
  size_t ranksPerNode_ = 1;
  std::vector<std::vector<int>> rankAt_;  // rankAt_[node][local] = world rank
  BucketLayout layout_;
  size_t lastNonFiniteBuckets_ = 0;
  std::vector<std::vector<float>> stripeResidual_;  // r1 per world rank
  std::vector<std::vector<float>> ownResidual_;     // r2 per world rank
};

}  // namespace gradagg
