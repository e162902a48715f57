#include "intra_node/ordered_sum.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

namespace gradagg {
namespace {

std::vector<float> Values(size_t count, uint32_t seed) {
  std::mt19937 generator(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> values(count);
  for (float& v : values) v = normal(generator) * (seed % 3 == 0 ? 1e4f : 1.0f);
  return values;
}

bool SameBits(const float* a, const float* b, size_t count) {
  return count == 0 || std::memcmp(a, b, count * sizeof(float)) == 0;
}

// Every length around the vector widths, 1 to 5 terms: the bits of a scalar left-to-right sum, to both outputs.
TEST(SumInOrder, IsTheLeftToRightSumBitForBit) {
  for (size_t count = 1; count <= 5; ++count) {
    for (size_t length = 0; length <= 67; ++length) {
      std::vector<std::vector<float>> terms;
      std::vector<const float*> pointers;
      for (size_t t = 0; t < count; ++t) terms.push_back(Values(length, static_cast<uint32_t>(100 * t + length)));
      for (const auto& term : terms) pointers.push_back(term.data());
      std::vector<float> expected(length), out(length, -1.0f), also(length, -2.0f);
      for (size_t i = 0; i < length; ++i) {
        float sum = terms[0][i];
        for (size_t t = 1; t < count; ++t) sum += terms[t][i];
        expected[i] = sum;
      }
      SumInOrder(pointers.data(), count, length, out.data(), also.data());
      EXPECT_TRUE(SameBits(out.data(), expected.data(), length)) << count << " terms, " << length << " elements";
      EXPECT_TRUE(SameBits(also.data(), expected.data(), length)) << count << " terms, " << length << " elements";
    }
  }
}

// The order is what the test above pins down: the same terms summed last to first differ somewhere.
TEST(SumInOrder, OrderChangesTheBitsOfTheseTerms) {
  const size_t length = 64;
  std::vector<std::vector<float>> terms;
  for (uint32_t t = 0; t < 4; ++t) terms.push_back(Values(length, 7 + t));
  std::vector<const float*> forward, backward;
  for (const auto& term : terms) forward.push_back(term.data());
  for (auto it = terms.rbegin(); it != terms.rend(); ++it) backward.push_back(it->data());
  std::vector<float> a(length), b(length);
  SumInOrder(forward.data(), 4, length, a.data(), nullptr);
  SumInOrder(backward.data(), 4, length, b.data(), nullptr);
  EXPECT_FALSE(SameBits(a.data(), b.data(), length));
}

TEST(SumInOrder, SumsInPlaceIntoOneOfItsTerms) {
  const size_t length = 45;
  std::vector<float> first = Values(length, 1), second = Values(length, 2), third = Values(length, 3);
  std::vector<float> expected(length), copy(length);
  for (size_t i = 0; i < length; ++i) expected[i] = (first[i] + second[i]) + third[i];
  const float* terms[] = {first.data(), second.data(), third.data()};
  SumInOrder(terms, 3, length, second.data(), copy.data());
  EXPECT_TRUE(SameBits(second.data(), expected.data(), length));
  EXPECT_TRUE(SameBits(copy.data(), expected.data(), length));
}

TEST(SumInOrder, OneTermCopiesToBothOutputs) {
  const std::vector<float> source = Values(33, 5);
  std::vector<float> out(33), also(33);
  const float* terms[] = {source.data()};
  SumInOrder(terms, 1, source.size(), out.data(), also.data());
  EXPECT_EQ(out, source);
  EXPECT_EQ(also, source);
}

}  // namespace
}  // namespace gradagg
