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

size_t LineShardLines(size_t bytes, int ranks) {
  const size_t shardWords = ((bytes + 3) / 4 + ranks - 1) / ranks;
  return (shardWords + device::kLineWords - 1) / device::kLineWords;
}

size_t LineTwoShotSlotPairs(size_t bytes, int ranks) {
  return device::kLineVectors * (1 + 2 * LineShardLines(bytes, ranks));
}

int PeerGroup::LineBlocks(size_t lines) const {
  // A warp per group of lines, in as many blocks as fit on the GPU at once, so that no warp takes a second group while
  // others idle (on 4 H100s at 4 MiB, 512 blocks left 6% of the warps a second group: 35 us against 3 MiB's 21). The
  // line kernels keep no state per block.
  using device::kLineThreads;
  const size_t warps = (lines + device::kLinesPerWarp - 1) / device::kLinesPerWarp;
  const size_t resident = static_cast<size_t>(device::kLineBlocksPerMultiprocessor) * multiprocessors_;
  return static_cast<int>(std::clamp<size_t>((warps * 32 + kLineThreads - 1) / kLineThreads, 1, resident));
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
    LaunchNodeKernel(device::LineTwoShotKernel<T>, LineBlocks(args.shardLines), device::kLineThreads, stream,
                     Dependent(bytes), "LineTwoShotKernel", args);
  });
}

}  // namespace gradagg::nvlink
