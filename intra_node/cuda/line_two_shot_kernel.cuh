// Line two-shot allreduce: the packet two-shot (packet_two_shot_kernel.cuh) in line packets (line_packets.cuh), 30
// data words in every 32 sent instead of 1 in 2, so each rank sends about 2(G-1)/G of the message once more only by
// 1/15. The same three steps, warp by warp instead of thread by thread:
// 1. each warp pushes its lines of peer p's shard of the local input into p's inbox, in the slot of this rank;
// 2. it waits for every peer's lines of its lines of this rank's shard, sums in local-rank order (own input read
//    locally), float32, rounds to the element type, writes the result to the local output and pushes it into every
//    peer's inbox, after the shard's lines in the same slot;
// 3. it waits for every peer's result lines of its lines of their shards and writes them to the local output.
// Shards are cut into whole lines of 30 words; warp w takes lines 4w .. 4w + 3 (and every further 4 * warps) of every
// shard on every rank. In every inbox, sender s's slot holds [signature pair, padding to 128 bytes][its lines of the
// owner's shard][the results of s's own shard]. Inboxes alternate by call parity as the one-shot's do. In place is
// safe: the lanes that read an element of the input are the ones that write it later.
#pragma once

#include "intra_node/cuda/dependent_launch.cuh"
#include "intra_node/cuda/line_packets.cuh"
#include "intra_node/cuda/peer_order.h"
#include "intra_node/cuda/vector_math.cuh"

namespace gradagg::nvlink::device {

struct LineTwoShotArgs {
  PacketArgs packets;  // slotPairs >= kLineVectors * (1 + 2 shardLines)
  size_t shardLines;   // lines per shard
};

template <typename T>
__global__ void __launch_bounds__(kLineThreads, kLineBlocksPerMultiprocessor) LineTwoShotKernel(LineTwoShotArgs call) {
  StartAfterPriorGrids();
  const PacketArgs& args = call.packets;
  const int rank = args.barrier.rank, ranks = args.barrier.ranks;
  const T* input = static_cast<const T*>(args.input);
  T* output = static_cast<T*>(args.output);
  const size_t words = DivUp(args.count, 4 / sizeof(T));
  const size_t lines = call.shardLines, shardWords = lines * kLineWords;
  const uint32_t flag = static_cast<uint32_t>(args.barrier.call);
  const size_t warp = (static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const size_t warps = static_cast<size_t>(gridDim.x) * blockDim.x / 32;
  const size_t groups = DivUp(lines, kLinesPerWarp);
  const int vector = LineVector();
  const size_t results = lines * kLineVectors;  // where a slot's result lines start, after its shard's lines

  // 1. Push each peer's lines, at step j to rank + j.
  SendSignature(args, flag);
  for (size_t g = warp; g < groups; g += warps) {
    const size_t line = g * kLinesPerWarp + LineOfLane();
    const bool valid = line < lines;
    for (int j = 1; j < ranks; ++j) {
      const int p = PeerAt(PeerOrder::kRotated, rank, ranks, j);
      const uint4 data =
          valid ? LoadLaneWords(input, args.count, words, p * shardWords + line * kLineWords) : make_uint4(0, 0, 0, 0);
      SendLine(args, p, line, valid, data, flag);
    }
  }

  // 2. Sum this rank's shard in local-rank order; keep, and send, the result.
  const uint64_t deadline = GlobalTimerNs() + args.barrier.timeoutNs;
  CheckSignatures(args, flag, deadline);
  uint4* inbox = args.peerInbox[rank];
  for (size_t g = warp; g < groups; g += warps) {
    const size_t line = g * kLinesPerWarp + LineOfLane();
    const bool valid = line < lines;
    const size_t first = rank * shardWords + line * kLineWords;
    const auto at = [&](int p) { return SlotLines(inbox, p, args.slotPairs) + line * kLineVectors + vector; };
    uint4 sum;
    if (!SumLineInRankOrder<T>(args, words, first, valid, at, flag, deadline, 3, sum)) return;
    SendLineToPeers(args, lines + line, valid, sum, flag);
    if (valid) StoreLaneWords(output, args.count, first, sum);
  }

  // 3. Every peer's results for its shard.
  for (size_t g = warp; g < groups; g += warps) {
    const size_t line = g * kLinesPerWarp + LineOfLane();
    const bool valid = line < lines;
    for (int j = 1; j < ranks; ++j) {
      const int p = rank >= j ? rank - j : rank - j + ranks;  // the peer whose step j sent to this rank
      uint4 in = make_uint4(0, 0, 0, 0);
      const uint4* at = SlotLines(inbox, p, args.slotPairs) + results + line * kLineVectors + vector;
      if (!ReceiveLine(args, at, valid, flag, deadline, p, 3, in)) return;
      if (valid) StoreLaneWords(output, args.count, p * shardWords + line * kLineWords, in);
    }
  }
}

}  // namespace gradagg::nvlink::device
