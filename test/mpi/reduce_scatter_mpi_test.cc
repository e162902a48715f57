// ReduceScatterGradients on real ranks against the serial simulation, bit for bit, on the layout the CTest entry asks
// for: this rank's shard holds what AggregateGradients would put there, the rest keeps the rank's input, the node's
// shards cover the gradient once, and reduce-scatters and whole calls share their carried error.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gradagg/aggregator.h"
#include "oracle_support.h"

namespace gradagg {
namespace {

using test::AllInputs;
using test::LayoutOptions;
using test::Oracle;
using test::RandomGradient;
using test::SameBits;
using test::WorldRank;
using test::WorldSize;

std::vector<float> Slice(const std::vector<float>& values, ShardRange range) {
  return {values.begin() + static_cast<std::ptrdiff_t>(range.begin),
          values.begin() + static_cast<std::ptrdiff_t>(range.begin + range.count)};
}

// The node's ranks' shards, in local-rank order, cover [0, count) once (a node's ranks are consecutive here).
bool ShardsCoverTheNode(ShardRange mine, size_t count, int ranksPerNode) {
  const unsigned long long local[2] = {mine.begin, mine.count};
  std::vector<unsigned long long> all(2 * static_cast<size_t>(WorldSize()));
  MPI_Allgather(local, 2, MPI_UNSIGNED_LONG_LONG, all.data(), 2, MPI_UNSIGNED_LONG_LONG, MPI_COMM_WORLD);
  const int first = WorldRank() / ranksPerNode * ranksPerNode;
  unsigned long long next = 0;
  for (int rank = first; rank < first + ranksPerNode; ++rank) {
    if (all[2 * static_cast<size_t>(rank)] != next) return false;
    next += all[2 * static_cast<size_t>(rank) + 1];
  }
  return next == count;
}

// After a reduce-scatter: the shard of `gradient` is the oracle's, the rest this rank's input.
void ExpectShardAndRest(const std::vector<float>& gradient, const std::vector<float>& input,
                        const std::vector<float>& expected, ShardRange shard, const std::string& what) {
  ASSERT_LE(shard.begin + shard.count, gradient.size()) << what;
  EXPECT_TRUE(SameBits(Slice(gradient, shard), Slice(expected, shard))) << what << ": the shard differs";
  std::vector<float> rest = gradient;
  std::copy(input.begin() + static_cast<std::ptrdiff_t>(shard.begin),
            input.begin() + static_cast<std::ptrdiff_t>(shard.begin + shard.count),
            rest.begin() + static_cast<std::ptrdiff_t>(shard.begin));
  EXPECT_TRUE(SameBits(rest, input)) << what << ": outside the shard the input changed";
}

// One reduce-scatter on every rank, checked against the oracle.
void ExpectReduceScatterMatches(Aggregator& aggregator, SerialSimulation& oracle, size_t count, uint32_t seed,
                                const std::string& what) {
  const std::vector<float> input = RandomGradient(count, seed, WorldRank());
  std::vector<float> gradient = input;
  const ShardRange shard = aggregator.ReduceScatterGradients({{gradient.data(), gradient.size()}});
  ExpectShardAndRest(gradient, input, oracle.Run(AllInputs(count, seed)), shard, what);
  const int perNode = aggregator.ranksPerNode();
  EXPECT_TRUE(ShardsCoverTheNode(shard, count, perNode)) << what << ": the node's shards do not cover the gradient";
}

TEST(ReduceScatterGradients, MatchesTheSimulationForEveryBitWidthAndAwkwardSize) {
  for (int bits : {1, 2, 4, 8, 32}) {
    const AggregatorOptions options = LayoutOptions(bits);
    Aggregator aggregator(MPI_COMM_WORLD, options);
    SerialSimulation oracle = Oracle(options);
    const size_t bucket = options.bucketSize;
    for (size_t count : {size_t{0}, size_t{1}, size_t{5}, bucket + 1, WorldSize() * bucket - 3, size_t{100003}}) {
      aggregator.ResetResiduals();
      oracle.ResetResiduals();
      ExpectReduceScatterMatches(aggregator, oracle, count, static_cast<uint32_t>(count + bits),
                                 "bits " + std::to_string(bits) + " count " + std::to_string(count));
    }
  }
}

TEST(ReduceScatterGradients, AShardOverSeveralTensorsLandsInThem) {
  // Tensors of their own memory: a shard that spans several is not reduced in place, and comes back by copy.
  const std::vector<size_t> lengths = {700, 3, 5010, 6, 1200};
  for (int bits : {1, 32}) {
    const AggregatorOptions options = LayoutOptions(bits);
    Aggregator aggregator(MPI_COMM_WORLD, options);
    SerialSimulation oracle = Oracle(options);
    size_t count = 0;
    for (size_t length : lengths) count += length;
    const std::vector<float> input = RandomGradient(count, 31 + bits, WorldRank());
    std::vector<std::vector<float>> tensors;
    std::vector<GradientBuffer> buffers;
    size_t at = 0;
    for (size_t length : lengths) {
      tensors.emplace_back(input.begin() + static_cast<std::ptrdiff_t>(at),
                           input.begin() + static_cast<std::ptrdiff_t>(at + length));
      at += length;
    }
    for (std::vector<float>& tensor : tensors) buffers.push_back({tensor.data(), tensor.size()});
    const ShardRange shard = aggregator.ReduceScatterGradients(buffers);
    std::vector<float> gradient;
    for (const std::vector<float>& tensor : tensors) gradient.insert(gradient.end(), tensor.begin(), tensor.end());
    ExpectShardAndRest(gradient, input, oracle.Run(AllInputs(count, 31 + bits), {}, lengths), shard,
                       "bits " + std::to_string(bits));
  }
}

TEST(ReduceScatterGradients, SharesTheCarriedErrorWithWholeCalls) {
  const AggregatorOptions options = LayoutOptions(1);
  Aggregator aggregator(MPI_COMM_WORLD, options);
  SerialSimulation oracle = Oracle(options);
  for (uint32_t step = 0; step < 4; ++step) {
    if (step % 2 == 0) {
      ExpectReduceScatterMatches(aggregator, oracle, 6000, 90 + step, "step " + std::to_string(step));
    } else {
      std::vector<float> gradient = RandomGradient(6000, 90 + step, WorldRank());
      aggregator.AggregateGradients(gradient.data(), gradient.size());
      EXPECT_TRUE(SameBits(gradient, oracle.Run(AllInputs(6000, 90 + step)))) << "whole call at step " << step;
    }
  }
}

TEST(ReduceScatterGradients, RefusesTheDoubleBufferedModeOnEveryRank) {
  int level = 0;
  MPI_Query_thread(&level);
  if (level < MPI_THREAD_SERIALIZED) GTEST_SKIP() << "the double-buffered mode needs MPI_THREAD_SERIALIZED";
  AggregatorOptions options = LayoutOptions(1);
  options.doubleBuffered = true;
  Aggregator aggregator(MPI_COMM_WORLD, options);
  std::vector<float> gradient(100, 1.0f);
  EXPECT_THROW(aggregator.ReduceScatterGradients({{gradient.data(), gradient.size()}}), UsageError);
}

}  // namespace
}  // namespace gradagg
