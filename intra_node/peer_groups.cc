#include "intra_node/peer_groups.h"

#include <sstream>
#include <stdexcept>

namespace gradagg {
namespace {

bool Mutual(const PeerAccessMatrix& access, int a, int b) { return access[a][b] && access[b][a]; }

bool ReachesAll(const PeerAccessMatrix& access, int rank, const std::vector<int>& group) {
  for (int member : group)
    if (!Mutual(access, rank, member)) return false;
  return true;
}

}  // namespace

std::vector<std::vector<int>> SplitIntoFullyConnectedGroups(const PeerAccessMatrix& access, int forcedGroupSize) {
  const int ranks = static_cast<int>(access.size());
  for (const auto& row : access)
    if (static_cast<int>(row.size()) != ranks) throw std::invalid_argument("the peer access matrix is not square");
  std::vector<std::vector<int>> groups;
  if (forcedGroupSize > 0) {
    if (ranks % forcedGroupSize != 0)
      throw std::invalid_argument("forced group size " + std::to_string(forcedGroupSize) + " does not divide the " +
                                  std::to_string(ranks) + " local ranks");
    for (int first = 0; first < ranks; first += forcedGroupSize) {
      std::vector<int> group;
      for (int rank = first; rank < first + forcedGroupSize; ++rank) {
        if (!ReachesAll(access, rank, group))
          throw std::invalid_argument("forced group of local ranks " + std::to_string(first) + ".." +
                                      std::to_string(first + forcedGroupSize - 1) + " is not fully connected");
        group.push_back(rank);
      }
      groups.push_back(group);
    }
    return groups;
  }
  for (int rank = 0; rank < ranks; ++rank) {
    if (!groups.empty() && ReachesAll(access, rank, groups.back())) {
      groups.back().push_back(rank);
    } else {
      groups.push_back({rank});
    }
  }
  return groups;
}

PeerAccessMatrix ParsePeerAccess(const std::string& text) {
  PeerAccessMatrix access;
  std::istringstream lines(text);
  std::string line;
  for (int number = 1; std::getline(lines, line); ++number) {
    line = line.substr(0, line.find('#'));
    std::istringstream fields(line);
    std::vector<bool> row;
    for (std::string field; fields >> field;) {
      if (field != "1" && field != "0" && field != ".")
        throw std::invalid_argument("topology line " + std::to_string(number) + ": '" + field + "' is not 1, 0 or .");
      row.push_back(field == "1");
    }
    if (!row.empty()) access.push_back(row);
  }
  for (size_t i = 0; i < access.size(); ++i) {
    if (access[i].size() != access.size())
      throw std::invalid_argument("topology row " + std::to_string(i) + " has " + std::to_string(access[i].size()) +
                                  " entries for " + std::to_string(access.size()) + " local ranks");
    if (!access[i][i]) throw std::invalid_argument("topology row " + std::to_string(i) + " denies a GPU itself");
  }
  if (access.empty()) throw std::invalid_argument("the topology names no local rank");
  return access;
}

PeerAccessMatrix RestrictPeerAccess(const PeerAccessMatrix& measured, const PeerAccessMatrix& override) {
  if (override.size() != measured.size())
    throw std::invalid_argument("the topology has " + std::to_string(override.size()) + " local ranks, the node " +
                                std::to_string(measured.size()));
  PeerAccessMatrix access = measured;
  for (size_t i = 0; i < access.size(); ++i)
    for (size_t j = 0; j < access[i].size(); ++j) access[i][j] = measured[i][j] && override[i][j];
  return access;
}

bool EveryPairInGroups(const PeerAccessMatrix& links, const std::vector<std::vector<int>>& groups) {
  for (const std::vector<int>& group : groups)
    for (int i : group)
      for (int j : group)
        if (i != j && !links.at(i).at(j)) return false;
  return true;
}

std::string DescribePeerAccess(const PeerAccessMatrix& access, const std::vector<std::vector<int>>& groups) {
  std::string text = "peer access (row reads column):\n";
  for (size_t i = 0; i < access.size(); ++i) {
    text += "  " + std::to_string(i) + ":";
    for (bool direct : access[i]) text += direct ? " 1" : " .";
    text += "\n";
  }
  text += "groups:";
  for (const auto& group : groups) {
    text += " {";
    for (size_t k = 0; k < group.size(); ++k) text += (k ? "," : "") + std::to_string(group[k]);
    text += "}";
  }
  return text + "\n";
}

}  // namespace gradagg
