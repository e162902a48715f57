#include "apps/gradagg/differences.h"

#include <gtest/gtest.h>

#include <cmath>

namespace gradagg::cli {
namespace {

TEST(CompareBitwise, EqualResultsSayNothing) {
  const std::vector<float> values{1.0f, -2.5f, NAN, 0.0f};
  EXPECT_EQ(CompareBitwise(values, values).count, 0u);
  EXPECT_EQ(CompareBitwise(values, values).description, "");
  EXPECT_EQ(CompareBitwise({}, {}).count, 0u);
}

TEST(CompareBitwise, NamesTheCountTheFirstAndTheLast) {
  const std::vector<float> expected{1.0f, 2.0f, 3.0f, 4.0f, 5.0f};
  const std::vector<float> result{1.0f, 2.5f, 3.0f, 4.0f, 7.0f};
  const Differences found = CompareBitwise(result, expected);
  EXPECT_EQ(found.count, 2u);
  EXPECT_EQ(found.first, 1u);
  EXPECT_EQ(found.last, 4u);
  EXPECT_EQ(found.description, "2 of 5 elements differ; first at element 1 (got 2.5, expected 2), last at element 4");
}

TEST(CompareBitwise, ComparesBitsNotValues) {
  // -0 == +0 as floats, yet a different sum order could give either: the check compares bits.
  EXPECT_EQ(CompareBitwise({-0.0f}, {0.0f}).description,
            "1 of 1 elements differ; first at element 0 (got -0, expected 0), last at element 0");
}

}  // namespace
}  // namespace gradagg::cli
