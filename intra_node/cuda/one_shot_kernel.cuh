// One-shot allreduce, the low-latency path for small messages, in low-latency packets: every 4 bytes of data travel
// with a 4-byte flag, two such pairs in one 16-byte store, so a receiver knows a word has landed by its own flag
// alone (each 8-byte half is checked by itself, so a store split in two is still safe). No barrier, no fence, one
// NVLink crossing.
//
// 1. each block pushes its words of the local input into every peer's inbox, in the slot of this rank, each as
//    {data, call number}; the first packet pair of the slot carries the call's signature;
// 2. each block waits, word by word, for every peer's packet of this call and sums in local-rank order (own input
//    read locally), float32, then writes the elements to the local output.
// Inboxes alternate between two halves by call parity: a peer writes half p again two calls later, and by then it
// has received this rank's packets of the call in between, sent after this rank finished reading half p.
#pragma once

#include "intra_node/cuda/peer_barrier.cuh"
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

__device__ inline void StorePair(uint4* slot, uint32_t first, uint32_t second, uint32_t flag) {
  asm volatile("st.volatile.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(slot), "r"(first), "r"(flag), "r"(second),
               "r"(flag)
               : "memory");
}

// Spins until both packets of the pair carry `flag`; false when the deadline passes first.
__device__ inline bool WaitPair(const uint4* slot, uint32_t flag, uint64_t deadline, uint32_t& first,
                                uint32_t& second) {
  uint32_t flag0, flag1;
  for (int spins = 0;; ++spins) {
    asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(first), "=r"(flag0), "=r"(second), "=r"(flag1)
                 : "l"(slot)
                 : "memory");
    if (flag0 == flag && flag1 == flag) return true;
    if ((spins & 1023) == 1023 && GlobalTimerNs() > deadline) return false;
  }
}

// Word w of the input: elements [w * k, w * k + k) with k = 4 / sizeof(T), zero past the end, read element by
// element so any element-aligned pointer works.
template <typename T>
__device__ inline uint32_t LoadWord(const T* input, size_t count, size_t w) {
  constexpr int kPerWord = 4 / static_cast<int>(sizeof(T));
  uint32_t word = 0;
  T* elements = reinterpret_cast<T*>(&word);
#pragma unroll
  for (int k = 0; k < kPerWord; ++k)
    if (w * kPerWord + k < count) elements[k] = input[w * kPerWord + k];
  return word;
}

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
