#include "nvlink/peer_groups.h"

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
    bool placed = false;
    for (auto& group : groups) {
      if (ReachesAll(access, rank, group)) {
        group.push_back(rank);
        placed = true;
        break;
      }
    }
    if (!placed) groups.push_back({rank});
  }
  return groups;
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
