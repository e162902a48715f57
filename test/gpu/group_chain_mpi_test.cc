// A node of several NVLink groups (intra_node/group_chain.h), forced on a machine that is one group: every grouping that
// divides the ranks, links over peer memory and, through a topology override, through host memory. The allreduce,
// reduce-scatter and all-gather must be bitwise the rank-order sum of one group, for every element type and for
// sizes 0, 1 and odd. Skips itself (on every rank alike) without enough GPUs.
#include <gtest/gtest.h>
#include <mpi.h>

#include <string>
#include <vector>

#include "gradagg/errors.h"
#include "common/cuda/device_memory.h"
#include "intra_node/gpu_node.h"
#include "test/gpu/node_test_support.h"
#include "test/gpu/one_gpu_per_rank.h"

namespace gradagg::test {
namespace {

class GroupChainTest : public OneGpuPerRank {};

// Every group size that makes two or more groups of the world's ranks.
std::vector<int> ChainedGroupSizes() {
  std::vector<int> sizes;
  for (int size = 1; size < WorldSize(); ++size)
    if (WorldSize() % size == 0) sizes.push_back(size);
  return sizes;
}

// Unequal shards, the first one unaligned at its end; some empty when count < ranks.
std::vector<ElementRange> UnequalShards(size_t count, int ranks) {
  std::vector<ElementRange> shards;
  for (int r = 0; r < ranks; ++r) {
    const size_t begin = std::min(count, count * r / ranks + (r > 0 ? 1 : 0)),
                 end = r + 1 == ranks ? count : std::min(count, count * (r + 1) / ranks + 1);
    shards.push_back({begin, end - begin});
  }
  return shards;
}

// Phase 1 then phase 3 through the node (float32), each against the oracle.
void CheckReduceScatterAndAllGather(GpuNode& node, size_t count, uint32_t seed, cudaStream_t stream) {
  const int me = WorldRank();
  const std::vector<ElementRange> shards = UnequalShards(count, WorldSize());
  DeviceBuffer gradient(count * 4 + 16), stripe(shards[me].count * 4 + 16);
  const std::vector<uint8_t> mine = InputBits(count, ElementType::kFloat32, me, seed);
  if (count > 0) ASSERT_EQ(cudaMemcpy(gradient.get(), mine.data(), mine.size(), cudaMemcpyHostToDevice), cudaSuccess);
  node.ReduceScatter(gradient.as<float>(), shards, stripe.as<float>(), stream);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  node.ThrowIfFailed();
  EXPECT_EQ(stripe.ToHost<uint8_t>(shards[me].count * 4),
            RankOrderSum(shards[me].begin, shards[me].count, ElementType::kFloat32, WorldSize(), seed, count))
      << "reduce-scatter of " << count;

  ASSERT_EQ(cudaMemset(gradient.get(), 0xff, gradient.bytes()), cudaSuccess);  // poison
  node.AllGather(stripe.as<float>(), shards, gradient.as<float>(), stream);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  node.ThrowIfFailed();
  const std::vector<uint8_t> gathered = gradient.ToHost<uint8_t>(count * 4);
  EXPECT_EQ(gathered, RankOrderSum(0, count, ElementType::kFloat32, WorldSize(), seed, count))
      << "all-gather of " << count;
  EXPECT_TRUE(SameOnAllRanks(gathered));
}

TEST_F(GroupChainTest, EveryForcedGroupingSumsInRankOrder) {
  if (WorldSize() < 2) GTEST_SKIP() << "one rank is one group";
  uint32_t seed = 900;
  for (int size : ChainedGroupSizes()) {
    GpuNode node(MPI_COMM_WORLD, NodeConfig(0, size));
    ASSERT_TRUE(node.chained()) << node.Describe();
    const int groups = WorldSize() / size, links = (groups - 1) * size;
    EXPECT_NE(node.Describe().find(std::to_string(groups) + " NVLink groups of " + std::to_string(size) +
                                   ", chained over " + std::to_string(links) + " peer-memory links and 0 host"),
              std::string::npos)
        << node.Describe();
    for (ElementType type : kTypes) {
      for (size_t count : kCounts) {
        CheckAllReduce(node, {count, type, 0, SIZE_MAX}, false, ++seed, stream_);  // in place
        CheckAllReduce(node, {count, type, 1, 3}, false, ++seed, stream_);         // unaligned
      }
    }
    for (size_t count : {size_t{0}, size_t{1}, size_t{3}, size_t{1000}, size_t{1000003}})
      CheckReduceScatterAndAllGather(node, count, ++seed, stream_);
  }
}

TEST_F(GroupChainTest, GrowingAndShrinkingCallsKeepTheirBuffersInStep) {
  if (WorldSize() < 2) GTEST_SKIP() << "one rank is one group";
  GpuNode node(MPI_COMM_WORLD, NodeConfig(0, 1));
  uint32_t seed = 950;
  for (size_t count : {size_t{5}, size_t{70001}, size_t{17}, size_t{3 << 20}, size_t{65536}})
    CheckAllReduce(node, {count, ElementType::kFloat32, 0, 0}, false, ++seed, stream_);
}

// Groups {0,1} and {2,3}: the link of column 0 (0 and 2) has peer access, that of column 1 (1 and 3) does not.
TEST_F(GroupChainTest, OnlyPairsWithoutPeerAccessTakeTheHostRoute) {
  if (WorldSize() != 4) GTEST_SKIP() << "a layout of 4 ranks";
  GpuNodeConfig config = NodeConfig(0);
  config.accessOverride = ParsePeerAccess("1 1 1 0\n1 1 0 0\n1 0 1 1\n0 0 1 1\n");
  GpuNode node(MPI_COMM_WORLD, config);
  ASSERT_TRUE(node.chained()) << node.Describe();
  EXPECT_NE(node.Describe().find("2 NVLink groups of 2, chained over 1 peer-memory links and 1 host links"),
            std::string::npos)
      << node.Describe();
  uint32_t seed = 1000;
  for (ElementType type : kTypes)
    for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{65537}, size_t{1000003}})
      CheckAllReduce(node, {count, type, 0, 0}, false, ++seed, stream_);
  for (size_t count : {size_t{1}, size_t{3}, size_t{1000003}})
    CheckReduceScatterAndAllGather(node, count, ++seed, stream_);
}

