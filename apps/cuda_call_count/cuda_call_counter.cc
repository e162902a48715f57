// Counts a process's calls into the CUDA runtime, to show what one aggregation costs in launches and waits.
// Preloaded into a program linked with the shared runtime (libcudart.so, the default build):
//
//   LD_PRELOAD=libgradagg_cuda_call_counter.so gradagg ...
//
// At exit it prints one line per process on stderr: "# cuda calls (rank R): launch=N memcpy_async=N ...". Per
// aggregation call: run twice with different iteration counts and divide the difference (scripts/cuda_call_count.py).
// Each wrapper forwards to the next definition (the runtime's) and adds 1; results and errors pass through untouched.
#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>

namespace {

enum Counter {
  kLaunch,
  kMemcpyAsync,
  kMemsetAsync,
  kMemcpy,
  kMemset,
  kEventRecord,
  kEventQuery,
  kStreamWaitEvent,
  kStreamSynchronize,
  kEventSynchronize,
  kDeviceSynchronize,
  kCounters
};
constexpr const char* kNames[kCounters] = {"launch",      "memcpy_async", "memset_async", "memcpy",
                                           "memset",      "event_record", "event_query",  "stream_wait_event",
                                           "stream_sync", "event_sync",   "device_sync"};

std::atomic<unsigned long long> counts[kCounters];

template <typename Function>
Function Next(const char* name) {
  void* next = dlsym(RTLD_NEXT, name);
  if (next == nullptr) {
    std::fprintf(stderr, "cuda_call_counter: %s not found after the preload (is the runtime linked shared?)\n", name);
    std::abort();
  }
  return reinterpret_cast<Function>(next);
}

struct Report {
  ~Report() {
    const char* rank = std::getenv("OMPI_COMM_WORLD_RANK");
    std::fprintf(stderr, "# cuda calls (rank %s):", rank != nullptr ? rank : "?");
    for (int i = 0; i < kCounters; ++i) std::fprintf(stderr, " %s=%llu", kNames[i], counts[i].load());
    std::fprintf(stderr, "\n");
  }
} report;

}  // namespace

// Each wrapper: count, then call the runtime's own definition of the same name.
#define GRADAGG_COUNTED(counter, name, params, args)             \
  extern "C" cudaError_t name params {                           \
    static const auto next = Next<cudaError_t(*) params>(#name); \
    counts[counter].fetch_add(1, std::memory_order_relaxed);     \
    return next args;                                            \
  }

// nvcc's <<<>>> calls __cudaLaunchKernel (CUDA 12.8 and later); cudaLaunchKernel is the API's own.
GRADAGG_COUNTED(kLaunch, __cudaLaunchKernel,
                (cudaKernel_t kernel, dim3 grid, dim3 block, void** args, size_t shared, cudaStream_t stream),
                (kernel, grid, block, args, shared, stream))
GRADAGG_COUNTED(kLaunch, cudaLaunchKernel,
                (const void* func, dim3 grid, dim3 block, void** args, size_t shared, cudaStream_t stream),
                (func, grid, block, args, shared, stream))
// cudaLaunchKernelEx (launches with attributes: intra_node/cuda/dependent_launch.cuh) calls cudaLaunchKernelExC.
GRADAGG_COUNTED(kLaunch, cudaLaunchKernelExC, (const cudaLaunchConfig_t* config, const void* func, void** args),
                (config, func, args))
GRADAGG_COUNTED(kMemcpyAsync, cudaMemcpyAsync,
                (void* to, const void* from, size_t bytes, cudaMemcpyKind kind, cudaStream_t stream),
                (to, from, bytes, kind, stream))
GRADAGG_COUNTED(kMemsetAsync, cudaMemsetAsync, (void* to, int value, size_t bytes, cudaStream_t stream),
                (to, value, bytes, stream))
GRADAGG_COUNTED(kMemcpy, cudaMemcpy, (void* to, const void* from, size_t bytes, cudaMemcpyKind kind),
                (to, from, bytes, kind))
GRADAGG_COUNTED(kMemset, cudaMemset, (void* to, int value, size_t bytes), (to, value, bytes))
GRADAGG_COUNTED(kEventRecord, cudaEventRecord, (cudaEvent_t event, cudaStream_t stream), (event, stream))
GRADAGG_COUNTED(kEventQuery, cudaEventQuery, (cudaEvent_t event), (event))
GRADAGG_COUNTED(kStreamWaitEvent, cudaStreamWaitEvent, (cudaStream_t stream, cudaEvent_t event, unsigned flags),
                (stream, event, flags))
GRADAGG_COUNTED(kStreamSynchronize, cudaStreamSynchronize, (cudaStream_t stream), (stream))
GRADAGG_COUNTED(kEventSynchronize, cudaEventSynchronize, (cudaEvent_t event), (event))
GRADAGG_COUNTED(kDeviceSynchronize, cudaDeviceSynchronize, (void), ())
