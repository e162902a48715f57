// AggregateGradientsAsync and the double-buffered mode on real ranks, against the serial simulation bit for bit:
// the background changes when results arrive, never what they are.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

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

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

GradientHeader StepHeader(uint64_t step) {
  GradientHeader header;
  header.numSamples = 10 + step;
  header.criterion = 0.5;
  header.evalErrors = {{1.0, 2}};
  return header;
}

TEST(AggregateGradientsAsync, MatchesTheSimulationOverCallsThatCarryResiduals) {
  const AggregatorOptions options = LayoutOptions(1);
  Aggregator aggregator(MPI_COMM_WORLD, options);
  SerialSimulation oracle = Oracle(options);
  const size_t count = 3 * WorldSize() * options.bucketSize + 11;
  for (uint32_t step = 0; step < 4; ++step) {
    std::vector<float> gradient = RandomGradient(count, 70 + step, WorldRank());
    GradientHeader header = StepHeader(step);
    PendingAggregation pending = aggregator.AggregateGradientsAsync({{gradient.data(), gradient.size()}}, &header);
    pending.Wait();
    EXPECT_TRUE(pending.Done());
    EXPECT_TRUE(SameBits(gradient, oracle.Run(AllInputs(count, 70 + step)))) << "step " << step;
    EXPECT_TRUE(IdenticalOnAllRanks(gradient)) << "step " << step;
    EXPECT_EQ(header.numSamples, (10 + step) * static_cast<uint64_t>(WorldSize()));
  }
}

TEST(AggregateGradientsAsync, ReturnsBeforeASlowRankArrivesAndWaitReturnsAfter) {
  if (WorldSize() < 2) GTEST_SKIP() << "needs two ranks";
  const AggregatorOptions options = LayoutOptions(2);
  Aggregator aggregator(MPI_COMM_WORLD, options);
  SerialSimulation oracle = Oracle(options);
  const size_t count = 4000;
  std::vector<float> gradient = RandomGradient(count, 5, WorldRank());
  constexpr double kDelay = 1.5;
  const bool slow = WorldRank() == WorldSize() - 1;
  if (slow) std::this_thread::sleep_for(std::chrono::duration<double>(kDelay));

  const auto start = std::chrono::steady_clock::now();
  PendingAggregation pending = aggregator.AggregateGradientsAsync({{gradient.data(), gradient.size()}});
  const double returned = SecondsSince(start);
  const bool doneAtOnce = pending.Done();
  pending.Wait();
  const double waited = SecondsSince(start);
  if (!slow) {
    EXPECT_LT(returned, kDelay / 3) << "the call waited for the slow rank";
    EXPECT_FALSE(doneAtOnce) << "finished without the slow rank";
    EXPECT_GT(waited, kDelay / 3) << "Wait returned before the slow rank could have taken part";
  }
  EXPECT_TRUE(SameBits(gradient, oracle.Run(AllInputs(count, 5))));
}

TEST(AggregateGradientsAsync, AMismatchThrowsFromWaitOnEveryRankAndTheAggregatorStaysUsable) {
  if (WorldSize() < 2) GTEST_SKIP() << "needs two ranks";
  const AggregatorOptions options = LayoutOptions(1);
  Aggregator aggregator(MPI_COMM_WORLD, options);
  std::vector<float> gradient = RandomGradient(1000, 3, WorldRank());
  const size_t count = WorldRank() == 0 ? 999 : 1000;
  PendingAggregation pending = aggregator.AggregateGradientsAsync({{gradient.data(), count}});
  try {
    pending.Wait();
    ADD_FAILURE() << "no exception";
  } catch (const UsageError& error) {
    EXPECT_NE(std::string(error.what()).find("999"), std::string::npos) << error.what();
  }
  SerialSimulation oracle = Oracle(options);
  aggregator.AggregateGradientsAsync({{gradient.data(), gradient.size()}}).Wait();
  EXPECT_TRUE(SameBits(gradient, oracle.Run(AllInputs(1000, 3))));
}

TEST(AggregateGradientsAsync, AnErrorNobodyWaitedForIsThrownByTheNextCall) {
  if (WorldSize() < 2) GTEST_SKIP() << "needs two ranks";
  Aggregator aggregator(MPI_COMM_WORLD, LayoutOptions(1));
  std::vector<float> gradient(100, 1.0f);
  {
    PendingAggregation dropped =
        aggregator.AggregateGradientsAsync({{gradient.data(), WorldRank() == 0 ? size_t{99} : size_t{100}}});
  }
  EXPECT_THROW(aggregator.AggregateGradients(gradient.data(), gradient.size()), UsageError);
  aggregator.AggregateGradients(gradient.data(), gradient.size());  // reported once, then usable
  EXPECT_TRUE(IdenticalOnAllRanks(gradient));
}

