// Packet two-shot allreduce for mid-sized messages on more than two GPUs: a reduce-scatter and an all-gather in
// low-latency packets through the inboxes, one kernel, any buffer (packet_two_shot_kernel.cuh).
#include <string>

#include "gradagg/errors.h"
#include "common/cuda/cuda_error.h"
#include "common/cuda/element_convert.cuh"
#include "intra_node/cuda/packet_two_shot_kernel.cuh"
#include "intra_node/cuda/peer_group.h"
#include "intra_node/cuda/peer_group_internal.h"

namespace gradagg::nvlink {

size_t PacketShardPairs(size_t bytes, int ranks) { return (bytes + 8 * ranks - 1) / (8 * ranks); }

void PeerGroup::PacketTwoShot(const void* input, void* output, size_t count, ElementType type, cudaStream_t stream) {
  if (count == 0) return;  // nothing moves, so no call is counted: every rank skips it alike
  const size_t shardPairs = PacketShardPairs(count * ElementBytes(type), ranks());
  if (1 + 2 * shardPairs > SlotPairs())
    throw UsageError("a packet two-shot of " + std::to_string(count * ElementBytes(type)) +
                     " bytes does not fit the inbox (" + names_[rank_] + ")");
  StartCall(Mix(Mix(6, static_cast<uint64_t>(type)), count));
  device::PacketTwoShotArgs args{};
  FillPacketArgs(args.packets, input, output, count);
  args.shardPairs = shardPairs;
  const int blocks = PacketBlocks(shardPairs);
  cuda_detail::WithElementType(type, [&](auto element) {
    using T = decltype(element);
    LaunchNodeKernel(device::PacketTwoShotKernel<T>, blocks, config_.threads, stream,
                     Dependent(count * ElementBytes(type)), "PacketTwoShotKernel", args);
  });
}

}  // namespace gradagg::nvlink
