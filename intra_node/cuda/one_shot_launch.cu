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

size_t DefaultOneShotMaxBytes(int ranks) {
  // Measured (bench/NOTES.md, section 5): one-shot pushes (G-1) copies of the message, two-shot about two, so the
  // crossover falls as G grows. 2 H100s: one-shot 16.4 us at 2 MiB against two-shot's 20.1, 29.7 against 26.6 at
  // 4 MiB; 4 H100s: 18.1 against 15.0 at 512 KiB (bench/results/nvlink_allreduce/tuning/thresholds_4xh100/), and
  // at 256 KiB 10.8 us against the packet two-shot's 8.6 (nvlink_allreduce/h100x4/variants_256k/) while it sent
  // packets; in lines and launched dependent, 7.42-7.45 against the packet two-shot's 7.66-7.67 and the line
  // two-shot's 9.6-9.8 (nvlink_allreduce/h100x4/dependent_launch/, lines of one flag). Eight: not measured.
  if (ranks <= 2) return 2 << 20;
  return ranks <= 4 ? (256 << 10) : (128 << 10);
}

size_t DefaultOneShotLinesAbove(int ranks) {
  // Lines cost more than packets for small messages and fewer bytes for larger ones. In the same calls
  // (bench/results/nvlink_allreduce/h100x4/one_shot_lines/, lines of one flag): 4 H100s at 128 KiB 6.8 us in lines
  // against 7.3 in packets, at 64 KiB 6.0 against 5.8-5.9; 2 H100s at 1 MiB 9.2 against 10.3, 2 MiB 14.9 against
  // 16.3, at 512 KiB 7.2 against 7.3, at 256 KiB 6.1 against 5.5. Eight: not measured (packets).
  if (ranks > 2 && ranks <= 4) return 64 << 10;
  return ranks == 2 ? (512 << 10) : kNever;
}

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