TEST_F(GroupChainTest, GroupsThatReachNoCounterpartReduceThroughHostMemory) {
  if (WorldSize() < 2 || WorldSize() % 2 != 0) GTEST_SKIP() << "an even number of ranks";
  const int half = WorldSize() / 2;
  std::string text;
  for (int i = 0; i < WorldSize(); ++i) {
    for (int j = 0; j < WorldSize(); ++j) text += (i < half) == (j < half) ? "1 " : "0 ";
    text += "\n";
  }
  GpuNodeConfig config = NodeConfig(0);
  config.accessOverride = ParsePeerAccess(text);
  GpuNode node(MPI_COMM_WORLD, config);
  EXPECT_FALSE(node.chained());
  EXPECT_NE(node.Describe().find("no GPU reaches its counterpart"), std::string::npos) << node.Describe();
  CheckAllReduce(node, {65537, ElementType::kFloat32, 0, 0}, false, 1100, stream_);
}

// After a call together (which sets the chain's buffers up), the last rank skips one: the rank before it, whose
// link waits for it, names it once its timeout passes.
TEST_F(GroupChainTest, ARankThatNeverArrivesIsNamedByItsNeighbour) {
  if (WorldSize() < 2) GTEST_SKIP() << "needs two ranks";
  GpuNode node(MPI_COMM_WORLD, NodeConfig(0, 1, 1.0));
  DeviceBuffer buffer(4096);
  node.AllReduce(buffer.get(), buffer.get(), 100, ElementType::kFloat32, stream_);
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  node.ThrowIfFailed();
  if (WorldRank() + 1 == WorldSize()) return;
  node.AllReduce(buffer.get(), buffer.get(), 100, ElementType::kFloat32, stream_);
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  if (WorldRank() + 2 != WorldSize()) return;  // the others may name their own neighbour, late in its turn
  try {
    node.ThrowIfFailed();
    ADD_FAILURE() << "no error although the last rank never called";
  } catch (const nvlink::PeerGroupError& error) {
    EXPECT_NE(std::string(error.what()).find("never arrived"), std::string::npos) << error.what();
    EXPECT_NE(std::string(error.what()).find("rank " + std::to_string(WorldSize() - 1)), std::string::npos)
        << error.what();
  }
}

}  // namespace
}  // namespace gradagg::test
