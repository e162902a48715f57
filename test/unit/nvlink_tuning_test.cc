// The NVLink path's tuning table (intra_node/cuda/tuning.h): rows that cover every group size within the limits a
// PeerGroup accepts, and docs/gpus.md's table of the same defaults equal to it, cell by cell.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "intra_node/cuda/control_block.h"
#include "intra_node/cuda/tuning.h"

namespace gradagg::nvlink {
namespace {

TEST(NvlinkTuning, RowsCoverEveryGroupSizeInOrder) {
  int previous = 0;
  for (const Tuning& row : kTuning) {
    EXPECT_GT(row.maxRanks, previous);
    previous = row.maxRanks;
  }
  EXPECT_EQ(previous, kMaxLocalRanks);
  EXPECT_EQ(TuningFor(1).maxRanks, 1);
  EXPECT_EQ(TuningFor(2).maxRanks, 2);
  EXPECT_EQ(TuningFor(3).maxRanks, 4);
  EXPECT_EQ(TuningFor(4).maxRanks, 4);
  EXPECT_EQ(TuningFor(8).maxRanks, 16);
}

TEST(NvlinkTuning, EveryValueWithinWhatAPeerGroupAccepts) {
  for (const Tuning& row : kTuning) {
    SCOPED_TRACE("row of up to " + std::to_string(row.maxRanks) + " GPUs");
    EXPECT_LE(row.packetMaxBytes, 16 * kMiB);
    EXPECT_LE(row.lineMaxBytes, 16 * kMiB);
    EXPECT_GE(row.pushChunkBytes, 16 * kKiB);
    EXPECT_LE(row.pushChunkBytes, 1 * kMiB);
    EXPECT_GE(row.twoShotBlocks, 0);
    EXPECT_LE(row.twoShotBlocks, kMaxBlocks);
    EXPECT_NE(row.peerOrder, PeerOrder::kByGroupSize);
  }
}

// A cell of docs/gpus.md's table as the table's number: "2 MiB", "8388607 B", "off", "never", "one per SM", "0".
size_t CellValue(const std::string& cell) {
  if (cell == "off" || cell == "one per SM") return 0;
  if (cell == "never") return kNever;
  std::istringstream in(cell);
  size_t number = 0;
  std::string unit;
  if (!(in >> number)) {
    ADD_FAILURE() << "a cell that is not a size: '" << cell << "'";
    return kAutomatic;
  }
  in >> unit;
  if (unit == "KiB") return number * kKiB;
  if (unit == "MiB") return number * kMiB;
  if (!unit.empty() && unit != "B") ADD_FAILURE() << "an unknown unit in '" << cell << "'";
  return number;
}

std::vector<std::string> Cells(const std::string& line) {
  std::vector<std::string> cells;
  std::istringstream in(line);
  std::string cell;
  std::getline(in, cell, '|');  // before the first bar
  while (std::getline(in, cell, '|')) {
    const size_t first = cell.find_first_not_of(' ');
    const size_t last = cell.find_last_not_of(' ');
    cells.push_back(first == std::string::npos ? "" : cell.substr(first, last - first + 1));
  }
  if (!cells.empty() && cells.back().empty()) cells.pop_back();  // after the last bar
  return cells;
}

TEST(NvlinkTuning, DocsTableIsTheCodesTable) {
  std::ifstream docs(std::string(GRADAGG_SOURCE_DIR) + "/docs/gpus.md");
  ASSERT_TRUE(docs) << "docs/gpus.md not found under " << GRADAGG_SOURCE_DIR;
  // setting -> its cells, one per column of GPU counts
  std::map<std::string, std::vector<std::string>> rows;
  std::vector<std::string> columns;
  for (std::string line; std::getline(docs, line);) {
    const std::vector<std::string> cells = Cells(line);
    if (cells.size() > 2 && cells[0] == "setting" && cells[1] == "what it decides")
      columns.assign(cells.begin() + 2, cells.end());
    else if (!columns.empty() && cells.size() == columns.size() + 2 && cells[0].rfind("`GRADAGG_NVLINK_", 0) == 0)
      rows[cells[0]].assign(cells.begin() + 2, cells.end());
    else if (!columns.empty() && !rows.empty())
      break;  // the table has ended
  }
  ASSERT_EQ(columns.size(), std::size(kTuning)) << "a column for each row of intra_node/cuda/tuning.h";
  const std::map<std::string, size_t Tuning::*> sizes = {
      {"`GRADAGG_NVLINK_ONE_SHOT_MAX`", &Tuning::oneShotMaxBytes},
      {"`GRADAGG_NVLINK_ONE_SHOT_LINES_ABOVE`", &Tuning::oneShotLinesAbove},
      {"`GRADAGG_NVLINK_PACKET_MAX`", &Tuning::packetMaxBytes},
      {"`GRADAGG_NVLINK_LINE_MAX`", &Tuning::lineMaxBytes},
      {"`GRADAGG_NVLINK_DEPENDENT_LAUNCH_MAX`", &Tuning::dependentLaunchMaxBytes},
      {"`GRADAGG_NVLINK_ALL_PUSH`", &Tuning::pushMinBytes},
      {"`GRADAGG_NVLINK_PUSH_CHUNK`", &Tuning::pushChunkBytes}};
  ASSERT_EQ(rows.size(), sizes.size() + 2) << "docs/gpus.md's table: one row per column of Tuning";
  for (size_t c = 0; c < std::size(kTuning); ++c) {
    const Tuning& row = kTuning[c];
    SCOPED_TRACE("column '" + columns[c] + "'");
    const std::string lastGpus = std::to_string(row.maxRanks);
    EXPECT_TRUE(columns[c] == lastGpus + " GPU" || columns[c] == lastGpus + " GPUs" ||
                columns[c].find("-" + lastGpus + " GPUs") != std::string::npos);
    for (const auto& [setting, field] : sizes) {
      ASSERT_TRUE(rows.count(setting)) << setting << " missing";
      EXPECT_EQ(CellValue(rows[setting][c]), row.*field) << setting;
    }
    EXPECT_EQ(CellValue(rows["`GRADAGG_NVLINK_BLOCKS`"][c]), static_cast<size_t>(row.twoShotBlocks));
    EXPECT_EQ(CellValue(rows["`GRADAGG_NVLINK_PEER_ORDER`"][c]), static_cast<size_t>(row.peerOrder));
  }
}

}  // namespace
}  // namespace gradagg::nvlink
