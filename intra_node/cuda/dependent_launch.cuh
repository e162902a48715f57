// Programmatic dependent launch (sm_90 and later) for the node's allreduce kernels. Launched with the stream's
// programmatic serialization allowed, a kernel's blocks may start while the kernel before it in the stream is still
// running; each waits in StartAfterPriorGrids until that kernel has finished and its writes are visible, so the
// launch's own latency overlaps the kernel before instead of following it. Every kernel that LaunchNodeKernel may
// launch so calls StartAfterPriorGrids before it touches memory or reads the clock. The kernel also lets the next
// kernel in the stream, if that one allows it, start the same way; its blocks then wait without running, beside
// blocks that are all resident already, so no kernel is kept from finishing where one process drives the GPU's node
// kernels. Not so where ranks share a GPU: there a waiting kernel may leave no room for another rank's kernel that
// the running one waits for, so GpuNode launches nothing dependent when ranks share GPUs. Only kernels compiled for
// sm_90 or later wait: PeerGroup launches dependent only when its kernels' PTX is (KernelsWaitForPriorGrids).
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "common/cuda/cuda_error.h"

namespace gradagg::nvlink {
namespace device {

__device__ inline void StartAfterPriorGrids() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

}  // namespace device

// kernel<<<blocks, threads, 0, stream>>>(args...), the launch dependent on the kernel before where `dependent`.
template <typename... Params, typename... Args>
void LaunchNodeKernel(void (*kernel)(Params...), int blocks, int threads, cudaStream_t stream, bool dependent,
                      const char* name, Args... args) {
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(static_cast<unsigned>(blocks));
  config.blockDim = dim3(static_cast<unsigned>(threads));
  config.stream = stream;
  config.attrs = &attribute;
  config.numAttrs = dependent ? 1 : 0;
  const cudaError_t status = cudaLaunchKernelEx(&config, kernel, args...);
  if (status != cudaSuccess) {
    cudaGetLastError();  // clears it, so that no later launch check reports it again
    throw CudaError(std::string("kernel ") + name, status, __FILE__, __LINE__);
  }
}

}  // namespace gradagg::nvlink
