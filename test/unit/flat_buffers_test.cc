#include "intra_node/flat_buffers.h"

#include <gtest/gtest.h>

#include <numeric>

namespace gradagg {
namespace {

TEST(FlatBuffers, CopiesRangesAcrossBufferBoundariesAndEmptyBuffers) {
  std::vector<float> a(3), b(0), c(5), d(2);
  FlatBuffers flat({{a.data(), a.size()}, {b.data(), 0}, {c.data(), c.size()}, {nullptr, 0}, {d.data(), d.size()}});
  ASSERT_EQ(flat.size(), 10u);
  std::vector<float> source(10);
  std::iota(source.begin(), source.end(), 1.0f);
  flat.CopyIn({0, 10}, source.data());
  EXPECT_EQ(a, (std::vector<float>{1, 2, 3}));
  EXPECT_EQ(c, (std::vector<float>{4, 5, 6, 7, 8}));
  EXPECT_EQ(d, (std::vector<float>{9, 10}));

  std::vector<float> middle(6, -1.0f);
  flat.CopyOut({2, 6}, middle.data());
  EXPECT_EQ(middle, (std::vector<float>{3, 4, 5, 6, 7, 8}));
  flat.CopyIn({7, 3}, std::vector<float>{-8, -9, -10}.data());
  EXPECT_EQ(c[4], -8.0f);
  EXPECT_EQ(d, (std::vector<float>{-9, -10}));
  flat.Zero();
  EXPECT_EQ(c, std::vector<float>(5, 0.0f));
}

TEST(FlatBuffers, RejectsNullDataAndRangesOutside) {
  EXPECT_THROW(FlatBuffers({{nullptr, 4}}), std::invalid_argument);
  std::vector<float> a(4);
  const FlatBuffers flat({{a.data(), a.size()}});
  std::vector<float> out(8);
  EXPECT_THROW(flat.CopyOut({2, 3}, out.data()), std::out_of_range);
  EXPECT_NO_THROW(flat.CopyOut({4, 0}, out.data()));
}

}  // namespace
}  // namespace gradagg
