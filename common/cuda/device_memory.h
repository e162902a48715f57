// Owning device memory (cudaMalloc / cudaFree), deleters for it and for pinned host memory, and whether a GPU is
// there at all. Host-only header.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "common/cuda/cuda_error.h"

namespace gradagg {

struct CudaFree {
  void operator()(void* p) const noexcept { cudaFree(p); }
};

struct CudaFreeHost {
  void operator()(void* p) const noexcept { cudaFreeHost(p); }
};

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes) : bytes_(bytes) {
    void* p = nullptr;
    if (bytes > 0) GRADAGG_CUDA_CHECK(cudaMalloc(&p, bytes));
    memory_.reset(p);
  }
  template <typename T>
  T* as() const {
    return static_cast<T*>(memory_.get());
  }
  void* get() const { return memory_.get(); }
  size_t bytes() const { return bytes_; }
  // Gives the memory up without freeing it: for memory that another process may still map (CUDA IPC), when that
  // process is out of step and will not say when it is done.
  void Leak() noexcept {
    memory_.release();
    bytes_ = 0;
  }

  // A device copy of `host` (synchronous).
  template <typename T>
  static DeviceBuffer From(const std::vector<T>& host) {
    DeviceBuffer buffer(host.size() * sizeof(T));
    if (host.empty()) return buffer;
    GRADAGG_CUDA_CHECK(cudaMemcpy(buffer.get(), host.data(), buffer.bytes(), cudaMemcpyHostToDevice));
    // A copy from pageable memory may return before it lands (CUDA stages it), and work on a non-blocking stream
    // does not wait for the legacy stream it went on: wait for it here.
    GRADAGG_CUDA_CHECK(cudaDeviceSynchronize());
    return buffer;
  }
  // The first `count` elements, copied back (synchronous).
  template <typename T>
  std::vector<T> ToHost(size_t count) const {
    std::vector<T> host(count);
    if (count > 0) GRADAGG_CUDA_CHECK(cudaMemcpy(host.data(), get(), count * sizeof(T), cudaMemcpyDeviceToHost));
    return host;
  }

 private:
  std::unique_ptr<void, CudaFree> memory_;
  size_t bytes_ = 0;
};

// Why there is no usable GPU ("" when there is one).
inline std::string CudaUnavailableReason() {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) return std::string("no CUDA device: ") + cudaGetErrorString(status);
  return count == 0 ? "no CUDA device" : "";
}

}  // namespace gradagg
