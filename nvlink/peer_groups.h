// Splitting the GPUs of a node into fully connected groups (Blink / MXNet style): inside a group every pair has
// direct peer access, so the group can run the peer-memory kernels; across groups data is forwarded.
#pragma once

#include <string>
#include <vector>

namespace gradagg {

// access[i][j]: local rank i can read and write local rank j's GPU memory directly (the diagonal is true).
using PeerAccessMatrix = std::vector<std::vector<bool>>;

// Groups of local ranks, each in ascending order, groups ordered by their first rank; every rank in exactly one.
// Greedy in local-rank order: a rank joins the first group whose every member it reaches both ways. With
// forcedGroupSize > 0, consecutive ranks form groups of that size instead (it must divide the rank count and each
// such group must be fully connected), to exercise multi-group layouts on a machine that is one group.
// Throws std::invalid_argument for a bad matrix or forced size.
std::vector<std::vector<int>> SplitIntoFullyConnectedGroups(const PeerAccessMatrix& access, int forcedGroupSize);

// "0: 1 1\n1: 1 1\n" plus "groups: {0,1}".
std::string DescribePeerAccess(const PeerAccessMatrix& access, const std::vector<std::vector<int>>& groups);

}  // namespace gradagg
