// Packet two-shot allreduce, for the sizes between the one-shot and the two-shot on registered buffers: the
// reduce-scatter and the all-gather of a two-shot, both in low-latency packets (packets.cuh) through the inboxes, in
// one kernel with no barrier and no fence. Each rank sends about 2(G-1)/G of the message (in packets, twice that in
// bytes) instead of the one-shot's G-1 copies, at the price of a second NVLink crossing.
//
// The message is cut into data pairs (8 bytes, packet pairs of 16 bytes on the wire) and the pairs into G shards of
// shardPairs each (the last ones shorter or empty); block b takes the same part of every shard on every rank.
// 1. each block pushes its part of peer p's shard of the local input into p's inbox, in the slot of this rank; the
//    first packet pair of the slot carries the call's signature (block 0);
// 2. it waits for every peer's packets of its part of this rank's shard, sums in local-rank order (own input read
//    locally), float32, rounds to the element type, writes the result to the local output and pushes it into every
//    peer's inbox, after the shard in the same slot;
// 3. it waits for every peer's results of its part of their shards and writes them to the local output.
// Block b on one rank waits only for blocks b of the others, which wait for nothing before they push. Inboxes
// alternate by call parity as the one-shot's do (one_shot_kernel.cuh), in the same slots, so every call still sends
// every peer at least its signature: a rank writes half p again only after its peers finished the call that last
// read it. In place is safe: a thread reads each pair of the input before it writes that pair of the output.
#pragma once

#include "intra_node/cuda/dependent_launch.cuh"
#include "intra_node/cuda/packets.cuh"
#include "intra_node/cuda/peer_order.h"
#include "intra_node/cuda/vector_math.cuh"

namespace gradagg::nvlink::device {

struct PacketTwoShotArgs {
  PacketArgs packets;  // slotPairs >= 1 + 2 shardPairs
  size_t shardPairs;   // data pairs per shard
};

template <typename T>
__global__ void __launch_bounds__(512) PacketTwoShotKernel(PacketTwoShotArgs call) {
  StartAfterPriorGrids();
  const PacketArgs& args = call.packets;
  const int rank = args.barrier.rank, ranks = args.barrier.ranks;
  const T* input = static_cast<const T*>(args.input);
  T* output = static_cast<T*>(args.output);
  const size_t pairs = DivUp(args.count, 8 / sizeof(T));
  const size_t shard = call.shardPairs;
  const BlockRange range = RangeOfBlock(shard, 1);
  const uint32_t flag = static_cast<uint32_t>(args.barrier.call);
  // In every inbox, this rank's slot: [signature][its part of the owner's shard][its own shard's results].
  const size_t mySlot = static_cast<size_t>(rank) * args.slotPairs;
  const size_t results = 1 + shard;  // where a slot's results start

  // 1. Push each peer's part, at step j to rank + j (every receiver hears from one sender at a time).
  SendSignature(args, flag);
  for (size_t q = range.begin + threadIdx.x; q < range.end; q += blockDim.x) {
    for (int j = 1; j < ranks; ++j) {
      const int p = PeerAt(PeerOrder::kRotated, rank, ranks, j);
      const size_t g = p * shard + q;
      if (g >= pairs) continue;
      StorePair(args.peerInbox[p] + mySlot + 1 + q, LoadWord(input, args.count, 2 * g),
                LoadWord(input, args.count, 2 * g + 1), flag);
    }
  }

  // 2. Sum this rank's shard in local-rank order; keep, and send, the result.
  const uint64_t deadline = GlobalTimerNs() + args.barrier.timeoutNs;
  const uint4* inbox = args.peerInbox[rank];
  CheckSignatures(args, flag, deadline);
  for (size_t q = range.begin + threadIdx.x; q < range.end; q += blockDim.x) {
    const size_t g = rank * shard + q;
    if (g >= pairs) break;
    uint32_t sum[2];
    if (!SumPairInRankOrder<T>(args, g, 1 + q, flag, deadline, 3, sum)) return;
    for (int j = 1; j < ranks; ++j) {
      const int p = PeerAt(PeerOrder::kRotated, rank, ranks, j);
      StorePair(args.peerInbox[p] + mySlot + results + q, sum[0], sum[1], flag);
    }
    StorePairElements(output, args.count, g, sum);
  }

  // 3. Every peer's results for its shard.
  for (size_t q = range.begin + threadIdx.x; q < range.end; q += blockDim.x) {
    for (int j = 1; j < ranks; ++j) {
      const int p = rank >= j ? rank - j : rank - j + ranks;  // the peer whose step j sent to this rank
      const size_t g = p * shard + q;
      if (g >= pairs) continue;
      uint32_t sum[2];
      if (!WaitPair(inbox + p * args.slotPairs + results + q, flag, deadline, sum[0], sum[1])) {
        RecordFailure(args.barrier, BarrierFailure::kTimeout, p, 3, 0);
        return;
      }
      StorePairElements(output, args.count, g, sum);
    }
  }
}

}  // namespace gradagg::nvlink::device
