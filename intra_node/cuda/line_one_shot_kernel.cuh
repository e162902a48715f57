// One-shot allreduce in line packets (line_packets.cuh): the one-shot of one_shot_kernel.cuh, its (G-1) copies of the
// message in 128-byte lines of 30 data words instead of 8-byte packets of 4, so it sends 16/15 of them instead of
// twice them. One NVLink crossing, no barrier, no fence, any buffer, warp by warp:
// 1. each warp pushes its lines of the local input into every peer's inbox, in the slot of this rank (after the
//    signature pair and its padding to 128 bytes);
// 2. it waits for every peer's copy of its lines, sums in local-rank order (own input read locally), float32, and
//    writes the elements to the local output.
// Warp w takes lines 4w .. 4w + 3, and every further 4 * warps. Inboxes alternate by call parity as the one-shot's do.
// In place is safe: the lanes that read an element of the input are the ones that write it.
#pragma once

#include "intra_node/cuda/dependent_launch.cuh"
#include "intra_node/cuda/line_packets.cuh"
#include "intra_node/cuda/peer_order.h"
#include "intra_node/cuda/vector_math.cuh"

namespace gradagg::nvlink::device {

struct LineOneShotArgs {
  PacketArgs packets;  // slotPairs >= kLineVectors * (1 + lines)
  size_t lines;        // of the whole message
};

template <typename T>
__global__ void __launch_bounds__(kLineThreads, kLineBlocksPerMultiprocessor) LineOneShotKernel(LineOneShotArgs call) {
  StartAfterPriorGrids();
  const PacketArgs& args = call.packets;
  const T* input = static_cast<const T*>(args.input);
  T* output = static_cast<T*>(args.output);
  const size_t words = DivUp(args.count, 4 / sizeof(T));
  const size_t lines = call.lines;
  const uint32_t flag = static_cast<uint32_t>(args.barrier.call);
  const size_t warp = (static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const size_t warps = static_cast<size_t>(gridDim.x) * blockDim.x / 32;
  const size_t groups = DivUp(lines, kLinesPerWarp);
  const int vector = LineVector();

  // 1. Push: the signature first (block 0), then this rank's lines to every peer, at step j to rank + j.
  SendSignature(args, flag);
  for (size_t g = warp; g < groups; g += warps) {
    const size_t line = g * kLinesPerWarp + LineOfLane();
    const bool valid = line < lines;
    const uint4 data = valid ? LoadLaneWords(input, args.count, words, line * kLineWords) : make_uint4(0, 0, 0, 0);
    SendLineToPeers(args, line, valid, data, flag);
  }

  // 2. Receive and sum in local-rank order.
  const uint64_t deadline = GlobalTimerNs() + args.barrier.timeoutNs;
  CheckSignatures(args, flag, deadline);
  uint4* inbox = args.peerInbox[args.barrier.rank];
  for (size_t g = warp; g < groups; g += warps) {
    const size_t line = g * kLinesPerWarp + LineOfLane();
    const bool valid = line < lines;
    const auto at = [&](int p) { return SlotLines(inbox, p, args.slotPairs) + line * kLineVectors + vector; };
    uint4 sum;
    if (!SumLineInRankOrder<T>(args, words, line * kLineWords, valid, at, flag, deadline, 1, sum)) return;
    if (valid) StoreLaneWords(output, args.count, line * kLineWords, sum);
  }
}

}  // namespace gradagg::nvlink::device
