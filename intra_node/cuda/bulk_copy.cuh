// Bulk copies by the tensor memory accelerator (sm_90 and later): one thread moves contiguous 16-byte multiples
// between global memory (local or a peer's, mapped here) and the block's shared memory, while the other threads do
// something else. A load completes on a shared-memory barrier; stores are committed in groups and waited on by group.
// On older GPUs these trap: PeerGroup takes the bulk path only where its kernels' PTX is sm_90 or later.
#pragma once

#include <cstdint>

namespace gradagg::nvlink::device {

__device__ inline unsigned SharedAddress(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900

// A barrier that one load arrives on, with its bytes.
__device__ inline void InitLoadBarrier(uint64_t* barrier) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(SharedAddress(barrier)) : "memory");
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

// `bytes` (a multiple of 16, both addresses 16-byte aligned) from global `from` into shared `to`, completing on
// `barrier`'s next phase.
__device__ inline void BulkLoad(void* to, const void* from, unsigned bytes, uint64_t* barrier) {
  const unsigned bar = SharedAddress(barrier);
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                   SharedAddress(to)),
               "l"(from), "r"(bytes), "r"(bar)
               : "memory");
}

// Until the phase of `barrier` with this parity has completed (the load has landed).
__device__ inline void WaitLoad(uint64_t* barrier, unsigned parity) {
  unsigned done = 0;
  while (done == 0) {
    asm volatile(
        "{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
        : "=r"(done)
        : "r"(SharedAddress(barrier)), "r"(parity)
        : "memory");
  }
}

// `bytes` from shared `from` to global `to`, in the current group.
__device__ inline void BulkStore(void* to, const void* from, unsigned bytes) {
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(to), "r"(SharedAddress(from)),
               "r"(bytes)
               : "memory");
}

__device__ inline void CommitStores() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }

// Until every group but the newest `kPending` has read its shared memory (which may then be overwritten).
template <int kPending>
__device__ inline void WaitStoresRead() {
  asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(kPending) : "memory");
}

// Until every store is done, then orders them before this thread's later ordinary accesses (a flag's release).
__device__ inline void WaitStoresDone() {
  asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
  asm volatile("fence.proxy.async.global;" ::: "memory");
}

// Orders this thread's ordinary writes to shared memory before bulk stores that read it (after a __syncthreads).
__device__ inline void SharedWritesBeforeBulk() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }

#else

__device__ inline void InitLoadBarrier(uint64_t*) { __trap(); }
__device__ inline void BulkLoad(void*, const void*, unsigned, uint64_t*) { __trap(); }
__device__ inline void WaitLoad(uint64_t*, unsigned) { __trap(); }
__device__ inline void BulkStore(void*, const void*, unsigned) { __trap(); }
__device__ inline void CommitStores() { __trap(); }
template <int kPending>
__device__ inline void WaitStoresRead() {
  __trap();
}
__device__ inline void WaitStoresDone() { __trap(); }
__device__ inline void SharedWritesBeforeBulk() {}

#endif

}  // namespace gradagg::nvlink::device
