// Line two-shot allreduce for mid-sized messages on more than two GPUs: the packet two-shot's reduce-scatter and
// all-gather in 128-byte lines through the inboxes, one kernel, any buffer (line_two_shot_kernel.cuh).
#include <algorithm>
#include <string>

#include "gradagg/errors.h"
#include "common/cuda/cuda_error.h"
#include "common/cuda/element_convert.cuh"
#include "intra_node/cuda/line_two_shot_kernel.cuh"
#include "intra_node/cuda/peer_group.h"
#include "intra_node/cuda/peer_group_internal.h"

namespace gradagg::nvlink {

size_t DefaultLineMaxBytes(int ranks) {
  // 4 H100s, against the pulled two-shot that takes over above it, alternating three times in one call
  // (bench/results/nvlink_allreduce/h100x4/two_flag_lines/): 2 MiB 21.0-21.6 against 22.6-23.0 us, 3 MiB 25.6-25.9
  // against 27.5-27.8, but 4 MiB 34.0-35.0 against 32.9-33.1. Two GPUs: the one-shot reaches 2 MiB. Eight: not
  // measured.
  return ranks > 2 && ranks <= 4 ? (3 << 20) : 0;
}

size_t LineShardLines(size_t bytes, int ranks) {
  const size_t shardWords = ((bytes + 3) / 4 + ranks - 1) / ranks;
  return (shardWords + device::kLineWords - 1) / device::kLineWords;
}

size_t LineTwoShotSlotPairs(size_t bytes, int ranks) {
  return device::kLineVectors * (1 + 2 * LineShardLines(bytes, ranks));
}

int PeerGroup::LineBlocks(size_t lines) const {
  const size_t warps = (lines + device::kLinesPerWarp - 1) / device::kLinesPerWarp;
  return static_cast<int>(std::clamp<size_t>((warps * 32 + kLineThreads - 1) / kLineThreads, 1,
                                             std::min(kMaxBlocks, 2 * multiprocessors_)));
}

void PeerGroup::LineTwoShot(const void* input, void* output, size_t count, ElementType type, cudaStream_t stream) {
  if (count == 0) return;  // nothing moves, so no call is counted: every rank skips it alike
  const size_t bytes = count * ElementBytes(type);
  if (LineTwoShotSlotPairs(bytes, ranks()) > SlotPairs())
    throw UsageError("a line two-shot of " + std::to_string(bytes) + " bytes does not fit the inbox (" + names_[rank_] +
                     ")");
  StartCall(Mix(Mix(10, static_cast<uint64_t>(type)), count));
  device::LineTwoShotArgs args{};
  FillPacketArgs(args.packets, input, output, count);
  args.shardLines = LineShardLines(bytes, ranks());
  cuda_detail::WithElementType(type, [&](auto element) {
    using T = decltype(element);
    LaunchNodeKernel(device::LineTwoShotKernel<T>, LineBlocks(args.shardLines), kLineThreads, stream, Dependent(bytes),
                     "LineTwoShotKernel", args);
  });
}

}  // namespace gradagg::nvlink
