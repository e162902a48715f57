// The NVLink path's defaults by GPU count, in one table: what a PeerGroup takes for each setting its config leaves
// automatic. docs/gpus.md lists the same table against the GRADAGG_NVLINK_* settings (test/unit/nvlink_tuning_test.cc
// holds the two alike); bench/results/nvlink_allreduce/README.md keeps the measurements behind each value. Plain C++:
// included by the host code that configures a group, and by host tests.
#pragma once

#include <cstddef>

#include "intra_node/cuda/peer_order.h"

namespace gradagg::nvlink {

constexpr size_t kAutomatic = ~size_t{0};  // a config value left to this table
constexpr size_t kNever = kAutomatic - 1;  // a size threshold no call reaches

struct Tuning {
  int maxRanks;                    // the row holds for groups of more GPUs than the row before, up to this many
  size_t oneShotMaxBytes;          // allreduces of at most this many bytes: one-shot
  size_t oneShotLinesAbove;        // one-shots of more bytes go in lines, the rest in packets (kNever: packets only)
  size_t packetMaxBytes;           // above the one-shot, at most this many bytes: packet two-shot (0: off)
  size_t lineMaxBytes;             // above both, at most this many bytes: line two-shot (0: off)
  size_t dependentLaunchMaxBytes;  // calls of at most this many bytes launch dependent (0: none)
  size_t pushMinBytes;             // two-shot reductions of at least this many bytes push to every peer; smaller pull
  size_t pushChunkBytes;           // the all-push inbox slot per block and peer
  int twoShotBlocks;               // blocks of a pulled two-shot, at most one per multiprocessor (0: one per each)
  PeerOrder peerOrder;             // the order in which a two-shot block writes to its peers
};

constexpr size_t kKiB = size_t{1} << 10;
constexpr size_t kMiB = size_t{1} << 20;

// Rows by GPU count, each in the order of Tuning's fields. Groups of more than four GPUs were never measured: their
// row is a guess.
inline constexpr Tuning kTuning[] = {
    {1, 2 * kMiB, kNever, 0, 0, 0, 8 * kMiB, 128 * kKiB, 0, PeerOrder::kRankOrder},
    {2, 2 * kMiB, 512 * kKiB, 0, 8 * kMiB, 512 * kKiB, 8 * kMiB, 128 * kKiB, 0, PeerOrder::kRankOrder},
    {4, 256 * kKiB, 64 * kKiB, 0, 8 * kMiB - 1, 1 * kMiB, 8 * kMiB, 128 * kKiB, 32, PeerOrder::kRotatedPerBlock},
    {16, 128 * kKiB, kNever, 0, 0, 0, 8 * kMiB, 32 * kKiB, 16, PeerOrder::kRotatedPerBlock},
};

// The row for a group of `ranks` GPUs (1 .. 16); the last row past it.
constexpr const Tuning& TuningFor(int ranks) {
  for (const Tuning& row : kTuning)
    if (ranks <= row.maxRanks) return row;
  return kTuning[sizeof(kTuning) / sizeof(kTuning[0]) - 1];
}

}  // namespace gradagg::nvlink
