// Two-shot (pulled) reduce-scatter and all-gather: each rank reads its shard from every peer and sums in rank order,
// then writes the result where the call wants it (two_shot_kernel.cuh).
#include <algorithm>

#include "common/cuda/cuda_error.h"
#include "common/cuda/element_convert.cuh"
#include "intra_node/cuda/peer_group.h"
#include "intra_node/cuda/peer_group_internal.h"
#include "intra_node/cuda/two_shot_kernel.cuh"

namespace gradagg::nvlink {

namespace {

template <typename T, bool kReduce, bool kPushToAll>
void LaunchTwoShotKernel(int ranks, int blocks, int threads, const device::TwoShotArgs& args, cudaStream_t stream,
                         bool dependent) {
  WithRankCount(ranks, [&](auto count) {
    LaunchNodeKernel(device::TwoShotKernel<T, decltype(count)::value, kReduce, kPushToAll>, blocks, threads, stream,
                     dependent, "TwoShotKernel", args);
  });
}

}  // namespace

void PeerGroup::LaunchTwoShot(const TwoShotCall& call, ElementType type, cudaStream_t stream) {
  const size_t elementBytes = ElementBytes(type);
  device::TwoShotArgs args{};
  bool vector = true;
  for (int p = 0; p < ranks(); ++p) {
    args.peerInput[p] = call.input.registration->peer[p] + call.input.offset;
    args.peerOutput[p] = call.output.registration->peer[p] + call.output.offset;
    const bool used = p == rank_ || call.reduce;
    if (used)
      vector = vector && Aligned16(static_cast<const char*>(args.peerInput[p]) +
                                   (call.shard.begin - call.inputShift) * elementBytes);
    if (p == rank_ || call.pushToAll)
      vector = vector && Aligned16(static_cast<const char*>(args.peerOutput[p]) +
                                   (call.shard.begin - call.outputShift) * elementBytes);
  }
  args.shardBegin = call.shard.begin;
  args.shardCount = call.shard.count;
  args.inputShift = call.inputShift;
  args.outputShift = call.outputShift;
  args.carry = call.carry;
  if (call.carry != nullptr) vector = vector && Aligned16(call.carry);
  args.vector = vector;
  args.interleaved = config_.interleaved;
  args.order = config_.peerOrder;
  args.barrier = Barrier();
  const size_t perBlock = static_cast<size_t>(config_.threads) * (16 / elementBytes);
  const int most = config_.blocks > 0 ? config_.blocks : twoShotBlocks_;
  const int blocks = static_cast<int>(std::clamp<size_t>((call.largestShard + perBlock - 1) / perBlock, 1, most));
  const bool dependent = Dependent(CallBytes(call, elementBytes));
  cuda_detail::WithElementType(type, [&](auto element) {
    using T = decltype(element);
    if (call.reduce && call.pushToAll) {
      LaunchTwoShotKernel<T, true, true>(ranks(), blocks, config_.threads, args, stream, dependent);
    } else if (call.reduce) {
      LaunchTwoShotKernel<T, true, false>(ranks(), blocks, config_.threads, args, stream, dependent);
    } else {
      LaunchTwoShotKernel<T, false, true>(ranks(), blocks, config_.threads, args, stream, dependent);
    }
  });
}

}  // namespace gradagg::nvlink
