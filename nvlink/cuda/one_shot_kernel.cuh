// One-shot allreduce, the low-latency path for small messages, in low-latency packets: every 4 bytes of data travel
// with a 4-byte flag in one 8-byte store, so a receiver knows a word has landed by its flag alone. No barrier, no
// fence, one NVLink crossing.
//
// 1. each block pushes its words of the local input into every peer's inbox, in the slot of this rank, each as
//    {data, call number}; packet 0 of the slot carries the call's signature;
// 2. each block waits, word by word, for every peer's packet of this call and sums in local-rank order (own input
//    read locally), float32, then writes the elements to the local output.
// Inboxes alternate between two halves by call parity: a peer writes half p again two calls later, and by then it
// has received this rank's packets of the call in between, sent after this rank finished reading half p.
#pragma once

#include "nvlink/cuda/peer_barrier.cuh"
#include "nvlink/cuda/vector_math.cuh"

namespace gradagg::nvlink::device {

struct OneShotArgs {
  const void* input;
  void* output;
  size_t count;
  uint64_t* peerInbox[kMaxLocalRanks];  // rank p's inbox half for this call, mapped here (own one at [rank])
  size_t slotPackets;                   // packets between two senders' slots in an inbox
  BarrierContext barrier;
};

__device__ inline void StorePacket(uint64_t* slot, uint32_t data, uint32_t flag) {
  asm volatile("st.volatile.global.v2.u32 [%0], {%1, %2};" ::"l"(slot), "r"(data), "r"(flag) : "memory");
}

// Spins until the packet carries `flag`; false when the deadline passes first.
__device__ inline bool WaitPacket(const uint64_t* slot, uint32_t flag, uint64_t deadline, uint32_t& data) {
  uint32_t seen;
  for (int spins = 0;; ++spins) {
    asm volatile("ld.volatile.global.v2.u32 {%0, %1}, [%2];" : "=r"(data), "=r"(seen) : "l"(slot) : "memory");
    if (seen == flag) return true;
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
  const size_t words = DivUp(args.count, kPerWord);
  const BlockRange range = RangeOfBlock(words, 1);
  const uint32_t flag = static_cast<uint32_t>(args.barrier.call);
  const uint32_t signature = static_cast<uint32_t>(args.barrier.signature);
  const size_t mySlot = static_cast<size_t>(rank) * args.slotPackets;

  // 1. Push: the signature first (block 0), then the words, packet w + 1 for word w.
  if (blockIdx.x == 0 && threadIdx.x < ranks && threadIdx.x != rank)
    StorePacket(args.peerInbox[threadIdx.x] + mySlot, signature, flag);
  for (size_t w = range.begin + threadIdx.x; w < range.end; w += blockDim.x) {
    const uint32_t word = LoadWord(input, args.count, w);
    for (int p = 0; p < ranks; ++p)
      if (p != rank) StorePacket(args.peerInbox[p] + mySlot + 1 + w, word, flag);
  }

  // 2. Receive and sum in local-rank order.
  const uint64_t deadline = GlobalTimerNs() + args.barrier.timeoutNs;
  const uint64_t* inbox = args.peerInbox[rank];
  if (blockIdx.x == 0 && threadIdx.x < ranks && threadIdx.x != rank) {
    uint32_t theirs = 0;
    const int peer = static_cast<int>(threadIdx.x);
    if (!WaitPacket(inbox + peer * args.slotPackets, flag, deadline, theirs)) {
      RecordFailure(args.barrier, BarrierFailure::kTimeout, peer, 1, 0);
    } else if (theirs != signature) {
      RecordFailure(args.barrier, BarrierFailure::kMismatch, peer, 1, theirs);
    }
  }
  for (size_t w = range.begin + threadIdx.x; w < range.end; w += blockDim.x) {
    float acc[kPerWord];
    for (int p = 0; p < ranks; ++p) {
      uint32_t word;
      if (p == rank) {
        word = LoadWord(input, args.count, w);
      } else if (!WaitPacket(inbox + p * args.slotPackets + 1 + w, flag, deadline, word)) {
        RecordFailure(args.barrier, BarrierFailure::kTimeout, p, 1, 0);
        return;
      }
      const T* elements = reinterpret_cast<const T*>(&word);
#pragma unroll
      for (int k = 0; k < kPerWord; ++k) acc[k] = p == 0 ? ToFloat(elements[k]) : __fadd_rn(acc[k], ToFloat(elements[k]));
    }
#pragma unroll
    for (int k = 0; k < kPerWord; ++k)
      if (w * kPerWord + k < args.count) output[w * kPerWord + k] = FromFloat<T>(acc[k]);
  }
}

}  // namespace gradagg::nvlink::device
