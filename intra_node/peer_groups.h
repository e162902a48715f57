// Splitting the GPUs of a node into fully connected groups (Blink / MXNet style): inside a group every pair has
// direct peer access, so the group can run the peer-memory kernels; across groups data is forwarded.
#pragma once

#include <string>
#include <vector>

namespace gradagg {

// access[i][j]: local rank i can read and write local rank j's GPU memory directly (the diagonal is true).
using PeerAccessMatrix = std::vector<std::vector<bool>>;

// Groups of local ranks, each a run of consecutive ranks, in rank order; every rank in exactly one. A rank joins the
// group before it when it reaches every member both ways, else it starts a new one. Runs, not any clique: the node's
// sum then still adds the ranks in local-rank order while it passes from group to group (intra_node/group_chain.h), so
// islands that interleave (0 and 2 on one switch, 1 and 3 on another) become groups of one. With
// forcedGroupSize > 0, consecutive ranks form groups of that size instead (it must divide the rank count and each
// such group must be fully connected), to exercise multi-group layouts on a machine that is one group.
// Throws std::invalid_argument for a bad matrix or forced size.
std::vector<std::vector<int>> SplitIntoFullyConnectedGroups(const PeerAccessMatrix& access, int forcedGroupSize);

// A topology file's access matrix: one line per local rank, one 1 (direct access) or 0 (none; '.' too) per local
// rank, separated by blanks; '#' starts a comment. Throws std::invalid_argument naming the line for anything else,
// a matrix that is not square or a diagonal that is not 1.
PeerAccessMatrix ParsePeerAccess(const std::string& text);

// The measured matrix narrowed to what `override` allows: a pair is direct only when both say so (a file cannot
// create access the GPUs lack). Throws std::invalid_argument when the sizes differ.
PeerAccessMatrix RestrictPeerAccess(const PeerAccessMatrix& measured, const PeerAccessMatrix& override);

// Whether links[i][j] holds for every two ranks of every group, both ways (the diagonal is not asked).
bool EveryPairInGroups(const PeerAccessMatrix& links, const std::vector<std::vector<int>>& groups);

// "0: 1 1\n1: 1 1\n" plus "groups: {0,1}".
std::string DescribePeerAccess(const PeerAccessMatrix& access, const std::vector<std::vector<int>>& groups);

}  // namespace gradagg
