// AggregateGradients on real ranks against the serial simulation, bit for bit, on the layout the CTest entry asks
// for (mpiexec -np P with GRADAGG_TEST_RANKS_PER_NODE), plus every way a caller can get it wrong.
#include <gtest/gtest.h>

#include <numeric>

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

// Runs one call on every rank and checks it against the simulation; returns the result.
std::vector<float> ExpectMatchesOracle(Aggregator& aggregator, SerialSimulation& oracle, size_t count, uint32_t seed,
                                       const std::string& what) {
  std::vector<float> gradient = RandomGradient(count, seed, WorldRank());
  aggregator.AggregateGradients(gradient.data(), gradient.size());
  const std::vector<float> expected = oracle.Run(AllInputs(count, seed));
  EXPECT_TRUE(SameBits(gradient, expected)) << what << ": differs from the serial simulation";
  EXPECT_TRUE(IdenticalOnAllRanks(gradient)) << what << ": ranks differ";
  return gradient;
}

TEST(AggregateGradients, MatchesTheSimulationForEveryBitWidthAndAwkwardSize) {
  const int ranks = WorldSize();
  for (int bits : {1, 2, 4, 8, 32}) {
    const AggregatorOptions options = LayoutOptions(bits);
    Aggregator aggregator(MPI_COMM_WORLD, options);
    SerialSimulation oracle = Oracle(options);
    const size_t bucket = options.bucketSize;
    for (size_t count : {size_t{0}, size_t{1}, size_t{2}, size_t{5}, bucket - 1, bucket, bucket + 1, ranks * bucket - 3,
                         3 * ranks * bucket + 7, size_t{100003}}) {
      aggregator.ResetResiduals();
      oracle.ResetResiduals();
      ExpectMatchesOracle(aggregator, oracle, count, static_cast<uint32_t>(count + 1),
                          "bits " + std::to_string(bits) + " count " + std::to_string(count));
    }
  }
}

TEST(AggregateGradients, ResidualsPersistAcrossCallsAndReset) {
  const AggregatorOptions options = LayoutOptions(1);
  Aggregator aggregator(MPI_COMM_WORLD, options);
  SerialSimulation oracle = Oracle(options);
  std::vector<float> first;
  for (uint32_t step = 0; step < 3; ++step) {
    const std::vector<float> result = ExpectMatchesOracle(aggregator, oracle, 5000, 40 + step, "step");
    if (step == 0) first = result;
  }
  aggregator.ResetResiduals();
  oracle.ResetResiduals();
  EXPECT_TRUE(SameBits(ExpectMatchesOracle(aggregator, oracle, 5000, 40, "after reset"), first));
}

TEST(AggregateGradients, ChangingSizesStartFreshResiduals) {
  const AggregatorOptions options = LayoutOptions(2);
  Aggregator aggregator(MPI_COMM_WORLD, options);
  SerialSimulation oracle = Oracle(options);
  for (size_t count : {3000, 700, 700, 9001, 3000}) ExpectMatchesOracle(aggregator, oracle, count, 7, "resized");
}

TEST(AggregateGradients, EveryOptionMatchesTheSimulation) {
  for (int variant = 0; variant < 4; ++variant) {
    AggregatorOptions options = LayoutOptions(1);
    options.meanThreshold = variant == 1;
    options.errorFeedback = variant != 2;
    options.quantizeOwnStripe = variant != 3;
    options.bucketSize = variant == 0 ? 100 : 512;
    Aggregator aggregator(MPI_COMM_WORLD, options);
    SerialSimulation oracle = Oracle(options);
    for (uint32_t step = 0; step < 2; ++step) {
      ExpectMatchesOracle(aggregator, oracle, 4321, 60 + step, Describe(options));
    }
  }
}

// Phase 2 in pieces (AggregatorOptions::pieceBytes) changes no bit: from a piece per bucket to one per part, with
// tensors of their own, over calls that carry residuals.
TEST(AggregateGradients, PiecesLeaveEveryBitAsItWas) {
  for (int bits : {1, 2, 32}) {
    for (size_t pieceBytes : {size_t{1}, size_t{200}, size_t{4096}, size_t{0}}) {
      AggregatorOptions options = LayoutOptions(bits);
      options.pieceBytes = pieceBytes;
      options.bucketSize = 64;
      Aggregator aggregator(MPI_COMM_WORLD, options);
      SerialSimulation oracle = Oracle(options);
      for (uint32_t step = 0; step < 2; ++step) {
        ExpectMatchesOracle(
            aggregator, oracle, 40009, 70 + step,
            "bits " + std::to_string(bits) + " piece " + std::to_string(pieceBytes) + " step " + std::to_string(step));
      }
    }
  }
}

