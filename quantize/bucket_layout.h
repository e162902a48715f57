// Where a run of elements is cut into buckets, the unit of quantization statistics (docs/DESIGN.md, Partitioning).
//
// A run is a list of segments: the tensors of a call, or the parts of them that a shard or sub-stripe holds. Each
// segment is cut into buckets of B elements from its own first element (its last bucket may be short), so a bucket
// never spans two tensors and a small tensor of large values (a bias) keeps statistics of its own. Buckets are
// numbered across the run in order; the wire image of a run is its buckets' encodings end to end (wire_format.h).
#pragma once

#include <cstddef>
#include <vector>

namespace gradagg {

struct BucketSegment {
  size_t begin = 0;        // first element, relative to the run
  size_t count = 0;        // elements (never 0)
  size_t firstBucket = 0;  // index of the segment's first bucket in the run
};

class BucketLayout {
 public:
  BucketLayout() = default;
  // Segments of the given lengths, end to end; empty ones are dropped. Throws std::invalid_argument for a bucket
  // size of 0.
  BucketLayout(const std::vector<size_t>& segmentLengths, size_t bucketSize);
  // One segment: the whole run is one tensor.
  static BucketLayout Uniform(size_t elements, size_t bucketSize) { return BucketLayout({elements}, bucketSize); }

  size_t elements() const { return elements_; }
  size_t buckets() const { return buckets_; }
  size_t bucketSize() const { return bucketSize_; }
  const std::vector<BucketSegment>& segments() const { return segments_; }

  // First element of bucket `bucket` (elements() for bucket == buckets()).
  size_t BucketBegin(size_t bucket) const;
  // The layout of elements [begin, begin + count), both ends on bucket boundaries; relative to `begin`. Throws
  // std::invalid_argument when an end falls inside a bucket.
  BucketLayout Slice(size_t begin, size_t count) const;

  // Calls visit(begin, length) for every bucket, in order.
  template <typename Visit>
  void ForEachBucket(Visit visit) const {
    for (const BucketSegment& segment : segments_) {
      for (size_t offset = 0; offset < segment.count; offset += bucketSize_) {
        visit(segment.begin + offset, segment.count - offset < bucketSize_ ? segment.count - offset : bucketSize_);
      }
    }
  }

  bool operator==(const BucketLayout& other) const;
  bool operator!=(const BucketLayout& other) const { return !(*this == other); }

 private:
  size_t BucketsOf(size_t count) const { return (count + bucketSize_ - 1) / bucketSize_; }

  std::vector<BucketSegment> segments_;
  size_t bucketSize_ = 1;
  size_t elements_ = 0;
  size_t buckets_ = 0;
};

// Bytes of the run's wire image at `bits` per element.
size_t WireBytes(const BucketLayout& layout, int bits);

}  // namespace gradagg
