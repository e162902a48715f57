#include "quantize/bucket_layout.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "quantize/wire_format.h"

namespace gradagg {

BucketLayout::BucketLayout(const std::vector<size_t>& segmentLengths, size_t bucketSize) : bucketSize_(bucketSize) {
  if (bucketSize == 0) throw std::invalid_argument("BucketLayout: bucket size 0");
  for (size_t length : segmentLengths) {
    if (length == 0) continue;
    segments_.push_back({elements_, length, buckets_});
    elements_ += length;
    buckets_ += BucketsOf(length);
  }
}

size_t BucketLayout::BucketBegin(size_t bucket) const {
  if (bucket >= buckets_) return elements_;
  // The last segment whose first bucket is at or before `bucket`.
  const auto after = std::upper_bound(segments_.begin(), segments_.end(), bucket,
                                      [](size_t b, const BucketSegment& segment) { return b < segment.firstBucket; });
  const BucketSegment& segment = *(after - 1);
  return segment.begin + (bucket - segment.firstBucket) * bucketSize_;
}

BucketLayout BucketLayout::Slice(size_t begin, size_t count) const {
  const size_t end = begin + count;
  if (end > elements_) {
    throw std::invalid_argument("BucketLayout::Slice: elements [" + std::to_string(begin) + ", " + std::to_string(end) +
                                ") past the run's " + std::to_string(elements_));
  }
  std::vector<size_t> lengths;
  for (const BucketSegment& segment : segments_) {
    const size_t from = std::max(begin, segment.begin);
    const size_t to = std::min(end, segment.begin + segment.count);
    if (from >= to) continue;
    const bool toSegmentEnd = to == segment.begin + segment.count;
    if ((from - segment.begin) % bucketSize_ != 0 || (!toSegmentEnd && (to - segment.begin) % bucketSize_ != 0)) {
      throw std::invalid_argument("BucketLayout::Slice: elements [" + std::to_string(begin) + ", " +
                                  std::to_string(end) + ") do not start and end on bucket boundaries");
    }
    lengths.push_back(to - from);
  }
  return BucketLayout(lengths, bucketSize_);
}

bool BucketLayout::operator==(const BucketLayout& other) const {
  if (bucketSize_ != other.bucketSize_ || segments_.size() != other.segments_.size()) return false;
  for (size_t i = 0; i < segments_.size(); ++i) {
    if (segments_[i].count != other.segments_[i].count) return false;
  }
  return true;
}

size_t WireBytes(const BucketLayout& layout, int bits) {
  size_t bytes = 0;
  for (const BucketSegment& segment : layout.segments()) bytes += WireBytes(segment.count, layout.bucketSize(), bits);
  return bytes;
}

}  // namespace gradagg