TEST(AggregateGradientsAsync, ABlockingCallWaitsForThePendingOne) {
  const AggregatorOptions options = LayoutOptions(4);
  Aggregator aggregator(MPI_COMM_WORLD, options);
  SerialSimulation oracle = Oracle(options);
  std::vector<float> first = RandomGradient(2000, 11, WorldRank());
  std::vector<float> second = RandomGradient(2000, 12, WorldRank());
  PendingAggregation pending = aggregator.AggregateGradientsAsync({{first.data(), first.size()}});
  aggregator.AggregateGradients(second.data(), second.size());
  EXPECT_TRUE(pending.Done());
  EXPECT_TRUE(SameBits(first, oracle.Run(AllInputs(2000, 11))));
  EXPECT_TRUE(SameBits(second, oracle.Run(AllInputs(2000, 12))));
  EXPECT_EQ(aggregator.LastStats().times.total > 0.0, true);
}

TEST(AggregateGradientsAsync, IsRefusedOnADoubleBufferedAggregator) {
  AggregatorOptions options = LayoutOptions(1);
  options.doubleBuffered = true;
  Aggregator aggregator(MPI_COMM_WORLD, options);
  std::vector<float> gradient(10, 1.0f);
  EXPECT_THROW(aggregator.AggregateGradientsAsync({{gradient.data(), gradient.size()}}), UsageError);
}

// Step t returns step t-1's aggregate (zeros and an empty header first); the flush hands out the last one.
TEST(DoubleBuffered, EachCallReturnsThePreviousStepsAggregateAndFlushTheLast) {
  AggregatorOptions options = LayoutOptions(1);
  options.doubleBuffered = true;
  Aggregator aggregator(MPI_COMM_WORLD, options);
  SerialSimulation oracle = Oracle(options);
  const size_t count = 2 * WorldSize() * options.bucketSize + 5;
  std::vector<float> expected;
  for (uint32_t step = 0; step < 4; ++step) {
    std::vector<float> gradient = RandomGradient(count, 90 + step, WorldRank());
    GradientHeader header = StepHeader(step);
    aggregator.AggregateGradients({{gradient.data(), gradient.size()}}, &header);
    if (step == 0) {
      EXPECT_TRUE(SameBits(gradient, std::vector<float>(count, 0.0f))) << "the first call has nothing to return";
      EXPECT_EQ(header.numSamples, 0u);
      ASSERT_EQ(header.evalErrors.size(), 1u);
      EXPECT_EQ(header.evalErrors[0].numSamples, 0u);
    } else {
      EXPECT_TRUE(SameBits(gradient, expected)) << "step " << step;
      EXPECT_EQ(header.numSamples, (10 + step - 1) * static_cast<uint64_t>(WorldSize())) << "step " << step;
    }
    expected = oracle.Run(AllInputs(count, 90 + step));
  }
  std::vector<float> last(count, -1.0f);
  GradientHeader header = StepHeader(0);
  EXPECT_TRUE(aggregator.FlushDoubleBuffer({{last.data(), last.size()}}, &header));
  EXPECT_TRUE(SameBits(last, expected));
  EXPECT_EQ(header.numSamples, 13u * static_cast<uint64_t>(WorldSize()));
  EXPECT_FALSE(aggregator.FlushDoubleBuffer({{last.data(), last.size()}}, &header)) << "nothing is waiting";

  std::vector<float> again = RandomGradient(count, 99, WorldRank());
  aggregator.AggregateGradients(again.data(), again.size());
  EXPECT_TRUE(SameBits(again, std::vector<float>(count, 0.0f))) << "after a flush the next call starts afresh";
  EXPECT_TRUE(aggregator.FlushDoubleBuffer({{again.data(), again.size()}}));
  EXPECT_TRUE(SameBits(again, oracle.Run(AllInputs(count, 99))));
}

TEST(DoubleBuffered, ASizeChangeIsReportedOnEveryRankByTheNextCall) {
  AggregatorOptions options = LayoutOptions(1);
  options.doubleBuffered = true;
  Aggregator aggregator(MPI_COMM_WORLD, options);
  std::vector<float> gradient(300, 1.0f);
  aggregator.AggregateGradients(gradient.data(), 100);
  aggregator.AggregateGradients(gradient.data(), 200);
  EXPECT_TRUE(SameBits(std::vector<float>(gradient.begin(), gradient.begin() + 200), std::vector<float>(200, 0.0f)))
      << "an aggregate that does not fit is not written";
  try {
    aggregator.AggregateGradients(gradient.data(), 200);
    ADD_FAILURE() << "no exception";
  } catch (const UsageError& error) {
    EXPECT_NE(std::string(error.what()).find("flush first"), std::string::npos) << error.what();
  }
  std::fill(gradient.begin(), gradient.end(), 1.0f);
  aggregator.AggregateGradients(gradient.data(), 200);  // starts afresh
  EXPECT_TRUE(aggregator.FlushDoubleBuffer({{gradient.data(), 200}}));
  EXPECT_TRUE(IdenticalOnAllRanks(gradient));
  std::vector<float> wrong(7);
  aggregator.AggregateGradients(gradient.data(), 200);
  EXPECT_THROW(aggregator.FlushDoubleBuffer({{wrong.data(), wrong.size()}}), UsageError);
}

}  // namespace
}  // namespace gradagg
