#include "aggregator/partition.h"

#include <algorithm>

namespace gradagg {

ElementRange PartitionItems(size_t items, size_t owners, size_t owner) {
  const size_t base = items / owners;
  const size_t extra = items % owners;
  return {owner * base + std::min(owner, extra), base + (owner < extra ? 1 : 0)};
}

std::vector<ElementRange> SplitIntoBucketRuns(const BucketLayout& layout, size_t owners) {
  std::vector<ElementRange> runs(owners);
  for (size_t owner = 0; owner < owners; ++owner) {
    const ElementRange part = PartitionItems(layout.buckets(), owners, owner);
    const size_t begin = layout.BucketBegin(part.begin);
    runs[owner] = {begin, layout.BucketBegin(part.end()) - begin};
  }
  return runs;
}

QuantizerConfig QuantizerConfigOf(const AggregatorOptions& options) {
  QuantizerConfig config;
  config.bits = options.bits;
  config.bucketSize = options.bucketSize;
  config.threshold = options.meanThreshold ? OneBitThreshold::kMean : OneBitThreshold::kZero;
  return config;
}

}  // namespace gradagg
