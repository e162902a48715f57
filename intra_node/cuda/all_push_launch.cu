// All-push reduction: every rank pushes each peer's shard of its input into that peer's inbox in chunks, so NVLink
// carries writes only; each rank sums its shard in rank order and writes the result (all_push_kernel.cuh).
#include <algorithm>
#include <stdexcept>

#include "common/cuda/cuda_error.h"
#include "common/cuda/element_convert.cuh"
#include "intra_node/cuda/all_push_kernel.cuh"
#include "intra_node/cuda/peer_group.h"
#include "intra_node/cuda/peer_group_internal.h"

namespace gradagg::nvlink {

namespace {

template <typename T, bool kPushToAll>
void LaunchAllPushKernel(int ranks, int blocks, int threads, const device::AllPushArgs& args, cudaStream_t stream,
                         bool dependent) {
  WithRankCount(ranks, [&](auto count) {
    LaunchNodeKernel(device::AllPushKernel<T, decltype(count)::value, kPushToAll>, blocks, threads, stream, dependent,
                     "AllPushKernel", args);
  });
}

}  // namespace

bool PeerGroup::CanPush(const TwoShotCall& call, const std::vector<ElementRange>& shards, ElementType type) const {
  const size_t elementBytes = ElementBytes(type);
  if (config_.reduction != Reduction::kAllPush || CallBytes(call, elementBytes) < pushMinBytes_) return false;
  for (int p = 0; p < ranks(); ++p) {
    // Allocations start 256-byte aligned, so the offsets in every rank's records decide, the same on all ranks.
    const size_t input = call.input.registration->exported[p].offset + call.input.offset;
    const size_t output = call.output.registration->exported[p].offset + call.output.offset;
    for (const ElementRange& shard : shards) {
      if ((input + shard.begin * elementBytes) % 16 != 0) return false;
      if (call.pushToAll && (output + shard.begin * elementBytes) % 16 != 0) return false;
    }
    if (!call.pushToAll && output % 16 != 0) return false;  // rank p's stripe
  }
  return true;
}

void PeerGroup::LaunchAllPush(const TwoShotCall& call, const std::vector<ElementRange>& shards, ElementType type,
                              cudaStream_t stream) {
  device::AllPushArgs args{};
  args.input = call.input.registration->local + call.input.offset;
  for (int p = 0; p < ranks(); ++p) {
    args.peerOutput[p] = call.output.registration->peer[p] + call.output.offset;
    args.peerInbox[p] = reinterpret_cast<uint4*>(scratch_.peer[p] + pushInboxOffset_);
    args.shardBegin[p] = shards[p].begin;
    args.shardCount[p] = shards[p].count;
  }
  args.outputShift = call.outputShift;
  // Chunks as large as the inbox slot, or smaller where that leaves blocks idle, in whole rows of threads; where the
  // blocks' even shares fit two slots, one wide round instead of two. On 4 H100s one round of 256 KiB chunks beat two
  // of 128 KiB at 128 MiB (586 against 599-606 us), where 256 KiB slots cost 1% from 256 MiB by spreading the inbox
  // over twice the memory (bench/results/nvlink_allreduce/h100x4/one_round_slot/).
  const size_t largestVectors = (call.largestShard * ElementBytes(type) + 15) / 16;
  const size_t threads = static_cast<size_t>(config_.threads);
  const size_t evenShare = std::max(threads, RoundUp((largestVectors + pushBlocks_ - 1) / pushBlocks_, threads));
  args.chunkVectors = evenShare <= 2 * pushChunkVectors_ ? evenShare : pushChunkVectors_;
  args.slotVectors = pushChunkVectors_;
  args.chunks = std::max<size_t>(1, (largestVectors + args.chunkVectors - 1) / args.chunkVectors);
  // The kernel's waits rely on it: only a call of one round per block spills into the other parity's slot.
  if (args.chunkVectors > pushChunkVectors_ && args.chunks > static_cast<size_t>(pushBlocks_))
    throw std::logic_error("all-push: a wide chunk in a call of several rounds");
  args.inboxBlocks = pushBlocks_;
  args.order = config_.peerOrder;
  args.barrier = Barrier();
  const int blocks = static_cast<int>(std::min<size_t>(args.chunks, pushBlocks_));
  const bool dependent = Dependent(CallBytes(call, ElementBytes(type)));
  cuda_detail::WithElementType(type, [&](auto element) {
    using T = decltype(element);
    if (call.pushToAll) {
      LaunchAllPushKernel<T, true>(ranks(), blocks, config_.threads, args, stream, dependent);
    } else {
      LaunchAllPushKernel<T, false>(ranks(), blocks, config_.threads, args, stream, dependent);
    }
  });
}

}  // namespace gradagg::nvlink
