#include "nvlink/peer_groups.h"

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

TEST(PeerGroups, OneWayAccessIsNoAccess) {
  PeerAccessMatrix access = AllConnected(3);
  access[2][0] = false;  // 0 reaches 2, 2 does not reach 0
  const auto groups = SplitIntoFullyConnectedGroups(access, 0);
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0], (std::vector<int>{0, 1}));
  EXPECT_EQ(groups[1], (std::vector<int>{2}));
}

TEST(PeerGroups, InterleavedIslandsKeepRankOrderInsideGroups) {
  PeerAccessMatrix access(4, std::vector<bool>(4, false));
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) access[i][j] = (i % 2) == (j % 2);
  const auto groups = SplitIntoFullyConnectedGroups(access, 0);
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0], (std::vector<int>{0, 2}));
  EXPECT_EQ(groups[1], (std::vector<int>{1, 3}));
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
