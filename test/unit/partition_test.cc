#include "aggregator/partition.h"

#include <gtest/gtest.h>

namespace gradagg {
namespace {

TEST(PartitionItems, FollowsCntksRule) {
  // 10 over 3: 4, 3, 3.
  EXPECT_EQ(PartitionItems(10, 3, 0).begin, 0u);
  EXPECT_EQ(PartitionItems(10, 3, 0).count, 4u);
  EXPECT_EQ(PartitionItems(10, 3, 1).begin, 4u);
  EXPECT_EQ(PartitionItems(10, 3, 1).count, 3u);
  EXPECT_EQ(PartitionItems(10, 3, 2).begin, 7u);
  EXPECT_EQ(PartitionItems(10, 3, 2).count, 3u);
  // Fewer items than owners: the first ones get one each, the rest nothing.
  EXPECT_EQ(PartitionItems(2, 5, 1).count, 1u);
  EXPECT_EQ(PartitionItems(2, 5, 4).count, 0u);
  EXPECT_EQ(PartitionItems(2, 5, 4).begin, 2u);
  EXPECT_EQ(PartitionItems(0, 3, 2).count, 0u);
}

TEST(SplitIntoBucketRuns, CoversEveryElementOnceInWholeBuckets) {
  for (size_t elements : {0, 1, 511, 512, 513, 5000, 100003}) {
    for (size_t bucket : {1, 7, 512}) {
      for (size_t owners : {1, 2, 3, 8}) {
        const std::vector<ElementRange> runs = SplitIntoBucketRuns(BucketLayout::Uniform(elements, bucket), owners);
        ASSERT_EQ(runs.size(), owners);
        size_t next = 0;
        for (size_t k = 0; k < owners; ++k) {
          EXPECT_EQ(runs[k].begin, next);
          if (runs[k].end() != elements) EXPECT_EQ(runs[k].count % bucket, 0u);
          EXPECT_EQ(runs[k].begin % bucket == 0 || runs[k].count == 0, true);
          next = runs[k].end();
        }
        EXPECT_EQ(next, elements);
      }
    }
  }
}

TEST(SplitIntoBucketRuns, ShortLastBucketGoesToTheLastOwnerWithBuckets) {
  const std::vector<ElementRange> runs =
      SplitIntoBucketRuns(BucketLayout::Uniform(1000, 512), 3);  // 2 buckets over 3 owners
  EXPECT_EQ(runs[0].count, 512u);
  EXPECT_EQ(runs[1].begin, 512u);
  EXPECT_EQ(runs[1].count, 488u);
  EXPECT_EQ(runs[2].count, 0u);
}

TEST(SplitIntoBucketRuns, SplitsTheBucketsOfEveryTensorAndEndsOnTheirBoundaries) {
  // Tensors [3, 10, 1] in buckets of 4: [0,3) | [3,7) [7,11) [11,13) | [13,14): 5 buckets over 2 owners: 3 and 2.
  const BucketLayout layout({3, 10, 1}, 4);
  const std::vector<ElementRange> runs = SplitIntoBucketRuns(layout, 2);
  EXPECT_EQ(runs[0].begin, 0u);
  EXPECT_EQ(runs[0].count, 11u);
  EXPECT_EQ(runs[1].begin, 11u);
  EXPECT_EQ(runs[1].count, 3u);
  EXPECT_EQ(layout.Slice(runs[1].begin, runs[1].count), BucketLayout({2, 1}, 4));
  // Every shard of a layout of many tensors slices cleanly, and the shards cover the run.
  const BucketLayout model({200704, 256, 32768, 128, 1280, 10}, 512);
  for (size_t owners : {1, 2, 3, 4, 8}) {
    size_t next = 0;
    for (const ElementRange& run : SplitIntoBucketRuns(model, owners)) {
      EXPECT_EQ(run.begin, next);
      EXPECT_EQ(model.Slice(run.begin, run.count).elements(), run.count);
      next = run.end();
    }
    EXPECT_EQ(next, model.elements());
  }
}

}  // namespace
}  // namespace gradagg
