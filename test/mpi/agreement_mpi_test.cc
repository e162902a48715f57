// Settings every rank must share (AgreeOnSettings): agreement when they match, and otherwise the same message on every
// rank, naming the setting, both values and both ranks.
#include <gtest/gtest.h>
#include <mpi.h>

#include <string>
#include <vector>

#include "mpi/agreement.h"
#include "mpi_test_support.h"

namespace gradagg {
namespace {

using test::WorldRank;
using test::WorldSize;

// Rank 0's text, as every rank has it.
std::string RankZeros(const std::string& mine) {
  int length = static_cast<int>(mine.size());
  MPI_Bcast(&length, 1, MPI_INT, 0, MPI_COMM_WORLD);
  std::string text = mine;
  text.resize(static_cast<size_t>(length));
  MPI_Bcast(text.data(), length, MPI_CHAR, 0, MPI_COMM_WORLD);
  return text;
}

std::string Where(int rank) { return "rank " + std::to_string(rank) + " on "; }

TEST(AgreeOnSettings, TheSameSettingsOnEveryRankAgree) {
  const std::vector<NamedSetting> settings = {{"GRADAGG_A", "1"}, {"GRADAGG_B", "the default"}};
  EXPECT_EQ(AgreeOnSettings(MPI_COMM_WORLD, settings), "");
  EXPECT_EQ(AgreeOnSettings(MPI_COMM_WORLD, {}), "");
}

TEST(AgreeOnSettings, AValueThatDiffersIsNamedWithBothRanksOnEveryRank) {
  if (WorldSize() < 2) GTEST_SKIP() << "needs 2 ranks";
  const int last = WorldSize() - 1;
  std::vector<NamedSetting> settings = {{"GRADAGG_A", "1"}, {"GRADAGG_B", "4096"}, {"GRADAGG_C", "x"}};
  if (WorldRank() == last) settings[1].value = "8192";
  const std::string problem = AgreeOnSettings(MPI_COMM_WORLD, settings);
  EXPECT_EQ(problem.find("GRADAGG_B is 8192 on " + Where(last)), 0u) << problem;
  EXPECT_NE(problem.find(" but 4096 on " + Where(0)), std::string::npos) << problem;
  EXPECT_EQ(problem, RankZeros(problem));
}

TEST(AgreeOnSettings, TheLowestRankThatDiffersIsReported) {
  if (WorldSize() < 3) GTEST_SKIP() << "needs 3 ranks";
  std::vector<NamedSetting> settings = {{"GRADAGG_A", "1"}, {"GRADAGG_B", "2"}};
  if (WorldRank() >= 1) settings[WorldRank() == 1 ? 1 : 0].value = "9";
  const std::string problem = AgreeOnSettings(MPI_COMM_WORLD, settings);
  EXPECT_EQ(problem.find("GRADAGG_B is 9 on " + Where(1)), 0u) << problem;
  EXPECT_EQ(problem, RankZeros(problem));
}

TEST(AgreeOnSettings, ASettingOnlyOneRankHasIsNamed) {
  if (WorldSize() < 2) GTEST_SKIP() << "needs 2 ranks";
  const int last = WorldSize() - 1;
  std::vector<NamedSetting> settings = {{"GRADAGG_A", "1"}};
  if (WorldRank() == last) settings.push_back({"GRADAGG_D", "3"});
  const std::string problem = AgreeOnSettings(MPI_COMM_WORLD, settings);
  EXPECT_EQ(problem.find("the settings differ: " + Where(last)), 0u) << problem;
  EXPECT_NE(problem.find(" has GRADAGG_D where " + Where(0)), std::string::npos) << problem;
  EXPECT_NE(problem.find(" has none"), std::string::npos) << problem;
  EXPECT_EQ(problem, RankZeros(problem));
}

}  // namespace
}  // namespace gradagg
