// Low-latency packets in inboxes of peer memory: every 4 bytes of data travel with a 4-byte flag (the call's number),
// two such pairs in one 16-byte store, so a receiver knows a word has landed by its own flag alone (each 8-byte half
// is checked by itself, so a store split in two is still safe). What the one-shot and the packet two-shot share.
#pragma once

#include <cstddef>
#include <cstdint>

#include "intra_node/cuda/peer_barrier.cuh"

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
