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

#include "intra_node/cuda/packets.cuh"
#include "intra_node/cuda/vector_math.cuh"

namespace gradagg::nvlink::device {

struct OneShotArgs {
  const void* input;
  void* output;
  size_t count;
  uint4* peerInbox[kMaxLocalRanks];  // rank p's inbox half for this call, mapped here (own one at [rank])
  size_t slotPairs;                  // packet pairs (16 bytes) between two senders' slots in an inbox
  BarrierContext barrier;
};

template <typename T>
__global__ void __launch_bounds__(512) OneShotAllReduceKernel(OneShotArgs args) {
  constexpr int kPerWord = 4 / static_cast<int>(sizeof(T));
  const int rank = args.barrier.rank, ranks = args.barrier.ranks;
  const T* input = static_cast<const T*>(args.input);
  T* output = static_cast<T*>(args.output);
  const size_t pairs = DivUp(DivUp(args.count, kPerWord), 2);
  const BlockRange range = RangeOfBlock(pairs, 1);
  const uint32_t flag = static_cast<uint32_t>(args.barrier.call);
  const uint32_t signature = static_cast<uint32_t>(args.barrier.signature);
  const size_t mySlot = static_cast<size_t>(rank) * args.slotPairs;

  // 1. Push: the signature first (block 0), then the words, pair q + 1 for words 2q and 2q + 1.
  if (blockIdx.x == 0 && threadIdx.x < ranks && threadIdx.x != rank)
    StorePair(args.peerInbox[threadIdx.x] + mySlot, signature, signature, flag);
  for (size_t q = range.begin + threadIdx.x; q < range.end; q += blockDim.x) {
    const uint32_t first = LoadWord(input, args.count, 2 * q), second = LoadWord(input, args.count, 2 * q + 1);
    for (int p = 0; p < ranks; ++p)
      if (p != rank) StorePair(args.peerInbox[p] + mySlot + 1 + q, first, second, flag);
  }

  // 2. Receive and sum in local-rank order.
  const uint64_t deadline = GlobalTimerNs() + args.barrier.timeoutNs;
  const uint4* inbox = args.peerInbox[rank];
  if (blockIdx.x == 0 && threadIdx.x < ranks && threadIdx.x != rank) {
    uint32_t theirs = 0, copy = 0;
    const int peer = static_cast<int>(threadIdx.x);
    if (!WaitPair(inbox + peer * args.slotPairs, flag, deadline, theirs, copy)) {
      RecordFailure(args.barrier, BarrierFailure::kTimeout, peer, 1, 0);
    } else if (theirs != signature) {
      RecordFailure(args.barrier, BarrierFailure::kMismatch, peer, 1, theirs);
    }
  }
  for (size_t q = range.begin + threadIdx.x; q < range.end; q += blockDim.x) {
    float acc[2 * kPerWord];
    for (int p = 0; p < ranks; ++p) {
      uint32_t words[2];
      if (p == rank) {
        words[0] = LoadWord(input, args.count, 2 * q);
        words[1] = LoadWord(input, args.count, 2 * q + 1);
      } else if (!WaitPair(inbox + p * args.slotPairs + 1 + q, flag, deadline, words[0], words[1])) {
        RecordFailure(args.barrier, BarrierFailure::kTimeout, p, 1, 0);
        return;
      }
      const T* elements = reinterpret_cast<const T*>(words);
#pragma unroll
      for (int k = 0; k < 2 * kPerWord; ++k)
        acc[k] = p == 0 ? ToFloat(elements[k]) : __fadd_rn(acc[k], ToFloat(elements[k]));
    }
#pragma unroll
    for (int k = 0; k < 2 * kPerWord; ++k)
      if (2 * q * kPerWord + k < args.count) output[2 * q * kPerWord + k] = FromFloat<T>(acc[k]);
  }
}

}  // namespace gradagg::nvlink::device
