// One-shot allreduce for small messages: every rank pushes its whole message to every peer's inbox in low-latency
// packets, then sums what arrived, in rank order (one_shot_kernel.cuh).
#include <algorithm>

#include "common/cuda/cuda_error.h"
#include "common/cuda/element_convert.cuh"
#include "intra_node/cuda/line_one_shot_kernel.cuh"
#include "intra_node/cuda/one_shot_kernel.cuh"
#include "intra_node/cuda/peer_group.h"
#include "intra_node/cuda/peer_group_internal.h"

namespace gradagg::nvlink {

void PeerGroup::FillPacketArgs(device::PacketArgs& args, const void* input, void* output, size_t count) const {
  args.input = input;
  args.output = output;
  args.count = count;
  const size_t half = (calls_ & 1) * inboxHalfBytes_;
  for (int p = 0; p < ranks(); ++p)
    args.peerInbox[p] = reinterpret_cast<uint4*>(scratch_.peer[p] + kControlBytes + half);
  args.slotPairs = SlotPairs();
  args.barrier = Barrier();
}

int PeerGroup::PacketBlocks(size_t pairs) const {
  const size_t perBlock = static_cast<size_t>(config_.threads);
  return static_cast<int>(
      std::clamp<size_t>((pairs + perBlock - 1) / perBlock, 1, std::min(kMaxBlocks, 2 * multiprocessors_)));
}

bool PeerGroup::KernelsWaitForPriorGrids() const {
  int major = 0;
  GRADAGG_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device_));
  cudaFuncAttributes attributes{};
  GRADAGG_CUDA_CHECK(cudaFuncGetAttributes(&attributes, device::OneShotAllReduceKernel<float>));
  return major >= 9 && attributes.ptxVersion >= 90;
}

void PeerGroup::OneShot(const void* input, void* output, size_t count, ElementType type, cudaStream_t stream) {
  if (count == 0) return;  // nothing moves, so no call is counted: every rank skips it alike
  const size_t bytes = count * ElementBytes(type);
  const size_t lines = LineShardLines(bytes, 1);
  if (bytes > config_.oneShotLinesAbove && device::kLineVectors * (1 + lines) <= SlotPairs()) {
    StartCall(Mix(Mix(11, static_cast<uint64_t>(type)), count));
    device::LineOneShotArgs args{};
    FillPacketArgs(args.packets, input, output, count);
    args.lines = lines;
    cuda_detail::WithElementType(type, [&](auto element) {
      using T = decltype(element);
      LaunchNodeKernel(device::LineOneShotKernel<T>, LineBlocks(lines), device::kLineThreads, stream, Dependent(bytes),
                       "LineOneShotKernel", args);
    });
    return;
  }
  StartCall(Mix(Mix(2, static_cast<uint64_t>(type)), count));
  device::PacketArgs args{};
  FillPacketArgs(args, input, output, count);
  const int blocks = PacketBlocks((bytes + 7) / 8);
  cuda_detail::WithElementType(type, [&](auto element) {
    using T = decltype(element);
    LaunchNodeKernel(device::OneShotAllReduceKernel<T>, blocks, config_.threads, stream, Dependent(bytes),
                     "OneShotAllReduceKernel", args);
  });
}

}  // namespace gradagg::nvlink
