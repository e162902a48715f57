// A BucketLayout as the quantizer kernels see it: a table of its segments in device memory, each with where its
// first bucket starts in the wire image, or no table for a run of one segment. A warp finds its bucket's place by a
// binary search over the segments (a handful of loads that every lane of the warp shares).
#pragma once

#include <cstddef>

namespace gradagg::cuda_detail {

struct TableSegment {
  size_t begin;        // first element, relative to the run
  size_t count;        // elements
  size_t firstBucket;  // the segment's first bucket, numbered across the run
  size_t wireBegin;    // byte offset of that bucket in the run's wire image
};

struct BucketTable {
  const TableSegment* segments;  // device memory; nullptr: one segment of `count` elements
  int segmentCount;
  size_t count;            // elements of the run
  size_t buckets;          // buckets of the run
  size_t bucketSize;       // B
  size_t bucketWireBytes;  // of a full bucket
  bool alignedStarts;      // every segment starts on a multiple of 4 elements (4-element access may be aligned)
};

// Where one bucket lies: its first element, its length and its byte offset in the wire image.
struct BucketPlace {
  size_t start;
  int length;
  size_t wire;
};

#ifdef __CUDACC__
__device__ inline BucketPlace Locate(const BucketTable& table, size_t bucket) {
  TableSegment segment{0, table.count, 0, 0};
  if (table.segments != nullptr) {
    int low = 0;  // the last segment whose first bucket is at or before `bucket`
    int high = table.segmentCount - 1;
    while (low < high) {
      const int middle = (low + high + 1) / 2;
      if (table.segments[middle].firstBucket <= bucket) {
        low = middle;
      } else {
        high = middle - 1;
      }
    }
    segment = table.segments[low];
  }
  const size_t index = bucket - segment.firstBucket;
  const size_t offset = index * table.bucketSize;
  return {segment.begin + offset, static_cast<int>(min(table.bucketSize, segment.count - offset)),
          segment.wireBegin + index * table.bucketWireBytes};
}
#endif

}  // namespace gradagg::cuda_detail
