// ShardAggregator on real ranks against the serial simulation of each local index's ranks as nodes of one rank,
// bit for bit, on the layout the CTest entry asks for: every bit width, shards of unequal sizes from one local index
// to the next (local index 1's empty in some calls), residuals that resume, and a bad call on one local index that
// ends in an error on every rank.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "gradagg/shard_aggregator.h"
#include "oracle_support.h"

namespace gradagg {
namespace {

using test::RandomGradient;
using test::SameBits;
using test::TestRanksPerNode;
using test::WorldRank;

AggregatorOptions ShardOptions(int bits) {
  AggregatorOptions options;
  options.bits = bits;
  options.ranksPerNode = TestRanksPerNode();
  return options;
}

// This rank's shard length for a call of `base`: each local index its own; local index 1 none when base is 513.
size_t ShardCount(int local, size_t base) {
  return local == 1 && base == 513 ? 0 : base + 37 * static_cast<size_t>(local);
}

// The serial simulation of this rank's local index: its ranks, one per node in node order, as nodes of one rank.
class ShardOracle {
 public:
  explicit ShardOracle(const AggregatorOptions& options) {
    const NodeTopology topology = NodeTopology::Discover(MPI_COMM_WORLD, options.ranksPerNode);
    const std::vector<RankPlacement> placements = topology.GatherPlacements();
    local_ = topology.localRank();
    group_.assign(static_cast<size_t>(topology.nodeCount()), -1);
    for (size_t rank = 0; rank < placements.size(); ++rank) {
      if (placements[rank].local == local_) group_[static_cast<size_t>(placements[rank].node)] = static_cast<int>(rank);
    }
    std::vector<RankPlacement> nodes;
    for (int node = 0; node < topology.nodeCount(); ++node) nodes.push_back({node, 0});
    AggregatorOptions across = options;
    across.ranksPerNode = 1;
    simulation_ = std::make_unique<SerialSimulation>(nodes, across);
  }

  int local() const { return local_; }

  // What this rank must hold after a call in which every rank r passed RandomGradient(count, seed, r).
  std::vector<float> Run(size_t count, uint32_t seed) {
    std::vector<std::vector<float>> inputs;
    for (int rank : group_) inputs.push_back(RandomGradient(count, seed, rank));
    return simulation_->Run(inputs);
  }

 private:
  int local_ = 0;
  std::vector<int> group_;
  std::unique_ptr<SerialSimulation> simulation_;
};

// One call on every rank, checked against the oracle; returns this rank's result.
std::vector<float> ExpectShardMatches(ShardAggregator& shards, ShardOracle& oracle, size_t base, uint32_t seed,
                                      const std::string& what) {
  const size_t count = ShardCount(oracle.local(), base);
  std::vector<float> shard = RandomGradient(count, seed, WorldRank());
  shards.AggregateShard({{shard.data(), shard.size()}});
  EXPECT_TRUE(SameBits(shard, oracle.Run(count, seed))) << what << ", local index " << oracle.local()
                                                        << ": differs from the serial simulation";
  return shard;
}

TEST(AggregateShard, MatchesTheSimulationForEveryBitWidthWithUnevenAndEmptyShards) {
  for (int bits : {1, 2, 4, 8, 32}) {
    const AggregatorOptions options = ShardOptions(bits);
    ShardAggregator shards(MPI_COMM_WORLD, options);
    ShardOracle oracle(options);
    for (size_t base : {size_t{1}, size_t{513}, size_t{5000}, size_t{5000}, size_t{100003}}) {
      ExpectShardMatches(shards, oracle, base, static_cast<uint32_t>(base + bits),
                         "bits " + std::to_string(bits) + " base " + std::to_string(base));
    }
  }
}

TEST(AggregateShard, ResidualsResumeInANewShardAggregator) {
  const AggregatorOptions options = ShardOptions(1);
  ShardAggregator first(MPI_COMM_WORLD, options);
  ShardOracle oracle(options);
  for (uint32_t step = 0; step < 2; ++step) ExpectShardMatches(first, oracle, 3000, 70 + step, "before the save");
  const Residuals saved = first.acrossNodes().ExportResiduals();
  ShardAggregator resumed(MPI_COMM_WORLD, options);
  resumed.acrossNodes().ImportResiduals(saved);
  const std::vector<float> again = ExpectShardMatches(resumed, oracle, 3000, 72, "resumed");
  ShardOracle fresh(options);
  const size_t count = ShardCount(oracle.local(), 3000);
  if (first.nodeCount() > 1 && options.bits < 32 && count > 0) {
    EXPECT_FALSE(SameBits(again, fresh.Run(count, 72))) << "the carried error made no difference";
  }
}

TEST(AggregateShard, AMismatchOnOneLocalIndexThrowsOnEveryRank) {
  ShardAggregator shards(MPI_COMM_WORLD, ShardOptions(1));
  if (shards.nodeCount() < 2) GTEST_SKIP() << "one node: a local index has no one to disagree with";
  // Node 0's local index 0 passes one element more than the other nodes' local index 0.
  const bool odd = shards.localRank() == 0 && WorldRank() == 0;
  std::vector<float> shard(ShardCount(shards.localRank(), 100) + (odd ? 1 : 0), 1.0f);
  try {
    shards.AggregateShard({{shard.data(), shard.size()}});
    ADD_FAILURE() << "the mismatched call returned on rank " << WorldRank();
  } catch (const UsageError& error) {
    const std::string text = error.what();
    if (shards.localRank() != 0) EXPECT_NE(text.find("another local index"), std::string::npos) << text;
  }
  // Every rank is still in step: the next good call works everywhere (the other local indices' part of the refused
  // call ran, and carried its error: start afresh).
  shards.acrossNodes().ResetResiduals();
  ShardOracle oracle(ShardOptions(1));
  ExpectShardMatches(shards, oracle, 100, 5, "after the refused call");
}

TEST(AggregateShard, ARankThatNeverCallsEndsInATimeoutOnTheOthers) {
  if (test::WorldSize() < 2) GTEST_SKIP() << "one rank: nobody to wait for";
  AggregatorOptions options = ShardOptions(1);
  options.timeoutSeconds = 2.0;
  // Left to MPI_Finalize: the abandoned round's requests may still name its communicators.
  auto* shards = new ShardAggregator(MPI_COMM_WORLD, options);
  const int absent = test::WorldSize() - 1;
  if (WorldRank() != absent) {
    std::vector<float> shard(1000, 1.0f);
    const double start = MPI_Wtime();
    EXPECT_THROW(shards->AggregateShard({{shard.data(), shard.size()}}), TimeoutError);
    EXPECT_LT(MPI_Wtime() - start, 30.0) << "the ranks waited far past the timeout";
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

}  // namespace
}  // namespace gradagg
