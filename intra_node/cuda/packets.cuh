// Low-latency packets in inboxes of peer memory: every 4 bytes of data travel with a 4-byte flag (the call's number),
// two such pairs in one 16-byte store, so a receiver knows a word has landed by its own flag alone (each 8-byte half
// is checked by itself, so a store split in two is still safe). What the one-shot and the packet two-shot share.
#pragma once

#include <cstddef>
#include <cstdint>

#include "intra_node/cuda/peer_barrier.cuh"
#include "intra_node/cuda/vector_math.cuh"

namespace gradagg::nvlink::device {

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

// What a packet kernel needs: the message, every rank's inbox half for this call, and where senders' slots begin.
// In every inbox, sender s's slot starts at s * slotPairs; its first pair carries the call's signature.
struct PacketArgs {
  const void* input;
  void* output;
  size_t count;
  uint4* peerInbox[kMaxLocalRanks];  // rank p's inbox half for this call, mapped here (own one at [rank])
  size_t slotPairs;                  // packet pairs (16 bytes) between two senders' slots in an inbox
  BarrierContext barrier;
};

// Block 0 sends the call's signature to the first pair of this rank's slot in every peer's inbox.
__device__ inline void SendSignature(const PacketArgs& args, uint32_t flag) {
  const int rank = args.barrier.rank;
  const uint32_t signature = static_cast<uint32_t>(args.barrier.signature);
  if (blockIdx.x == 0 && threadIdx.x < args.barrier.ranks && threadIdx.x != rank)
    StorePair(args.peerInbox[threadIdx.x] + static_cast<size_t>(rank) * args.slotPairs, signature, signature, flag);
}

// Block 0 checks every peer's signature in this rank's inbox; a missing or other one is recorded as a failure.
__device__ inline void CheckSignatures(const PacketArgs& args, uint32_t flag, uint64_t deadline) {
  const int rank = args.barrier.rank;
  if (blockIdx.x != 0 || threadIdx.x >= args.barrier.ranks || threadIdx.x == rank) return;
  uint32_t theirs = 0, copy = 0;
  const int peer = static_cast<int>(threadIdx.x);
  if (!WaitPair(args.peerInbox[rank] + peer * args.slotPairs, flag, deadline, theirs, copy)) {
    RecordFailure(args.barrier, BarrierFailure::kTimeout, peer, 1, 0);
  } else if (theirs != static_cast<uint32_t>(args.barrier.signature)) {
    RecordFailure(args.barrier, BarrierFailure::kMismatch, peer, 1, theirs);
  }
}

// Data pair `pair` of the message summed over the ranks in local-rank order, float32, rounded to T: this rank's own
// words from its input, every peer's from pair `at` of its slot in this rank's inbox. False (failure recorded, as at
// `barrier`) when a peer's packet does not arrive in time.
template <typename T>
__device__ inline bool SumPairInRankOrder(const PacketArgs& args, size_t pair, size_t at, uint32_t flag,
                                          uint64_t deadline, int barrier, uint32_t (&sum)[2]) {
  constexpr int kPerPair = 8 / static_cast<int>(sizeof(T));
  const T* input = static_cast<const T*>(args.input);
  const uint4* inbox = args.peerInbox[args.barrier.rank];
  float acc[kPerPair];
  for (int p = 0; p < args.barrier.ranks; ++p) {
    uint32_t words[2];
    if (p == args.barrier.rank) {
      words[0] = LoadWord(input, args.count, 2 * pair);
      words[1] = LoadWord(input, args.count, 2 * pair + 1);
    } else if (!WaitPair(inbox + p * args.slotPairs + at, flag, deadline, words[0], words[1])) {
      RecordFailure(args.barrier, BarrierFailure::kTimeout, p, barrier, 0);
      return false;
    }
    const T* elements = reinterpret_cast<const T*>(words);
#pragma unroll
    for (int k = 0; k < kPerPair; ++k) acc[k] = p == 0 ? ToFloat(elements[k]) : __fadd_rn(acc[k], ToFloat(elements[k]));
  }
  T* rounded = reinterpret_cast<T*>(sum);
#pragma unroll
  for (int k = 0; k < kPerPair; ++k) rounded[k] = FromFloat<T>(acc[k]);
  return true;
}

// The elements of data pair q (words 2q and 2q + 1) that lie below `count`, stored to output.
template <typename T>
__device__ inline void StorePairElements(T* output, size_t count, size_t q, const uint32_t (&words)[2]) {
  constexpr int kPerPair = 8 / static_cast<int>(sizeof(T));
  const T* elements = reinterpret_cast<const T*>(words);
#pragma unroll
  for (int k = 0; k < kPerPair; ++k)
    if (q * kPerPair + k < count) output[q * kPerPair + k] = elements[k];
}

}  // namespace gradagg::nvlink::device
