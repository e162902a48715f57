// What a trainer gets back from the quantized exchange, on the layout the CTest entry asks for: the error per bit
// width, a small tensor of large values kept by buckets of its own, a tensor-size mismatch caught, and a NaN or Inf at
// one step that never reaches a later step (non_finite_scenario.h).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "gradagg/aggregator.h"
#include "non_finite_scenario.h"
#include "oracle_support.h"
#include "test/common/relative_error.h"

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
    const double error = test::RelativeL2Error(gradient, exact);
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

TEST(TensorBuckets, ANewLayoutStartsFreshResidualsEvenWhereAStripeKeepsItsShape) {
  // 2048 elements as one tensor, then as two of 1024: with buckets of 512 the shards (and so every stripe) are the
  // same, but the call's layout changed, so every rank starts fresh residuals, as the simulation does.
  const AggregatorOptions options = LayoutOptions(2);
  Aggregator aggregator(MPI_COMM_WORLD, options);
  SerialSimulation oracle = Oracle(options);
  const size_t count = 2048;
  std::vector<float> gradient = RandomGradient(count, 1, WorldRank());
  aggregator.AggregateGradients(gradient.data(), gradient.size());
  EXPECT_TRUE(SameBits(gradient, oracle.Run(AllInputs(count, 1))));
  gradient = RandomGradient(count, 2, WorldRank());
  aggregator.AggregateGradients({{gradient.data(), 1024}, {gradient.data() + 1024, 1024}});
  EXPECT_TRUE(SameBits(gradient, oracle.Run(AllInputs(count, 2), {}, {1024, 1024})));
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

class NonFiniteInput : public ::testing::TestWithParam<int> {};

TEST_P(NonFiniteInput, PoisonsOneStepsBucketOnlyIsCountedAndLeavesTheResidualsAlone) {
  const AggregatorOptions options = LayoutOptions(GetParam());
  const bool quantized = Aggregator(MPI_COMM_WORLD, options).nodeCount() > 1 && options.bits != 32;
  test::NonFiniteScenario::Expect(options, quantized, [](const AggregatorOptions& callOptions) {
    auto aggregator = std::make_shared<Aggregator>(MPI_COMM_WORLD, callOptions);
    return [aggregator](const std::vector<std::vector<float>>& inputs) {
      test::NonFiniteScenario::Outcome outcome{inputs[static_cast<size_t>(WorldRank())], 0};
      std::vector<GradientBuffer> buffers;
      size_t offset = 0;
      for (size_t length : test::NonFiniteScenario::Tensors()) {
        buffers.push_back({outcome.result.data() + offset, length});
        offset += length;
      }
      aggregator->AggregateGradients(buffers);
      outcome.nonFiniteBuckets = aggregator->LastStats().nonFiniteBuckets;
      return outcome;
    };
  });
}

INSTANTIATE_TEST_SUITE_P(EveryBitWidth, NonFiniteInput, ::testing::Values(1, 2, 4, 8, 32));

}  // namespace
}  // namespace gradagg
