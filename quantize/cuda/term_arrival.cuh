// The encoder's wait for terms that peers push while it runs (common/value_arrays.h TermArrival): before a warp
// reads a bucket's terms, every chunk the bucket touches must have arrived from every pushing term.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/value_arrays.h"

namespace gradagg::cuda_detail {

__device__ inline unsigned long long ArrivalTimerNs() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__device__ inline unsigned long long LoadFlagAcquire(const unsigned long long* flag) {
  unsigned long long value;
  asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(value) : "l"(flag) : "memory");
  return value;
}

// Returns once elements [begin, end) of every term (relative to the terms' start) may be read, or once the wait
// failed (recorded as TermArrival says). Every lane of the warp calls it alike.
__device__ inline void AwaitTerms(const TermArrival& arrival, int terms, size_t begin, size_t end) {
  if (arrival.flags == nullptr || end <= begin) return;
  const size_t first = (arrival.offset + begin) / arrival.chunk;
  const size_t last = (arrival.offset + end - 1) / arrival.chunk;
  for (int t = 0; t < terms; ++t) {
    if (t == arrival.self) continue;
    for (size_t c = first; c <= last; ++c) {
      const unsigned long long* flag = arrival.flags + static_cast<size_t>(t) * arrival.stride + c;
      if (LoadFlagAcquire(flag) >= arrival.epoch) continue;
      if (*static_cast<volatile int*>(arrival.failedClaim) != 0) return;  // the call failed already: no more waits
      const unsigned long long deadline = ArrivalTimerNs() + arrival.timeoutNs;
      while (LoadFlagAcquire(flag) < arrival.epoch) {
        if (ArrivalTimerNs() <= deadline) {
          __nanosleep(256);  // thousands of waiting warps, one line of L2 that the copy engine writes
          continue;
        }
        if (atomicCAS(arrival.failedClaim, 0, 1) == 0) {
          volatile TermArrivalFailure* failure = arrival.failure;
          failure->chunk = c;
          failure->epoch = arrival.epoch;
          __threadfence_system();
          failure->term = t;
          __threadfence_system();
        }
        return;
      }
    }
  }
}

}  // namespace gradagg::cuda_detail
