// The oracle's unquantized modes, against sums written out here by hand.
#include "aggregator/serial_simulation.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>

namespace gradagg {
namespace {

std::vector<std::vector<float>> RandomInputs(size_t ranks, size_t count, uint32_t seed) {
  std::mt19937 generator(seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<std::vector<float>> inputs(ranks, std::vector<float>(count));
  for (auto& input : inputs) {
    for (float& v : input) v = uniform(generator);
  }
  return inputs;
}

std::vector<RankPlacement> Nodes(int nodes, int perNode) {
  std::vector<RankPlacement> placements;
  for (int n = 0; n < nodes; ++n) {
    for (int l = 0; l < perNode; ++l) placements.push_back({n, l});
  }
  return placements;
}

void ExpectSameBits(const std::vector<float>& actual, const std::vector<float>& expected) {
  ASSERT_EQ(actual.size(), expected.size());
  EXPECT_EQ(std::memcmp(actual.data(), expected.data(), actual.size() * sizeof(float)), 0);
}

TEST(SerialSimulation, OneRankIsTheIdentity) {
  SerialSimulation simulation(Nodes(1, 1), AggregatorOptions());
  const auto inputs = RandomInputs(1, 1234, 1);
  ExpectSameBits(simulation.Run(inputs), inputs[0]);
}

TEST(SerialSimulation, OneNodeIsTheExactSumInLocalRankOrder) {
  SerialSimulation simulation(Nodes(1, 4), AggregatorOptions());
  const auto inputs = RandomInputs(4, 3001, 2);
  std::vector<float> expected(3001);
  for (size_t i = 0; i < expected.size(); ++i)
    expected[i] = ((inputs[0][i] + inputs[1][i]) + inputs[2][i]) + inputs[3][i];
  ExpectSameBits(simulation.Run(inputs), expected);
}

TEST(SerialSimulation, RawBitsAcrossNodesSumNodeTotalsInNodeOrder) {
  AggregatorOptions options;
  options.bits = 32;
  SerialSimulation simulation(Nodes(3, 2), options);
  const auto inputs = RandomInputs(6, 2500, 3);
  std::vector<float> expected(2500);
  for (size_t i = 0; i < expected.size(); ++i) {
    const float node0 = inputs[0][i] + inputs[1][i];
    const float node1 = inputs[2][i] + inputs[3][i];
    const float node2 = inputs[4][i] + inputs[5][i];
    expected[i] = (node0 + node1) + node2;
  }
  ExpectSameBits(simulation.Run(inputs), expected);
  ExpectSameBits(simulation.Run(inputs), expected);  // no residual appears with raw floats
}

TEST(SerialSimulation, ANonContributingRankCountsAsZeros) {
  SerialSimulation withFlag(Nodes(2, 2), AggregatorOptions());
  SerialSimulation withZeros(Nodes(2, 2), AggregatorOptions());
  auto inputs = RandomInputs(4, 1500, 4);
  const std::vector<float> flagged = withFlag.Run(inputs, {true, false, true, true});
  std::fill(inputs[1].begin(), inputs[1].end(), 0.0f);
  ExpectSameBits(flagged, withZeros.Run(inputs));
}

TEST(SerialSimulation, OneBitAcrossNodesStaysCloseAndCarriesResiduals) {
  SerialSimulation simulation(Nodes(2, 1), AggregatorOptions());
  const auto inputs = RandomInputs(2, 4096, 5);
  const std::vector<float> first = simulation.Run(inputs);
  const std::vector<float> second = simulation.Run(inputs);
  EXPECT_NE(std::memcmp(first.data(), second.data(), first.size() * sizeof(float)), 0) << "residuals changed nothing";
  simulation.ResetResiduals();
  ExpectSameBits(simulation.Run(inputs), first);
  double error = 0.0;
  double norm = 0.0;
  for (size_t i = 0; i < first.size(); ++i) {
    const double exact = static_cast<double>(inputs[0][i]) + inputs[1][i];
    error += (first[i] - exact) * (first[i] - exact);
    norm += exact * exact;
  }
  EXPECT_LT(std::sqrt(error / norm), 1.0);  // 1 bit is coarse, but it is an estimate of the sum
}

TEST(SerialSimulation, RejectsPlacementsThatAreNotAGrid) {
  EXPECT_THROW(SerialSimulation({{0, 0}, {0, 1}, {1, 0}}, AggregatorOptions()), std::invalid_argument);
  EXPECT_THROW(SerialSimulation({{0, 0}, {0, 0}}, AggregatorOptions()), std::invalid_argument);
}

}  // namespace
}  // namespace gradagg