TEST(AggregateGradients, AListOfBuffersIsTheCallsTensorsWithBucketsOfTheirOwn) {
  const AggregatorOptions options = LayoutOptions(4);
  Aggregator aggregator(MPI_COMM_WORLD, options);
  SerialSimulation oracle = Oracle(options);
  const size_t count = 4000;
  std::vector<float> flat = RandomGradient(count, 77, WorldRank());
  std::vector<float> a(flat.begin(), flat.begin() + 3);
  std::vector<float> b(flat.begin() + 3, flat.begin() + 703);
  std::vector<float> c(flat.begin() + 703, flat.end());
  aggregator.AggregateGradients({{a.data(), a.size()}, {nullptr, 0}, {b.data(), b.size()}, {c.data(), c.size()}});
  std::vector<float> joined(a);
  joined.insert(joined.end(), b.begin(), b.end());
  joined.insert(joined.end(), c.begin(), c.end());
  EXPECT_TRUE(SameBits(joined, oracle.Run(AllInputs(count, 77), {}, {3, 0, 700, 3297})));
  if (aggregator.nodeCount() > 1) {  // across nodes the buckets matter: one flat tensor quantizes otherwise
    SerialSimulation flatOracle = Oracle(options);
    EXPECT_FALSE(SameBits(joined, flatOracle.Run(AllInputs(count, 77))));
  }
}

TEST(AggregateGradients, OneNodeGivesTheExactSumInLocalOrder) {
  Aggregator aggregator(MPI_COMM_WORLD, LayoutOptions(1));
  if (aggregator.nodeCount() != 1) GTEST_SKIP() << "layout has several nodes";
  const size_t count = 3333;
  std::vector<float> gradient = RandomGradient(count, 5, WorldRank());
  aggregator.AggregateGradients(gradient.data(), gradient.size());
  const auto inputs = AllInputs(count, 5);
  std::vector<float> expected(inputs[0]);
  for (size_t r = 1; r < inputs.size(); ++r) {
    for (size_t i = 0; i < count; ++i) expected[i] += inputs[r][i];
  }
  EXPECT_TRUE(SameBits(gradient, expected));
}

TEST(AggregateGradients, ZeroSampleRankContributesNothingAndHeadersAdd) {
  const AggregatorOptions options = LayoutOptions(1);
  Aggregator aggregator(MPI_COMM_WORLD, options);
  SerialSimulation oracle = Oracle(options);
  const int ranks = WorldSize();
  const int idle = ranks - 1;
  const size_t count = 2500;
  std::vector<float> gradient = RandomGradient(count, 9, WorldRank());
  GradientHeader header;
  header.numSamples = WorldRank() == idle ? 0 : 10;
  header.numSamplesWithLabel = WorldRank() == idle ? 0 : 8;
  header.criterion = WorldRank() == idle ? 0.0 : 1.25;
  header.evalErrors = {{0.5, 3}, {2.0, 1}};
  aggregator.AggregateGradients(gradient.data(), gradient.size(), &header);

  std::vector<bool> contributes(static_cast<size_t>(ranks), true);
  contributes[static_cast<size_t>(idle)] = false;
  EXPECT_TRUE(SameBits(gradient, oracle.Run(AllInputs(count, 9), contributes)));
  EXPECT_EQ(header.numSamples, 10u * static_cast<uint64_t>(ranks - 1));
  EXPECT_EQ(header.numSamplesWithLabel, 8u * static_cast<uint64_t>(ranks - 1));
  EXPECT_DOUBLE_EQ(header.criterion, 1.25 * (ranks - 1));
  ASSERT_EQ(header.evalErrors.size(), 2u);
  EXPECT_DOUBLE_EQ(header.evalErrors[0].errorSum, 0.5 * ranks);
  EXPECT_EQ(header.evalErrors[1].numSamples, static_cast<uint64_t>(ranks));
}

