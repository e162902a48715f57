// One-shot allreduce, the low-latency path for small messages, in low-latency packets (packets.cuh). No barrier, no
// fence, one NVLink crossing.
//
// 1. each block pushes its words of the local input into every peer's inbox, in the slot of this rank, each as
//    {data, call number}; the first packet pair of the slot carries the call's signature;
// 2. each block waits, word by word, for every peer's packet of this call and sums in local-rank order (own input
//    read locally), float32, then writes the elements to the local output.
// Inboxes alternate between two halves by call parity: a peer writes half p again two calls later, and by then it
// has received this rank's packets of the call in between, sent after this rank finished reading half p.
#pragma once

#include "intra_node/cuda/dependent_launch.cuh"
#include "intra_node/cuda/packets.cuh"
#include "intra_node/cuda/vector_math.cuh"

namespace gradagg::nvlink::device {

template <typename T>
__global__ void __launch_bounds__(512) OneShotAllReduceKernel(PacketArgs args) {
  StartAfterPriorGrids();
  const int rank = args.barrier.rank, ranks = args.barrier.ranks;
  const T* input = static_cast<const T*>(args.input);
  T* output = static_cast<T*>(args.output);
  const size_t pairs = DivUp(args.count, 8 / sizeof(T));
  const BlockRange range = RangeOfBlock(pairs, 1);
  const uint32_t flag = static_cast<uint32_t>(args.barrier.call);
  const size_t mySlot = static_cast<size_t>(rank) * args.slotPairs;

  // 1. Push: the signature first (block 0), then the words, pair q + 1 for words 2q and 2q + 1.
  SendSignature(args, flag);
  for (size_t q = range.begin + threadIdx.x; q < range.end; q += blockDim.x) {
    const uint32_t first = LoadWord(input, args.count, 2 * q), second = LoadWord(input, args.count, 2 * q + 1);
    for (int p = 0; p < ranks; ++p)
      if (p != rank) StorePair(args.peerInbox[p] + mySlot + 1 + q, first, second, flag);
  }

  // 2. Receive and sum in local-rank order.
  const uint64_t deadline = GlobalTimerNs() + args.barrier.timeoutNs;
  CheckSignatures(args, flag, deadline);
  for (size_t q = range.begin + threadIdx.x; q < range.end; q += blockDim.x) {
    uint32_t sum[2];
    if (!SumPairInRankOrder<T>(args, q, 1 + q, flag, deadline, 1, sum)) return;
    StorePairElements(output, args.count, q, sum);
  }
}

}  // namespace gradagg::nvlink::device
