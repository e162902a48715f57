// A barrier between the blocks with the same index on every rank of a node, through flags in peer memory:
// system-scope release on the writer's side, acquire on the reader's, a deadline instead of an endless spin.
//
// 1. every thread of the block has finished its peer-memory writes (__syncthreads);
// 2. thread p (p != me) fences and writes, into rank p's ControlBlock, this call's signature and then the epoch;
// 3. thread p spins until rank p's flag in its own ControlBlock reaches the epoch, or the deadline passes;
// 4. __syncthreads, so the whole block sees what the peers wrote before they signalled.
// Returns false on every thread of the block when a peer failed to arrive in time or called differently; the first
// failure of the call lands in the host-visible BarrierStatus.
#pragma once

#include <cstdint>

#include "intra_node/cuda/control_block.h"

namespace gradagg::nvlink::device {

__device__ inline uint64_t GlobalTimerNs() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__device__ inline void StoreRelease(uint64_t* address, uint64_t value) {
  asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(address), "l"(value) : "memory");
}

__device__ inline uint64_t LoadAcquire(const uint64_t* address) {
  uint64_t value;
  asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(value) : "l"(address) : "memory");
  return value;
}

// The first failure on this rank wins a claim in its own control block (device memory: a system-scope atomic on the
// host-mapped status is not supported where the GPU has no native host atomics, and compute-sanitizer rejects it),
// then fills the host-visible status, the failure field last, so the host never reads a half-written record.
__device__ inline void RecordFailure(const BarrierContext& context, BarrierFailure failure, int peer, int barrier,
                                     uint64_t theirs) {
  if (atomicCAS(&context.peerControl[context.rank]->failureClaimed, 0, 1) != 0) return;
  volatile BarrierStatus* status = context.status;
  status->peer = peer;
  status->block = static_cast<int>(blockIdx.x);
  status->barrier = barrier;
  status->call = context.call;
  status->mine = context.signature;
  status->theirs = theirs;
  status->timeNs = GlobalTimerNs();
  __threadfence_system();
  status->failure = static_cast<int>(failure);
  __threadfence_system();
}

// Spins until *flag >= target (acquire), or records a timeout naming `peer` and returns false.
__device__ inline bool WaitAtLeast(const BarrierContext& context, const uint64_t* flag, uint64_t target, int peer,
                                   int barrier) {
  const uint64_t deadline = GlobalTimerNs() + context.timeoutNs;
  while (LoadAcquire(flag) < target) {
    if (GlobalTimerNs() > deadline) {
      RecordFailure(context, BarrierFailure::kTimeout, peer, barrier, 0);
      return false;
    }
  }
  return true;
}

__device__ inline bool NodeBarrier(const BarrierContext& context, int barrier) {
  const int peer = static_cast<int>(threadIdx.x);
  const uint64_t epoch = context.call * kBarriersPerCall + static_cast<uint64_t>(barrier);
  bool failed = false;
  __syncthreads();
  if (peer < context.ranks && peer != context.rank) {
    ControlBlock* theirs = context.peerControl[peer];
    __threadfence_system();
    if (barrier == 1) theirs->signature[blockIdx.x][context.rank] = context.signature;
    StoreRelease(&theirs->arrived[blockIdx.x][context.rank], epoch);

    ControlBlock* mine = context.peerControl[context.rank];
    const uint64_t deadline = GlobalTimerNs() + context.timeoutNs;
    while (LoadAcquire(&mine->arrived[blockIdx.x][peer]) < epoch) {
      if (GlobalTimerNs() > deadline) {
        RecordFailure(context, BarrierFailure::kTimeout, peer, barrier, 0);
        failed = true;
        break;
      }
    }
    if (!failed && barrier == 1) {
      const uint64_t signature = *static_cast<volatile uint64_t*>(&mine->signature[blockIdx.x][peer]);
      if (signature != context.signature) {
        RecordFailure(context, BarrierFailure::kMismatch, peer, barrier, signature);
        failed = true;
      }
    }
  }
  return __syncthreads_or(failed) == 0;
}

}  // namespace gradagg::nvlink::device