TEST(AggregateGradients, SizeMismatchThrowsOnEveryRankAndLeavesTheAggregatorUsable) {
  if (WorldSize() < 2) GTEST_SKIP() << "needs two ranks";
  const AggregatorOptions options = LayoutOptions(1);
  Aggregator aggregator(MPI_COMM_WORLD, options);
  std::vector<float> gradient = RandomGradient(1000, 3, WorldRank());
  const std::vector<float> before = gradient;
  const size_t count = WorldRank() == WorldSize() - 1 ? 999 : 1000;
  try {
    aggregator.AggregateGradients(gradient.data(), count);
    ADD_FAILURE() << "no exception";
  } catch (const UsageError& error) {
    EXPECT_NE(std::string(error.what()).find("999"), std::string::npos) << error.what();
  }
  EXPECT_TRUE(SameBits(gradient, before)) << "a rejected call must not touch the gradient";
  SerialSimulation oracle = Oracle(options);
  ExpectMatchesOracle(aggregator, oracle, 1000, 3, "after the mismatch");
}

TEST(AggregateGradients, HeaderMismatchThrowsOnEveryRank) {
  if (WorldSize() < 2) GTEST_SKIP() << "needs two ranks";
  Aggregator aggregator(MPI_COMM_WORLD, LayoutOptions(1));
  std::vector<float> gradient(100, 1.0f);
  GradientHeader header;
  header.numSamples = 1;
  if (WorldRank() == 1) header.evalErrors.resize(2);
  EXPECT_THROW(aggregator.AggregateGradients(gradient.data(), gradient.size(), &header), UsageError);
  EXPECT_THROW(aggregator.AggregateGradients(gradient.data(), gradient.size(), WorldRank() == 0 ? nullptr : &header),
               UsageError);
}

TEST(AggregateGradients, BadBufferOnOneRankThrowsOnEveryRank) {
  Aggregator aggregator(MPI_COMM_WORLD, LayoutOptions(1));
  std::vector<float> gradient(100, 1.0f);
  float* data = WorldRank() == 0 ? nullptr : gradient.data();
  try {
    aggregator.AggregateGradients(data, gradient.size());
    ADD_FAILURE() << "no exception";
  } catch (const UsageError& error) {
    EXPECT_NE(std::string(error.what()).find("rank 0"), std::string::npos) << error.what();
  }
}

TEST(Aggregator, MismatchedOptionsThrowOnEveryRank) {
  if (WorldSize() < 2) GTEST_SKIP() << "needs two ranks";
  AggregatorOptions options = LayoutOptions(1);
  if (WorldRank() == 1) options.bits = 8;
  EXPECT_THROW(Aggregator(MPI_COMM_WORLD, options), UsageError);
}

// Ranks that cut phase 2 into different pieces would send messages the others do not expect.
TEST(Aggregator, MismatchedPieceSizesThrowOnEveryRank) {
  if (WorldSize() < 2) GTEST_SKIP() << "needs two ranks";
  AggregatorOptions options = LayoutOptions(1);
  if (WorldRank() == 1) options.pieceBytes = 0;
  try {
    Aggregator aggregator(MPI_COMM_WORLD, options);
    ADD_FAILURE() << "no exception";
  } catch (const UsageError& error) {
    EXPECT_NE(std::string(error.what()).find("piece bytes"), std::string::npos) << error.what();
  }
}

TEST(Aggregator, BadOptionsOnOneRankThrowOnEveryRank) {
  AggregatorOptions options = LayoutOptions(1);
  if (WorldRank() == 0) options.bucketSize = 0;
  EXPECT_THROW(Aggregator(MPI_COMM_WORLD, options), UsageError);
}

TEST(Aggregator, RanksPerNodeThatDoesNotDivideTheRanksThrowsOnEveryRank) {
  if (WorldSize() < 2) GTEST_SKIP() << "every count divides one rank";
  AggregatorOptions options;
  options.ranksPerNode = WorldSize() + 1;
  try {
    Aggregator aggregator(MPI_COMM_WORLD, options);
    ADD_FAILURE() << "no exception";
  } catch (const UsageError& error) {
    EXPECT_NE(std::string(error.what()).find("does not divide"), std::string::npos) << error.what();
  }
}

TEST(Aggregator, ReportsTheLayoutItWasAskedFor) {
  Aggregator aggregator(MPI_COMM_WORLD, LayoutOptions(1));
  const int perNode = test::TestRanksPerNode();
  if (perNode > 0) {
    EXPECT_EQ(aggregator.ranksPerNode(), perNode);
    EXPECT_EQ(aggregator.nodeCount(), WorldSize() / perNode);
  } else {
    EXPECT_EQ(aggregator.nodeCount(), 1);  // every rank of a test shares this host
  }
}

}  // namespace
}  // namespace gradagg
