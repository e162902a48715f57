// What a trainer gets back from the quantized exchange, on the layout the CTest entry asks for: the error per bit
// width, a small tensor of large values kept by buckets of its own, a tensor-size mismatch caught, and a NaN or Inf on
// one rank at one step that never reaches a later step.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "gradagg/aggregator.h"
#include "oracle_support.h"

namespace gradagg {
namespace {

using test::AllInputs;
using test::IdenticalOnAllRanks;
using test::LayoutOptions;
using test::Oracle;
using test::RandomGradient;
using test::SameBits;
using test::WorldRank;
using test::WorldSize;

std::vector<float> ExactSum(const std::vector<std::vector<float>>& inputs) {
  std::vector<float> sum(inputs[0].size(), 0.0f);
  for (const std::vector<float>& input : inputs) {
    for (size_t i = 0; i < sum.size(); ++i) sum[i] += input[i];
  }
  return sum;
}

double RelativeError(const std::vector<float>& result, const std::vector<float>& exact) {
  double error = 0.0;
  double norm = 0.0;
  for (size_t i = 0; i < exact.size(); ++i) {
    error += (static_cast<double>(result[i]) - exact[i]) * (static_cast<double>(result[i]) - exact[i]);
    norm += static_cast<double>(exact[i]) * exact[i];
  }
  return std::sqrt(error / norm);
}

// The same on every rank (the smallest and the largest agree).
bool SameOnAllRanks(size_t value) {
  unsigned long long mine = value;
  unsigned long long lowest = 0;
  unsigned long long highest = 0;
  MPI_Allreduce(&mine, &lowest, 1, MPI_UNSIGNED_LONG_LONG, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(&mine, &highest, 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
  return lowest == highest;
}

TEST(QuantizationQuality, OneAggregationErrorFallsWithEveryBitWidthUnderItsBound) {
  const size_t count = 64 * 1024;
  const std::vector<std::vector<float>> inputs = AllInputs(count, 5);
  const std::vector<float> exact = ExactSum(inputs);
  const std::pair<int, double> bounds[] = {{1, 1.0}, {2, 0.50}, {4, 0.17}, {8, 0.015}};
  double previous = 2.0;
  for (const auto& [bits, bound] : bounds) {
    Aggregator aggregator(MPI_COMM_WORLD, LayoutOptions(bits));
    if (aggregator.nodeCount() == 1) GTEST_SKIP() << "one node: the sum is exact";
    std::vector<float> gradient = inputs[static_cast<size_t>(WorldRank())];
    aggregator.AggregateGradients(gradient.data(), gradient.size());
    const double error = RelativeError(gradient, exact);
    EXPECT_LE(error, bound) << "bits " << bits;
    EXPECT_LT(error, previous) << "bits " << bits << " is no better than fewer bits";
    if (WorldRank() == 0) std::printf("# %d bits: relative L2 error %.4f of one aggregation\n", bits, error);
    previous = error;
  }
}

TEST(TensorBuckets, SmallTensorOfLargeValuesKeepsItsValueBesideALargeTensor) {
  for (int bits : {4, 8}) {
    const AggregatorOptions options = LayoutOptions(bits);
    Aggregator aggregator(MPI_COMM_WORLD, options);
    SerialSimulation oracle = Oracle(options);
    std::vector<std::vector<float>> inputs;
    for (int r = 0; r < WorldSize(); ++r) {
      std::vector<float> input = RandomGradient(7654, 13, r);
      for (size_t i = 2; i < input.size(); ++i) input[i] *= 0.001f;  // weights: small
      input[0] = 3.0f + static_cast<float>(r);                       // bias: large
      input[1] = -5.0f - static_cast<float>(r);
      inputs.push_back(input);
    }
    std::vector<float> bias(inputs[static_cast<size_t>(WorldRank())].begin(),
                            inputs[static_cast<size_t>(WorldRank())].begin() + 2);
    std::vector<float> weights(inputs[static_cast<size_t>(WorldRank())].begin() + 2,
                               inputs[static_cast<size_t>(WorldRank())].end());
    aggregator.AggregateGradients({{bias.data(), bias.size()}, {weights.data(), weights.size()}});
    const std::vector<float> exact = ExactSum(inputs);
    EXPECT_GE(bias[0] / exact[0], 0.9f) << "bits " << bits;
    EXPECT_GE(bias[1] / exact[1], 0.9f) << "bits " << bits;
    std::vector<float> joined(bias);
    joined.insert(joined.end(), weights.begin(), weights.end());
    EXPECT_TRUE(SameBits(joined, oracle.Run(inputs, {}, {2, 7652}))) << "bits " << bits;
  }
}

TEST(TensorBuckets, TensorSizeMismatchThrowsOnEveryRank) {
  if (WorldSize() < 2) GTEST_SKIP() << "needs two ranks";
  Aggregator aggregator(MPI_COMM_WORLD, LayoutOptions(1));
  std::vector<float> gradient(1000, 1.0f);
  const size_t split = WorldRank() == 1 ? 300 : 400;  // the same total, other tensors
  try {
    aggregator.AggregateGradients({{gradient.data(), split}, {gradient.data() + split, 1000 - split}});
    ADD_FAILURE() << "no exception";
  } catch (const UsageError& error) {
    EXPECT_NE(std::string(error.what()).find("tensor sizes"), std::string::npos) << error.what();
  }
}

// A NaN, +Inf or -Inf at step 1 of 4, on the last rank or on every rank, in tensor 2 of [3, 1000, 2997] (bucket
// [1003, 1515) with buckets of 512).
class NonFiniteInput : public ::testing::TestWithParam<int> {
 protected:
  static constexpr size_t kCount = 4000;
  static constexpr size_t kBad = 1500;
  static constexpr size_t kBucketBegin = 1003;
  static constexpr size_t kBucketEnd = 1515;
  const std::vector<size_t> tensors_ = {3, 1000, 2997};

  std::vector<std::vector<float>> Inputs(uint32_t step, bool poisoned, float bad, bool everyRank) const {
    std::vector<std::vector<float>> inputs = AllInputs(kCount, 90 + step);
    for (size_t r = everyRank ? 0 : inputs.size() - 1; poisoned && r < inputs.size(); ++r) inputs[r][kBad] = bad;
    return inputs;
  }
  // One call on this rank's input as the call's tensors; returns the result.
  std::vector<float> Call(Aggregator& aggregator, const std::vector<std::vector<float>>& inputs) const {
    std::vector<float> gradient = inputs[static_cast<size_t>(WorldRank())];
    std::vector<GradientBuffer> buffers;
    size_t offset = 0;
    for (size_t length : tensors_) {
      buffers.push_back({gradient.data() + offset, length});
      offset += length;
    }
    aggregator.AggregateGradients(buffers);
    return gradient;
  }
};

TEST_P(NonFiniteInput, PoisonsOneStepsBucketOnlyIsCountedAndLeavesTheResidualsAlone) {
  const int bits = GetParam();
  const AggregatorOptions options = LayoutOptions(bits);
  for (const bool everyRank : {false, true}) {
    for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                      -std::numeric_limits<float>::infinity()}) {
      const std::string what = "bits " + std::to_string(bits) + " bad " + std::to_string(bad) +
                               (everyRank ? " on every rank" : " on the last rank");
      Aggregator aggregator(MPI_COMM_WORLD, options);
      SerialSimulation oracle = Oracle(options);
      Aggregator clean(MPI_COMM_WORLD, options);  // the same steps without step 1
      const bool quantized = aggregator.nodeCount() > 1 && bits != 32;
      for (uint32_t step = 0; step < 4; ++step) {
        const bool poisoned = step == 1;
        const std::vector<std::vector<float>> inputs = Inputs(step, poisoned, bad, everyRank);
        const std::vector<float> result = Call(aggregator, inputs);
        const std::vector<float> expected = oracle.Run(inputs, {}, tensors_);
        const size_t counted = aggregator.LastStats().nonFiniteBuckets;
        EXPECT_TRUE(IdenticalOnAllRanks(result)) << what << " step " << step;
        EXPECT_TRUE(SameOnAllRanks(counted)) << what << " step " << step;
        EXPECT_EQ(counted, oracle.lastNonFiniteBuckets()) << what << " step " << step;
        if (!poisoned) {
          EXPECT_TRUE(SameBits(result, expected)) << what << " step " << step << ": differs from the simulation";
          EXPECT_EQ(counted, 0u) << what << " step " << step;
          for (size_t i = 0; i < kCount; ++i)
            ASSERT_TRUE(std::isfinite(result[i])) << what << " step " << step << " " << i;
        } else {
          // Across nodes, quantized: the whole bucket; otherwise (exact sums, raw floats) the element alone.
          EXPECT_EQ(counted, quantized ? 1u : 0u) << what;
          for (size_t i = 0; i < kCount; ++i) {
            const bool inBucket = quantized ? i >= kBucketBegin && i < kBucketEnd : i == kBad;
            ASSERT_EQ(std::isfinite(result[i]), !inBucket) << what << " element " << i;
            ASSERT_EQ(std::isfinite(expected[i]), !inBucket) << what << " simulation, element " << i;
          }
        }
        if (poisoned) continue;
        const std::vector<float> cleanResult = Call(clean, inputs);
        if (step == 2 && quantized && everyRank) {
          // Every node's input of the bucket held the NaN or Inf, so all its residuals (each node's stripe residual
          // and the owner's) kept their values from step 0: step 2 there is as if step 1 had never been. (Poisoned on
          // one rank only, the other nodes' finite inputs are quantized as usual and their residuals move on.)
          for (size_t i = kBucketBegin; i < kBucketEnd; ++i)
            ASSERT_EQ(std::memcmp(&result[i], &cleanResult[i], sizeof(float)), 0) << what << " element " << i;
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(EveryBitWidth, NonFiniteInput, ::testing::Values(1, 2, 4, 8, 32));

}  // namespace
}  // namespace gradagg
