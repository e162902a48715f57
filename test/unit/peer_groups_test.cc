#include "intra_node/peer_groups.h"

#include <gtest/gtest.h>

#include <stdexcept>

namespace gradagg {
namespace {

PeerAccessMatrix AllConnected(int n) { return PeerAccessMatrix(n, std::vector<bool>(n, true)); }

// Two islands of four (e.g. two NVLink quads joined only through PCIe).
PeerAccessMatrix TwoQuads() {
  PeerAccessMatrix access(8, std::vector<bool>(8, false));
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < 8; ++j) access[i][j] = (i / 4) == (j / 4);
  return access;
}

TEST(PeerGroups, AFullyConnectedNodeIsOneGroup) {
  const auto groups = SplitIntoFullyConnectedGroups(AllConnected(8), 0);
  ASSERT_EQ(groups.size(), 1u);
  EXPECT_EQ(groups[0], (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
}

TEST(PeerGroups, IslandsBecomeGroups) {
  const auto groups = SplitIntoFullyConnectedGroups(TwoQuads(), 0);
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0], (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(groups[1], (std::vector<int>{4, 5, 6, 7}));
}

// The line packets' gate (intra_node/gpu_node.cc): every pair inside a group, but nothing across groups, is asked.
TEST(PeerGroups, EveryPairInGroupsAsksOnlyInsideGroups) {
  const std::vector<std::vector<int>> quads = {{0, 1, 2, 3}, {4, 5, 6, 7}};
  EXPECT_TRUE(EveryPairInGroups(TwoQuads(), quads));  // no link between the quads, none asked for
  PeerAccessMatrix links = TwoQuads();
  links[6][5] = false;  // one direction of one pair inside the second quad
  EXPECT_FALSE(EveryPairInGroups(links, quads));
  EXPECT_TRUE(EveryPairInGroups(links, {{0, 1, 2, 3}, {4}, {5}, {6}, {7}}));
  PeerAccessMatrix noDiagonal = AllConnected(2);
  noDiagonal[1][1] = false;  // the diagonal is not asked
  EXPECT_TRUE(EveryPairInGroups(noDiagonal, {{0, 1}}));
}

TEST(PeerGroups, OneWayAccessIsNoAccess) {
  PeerAccessMatrix access = AllConnected(3);
  access[2][0] = false;  // 0 reaches 2, 2 does not reach 0
  const auto groups = SplitIntoFullyConnectedGroups(access, 0);
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0], (std::vector<int>{0, 1}));
  EXPECT_EQ(groups[1], (std::vector<int>{2}));
}

// Groups are runs of consecutive ranks, so the node's sum can pass from group to group in local-rank order:
// islands that interleave become groups of one.
TEST(PeerGroups, InterleavedIslandsBecomeGroupsOfOne) {
  PeerAccessMatrix access(4, std::vector<bool>(4, false));
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) access[i][j] = (i % 2) == (j % 2);
  const auto groups = SplitIntoFullyConnectedGroups(access, 0);
  ASSERT_EQ(groups.size(), 4u);
  for (int g = 0; g < 4; ++g) EXPECT_EQ(groups[g], (std::vector<int>{g}));
}

TEST(PeerGroups, ARankThatMissesTheGroupBeforeStartsANewOneEvenIfAnEarlierGroupFits) {
  PeerAccessMatrix access = AllConnected(3);
  access[1][2] = access[2][1] = false;  // 2 reaches 0 but not 1
  access[0][1] = access[1][0] = false;  // 0 and 1 apart too: {0} {1} {2}, never {0,2} {1}
  const auto groups = SplitIntoFullyConnectedGroups(access, 0);
  ASSERT_EQ(groups.size(), 3u);
  EXPECT_EQ(groups[2], (std::vector<int>{2}));
}

TEST(PeerGroups, TopologyTextParsesAndNarrowsTheMeasuredMatrix) {
  const PeerAccessMatrix file = ParsePeerAccess("# two pairs\n1 1 0 .\n1 1 0 0\n0 0 1 1  # bridge\n\n0 0 1 1\n");
  ASSERT_EQ(file.size(), 4u);
  EXPECT_TRUE(file[0][1]);
  EXPECT_FALSE(file[0][3]);
  const PeerAccessMatrix access = RestrictPeerAccess(AllConnected(4), file);
  EXPECT_EQ(SplitIntoFullyConnectedGroups(access, 0), (std::vector<std::vector<int>>{{0, 1}, {2, 3}}));
  // A file cannot grant what the GPUs lack.
  EXPECT_EQ(RestrictPeerAccess(TwoQuads(), AllConnected(8)), TwoQuads());
}

TEST(PeerGroups, BadTopologyTextIsRefusedWithItsLine) {
  try {
    ParsePeerAccess("1 1\n1 x\n");
    ADD_FAILURE() << "no error";
  } catch (const std::invalid_argument& error) {
    EXPECT_NE(std::string(error.what()).find("line 2"), std::string::npos) << error.what();
  }
  EXPECT_THROW(ParsePeerAccess("1 1\n1\n"), std::invalid_argument);     // not square
  EXPECT_THROW(ParsePeerAccess("1 1\n1 0\n"), std::invalid_argument);   // a GPU denied itself
  EXPECT_THROW(ParsePeerAccess("# nothing\n"), std::invalid_argument);  // no rank
  EXPECT_THROW(RestrictPeerAccess(AllConnected(2), AllConnected(3)), std::invalid_argument);
}

TEST(PeerGroups, ForcedGroupSizeSplitsConsecutiveRanks) {
  const auto groups = SplitIntoFullyConnectedGroups(AllConnected(8), 4);
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[1], (std::vector<int>{4, 5, 6, 7}));
  EXPECT_EQ(SplitIntoFullyConnectedGroups(AllConnected(8), 1).size(), 8u);
}

TEST(PeerGroups, BadForcedSizesAndMatricesAreRefused) {
  EXPECT_THROW(SplitIntoFullyConnectedGroups(AllConnected(8), 3), std::invalid_argument);
  EXPECT_THROW(SplitIntoFullyConnectedGroups(TwoQuads(), 8), std::invalid_argument);  // not fully connected
  PeerAccessMatrix ragged = AllConnected(3);
  ragged[1].pop_back();
  EXPECT_THROW(SplitIntoFullyConnectedGroups(ragged, 0), std::invalid_argument);
}

TEST(PeerGroups, DescriptionShowsMatrixAndGroups) {
  const std::string text = DescribePeerAccess(TwoQuads(), SplitIntoFullyConnectedGroups(TwoQuads(), 0));
  EXPECT_NE(text.find("  4: . . . . 1 1 1 1"), std::string::npos) << text;
  EXPECT_NE(text.find("groups: {0,1,2,3} {4,5,6,7}"), std::string::npos) << text;
}

}  // namespace
}  // namespace gradagg
