// Who owns which elements (docs/DESIGN.md, Partitioning): the buckets of a call (each tensor cut into buckets of its
// own, quantize/bucket_layout.h) split over G shards in phase 1 and a shard's buckets over M sub-stripes in phase 2,
// both by CNTK's rule.
#pragma once

#include <cstddef>
#include <vector>

#include "gradagg/options.h"
#include "common/element_range.h"
#include "quantize/bucket_layout.h"
#include "quantize/quantizer_config.h"

namespace gradagg {

// CNTK's rule for n items over p owners: owner k gets n/p items, plus one if k < n%p,
// starting at k*(n/p) + min(k, n%p).
ElementRange PartitionItems(size_t items, size_t owners, size_t owner);

// Cuts the run of `layout` into `owners` runs of whole buckets by PartitionItems over its buckets. Ranges are relative
// to the run's first element; some may be empty.
std::vector<ElementRange> SplitIntoBucketRuns(const BucketLayout& layout, size_t owners);

// The quantizer settings that AggregatorOptions imply.
QuantizerConfig QuantizerConfigOf(const AggregatorOptions& options);

}  // namespace gradagg
