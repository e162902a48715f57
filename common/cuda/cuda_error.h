// Every CUDA call is checked; a failure becomes a CudaError naming the call (or kernel), CUDA's error string,
// the device and where it happened. Host-only header.
#pragma once

#include <cuda_runtime_api.h>

#include <stdexcept>
#include <string>

namespace gradagg {

class CudaError : public std::runtime_error {
 public:
  CudaError(const std::string& what, cudaError_t status, const char* file, int line)
      : std::runtime_error(what + " failed: " + cudaGetErrorName(status) + ": " + cudaGetErrorString(status) +
                           " (device " + CurrentDevice() + ", " + file + ":" + std::to_string(line) + ")"),
        status_(status) {}
  cudaError_t status() const { return status_; }

 private:
  static std::string CurrentDevice() {
    int device = -1;
    return cudaGetDevice(&device) == cudaSuccess ? std::to_string(device) : "?";
  }
  cudaError_t status_;
};

}  // namespace gradagg

// Wraps a CUDA runtime call: throws gradagg::CudaError unless it returns cudaSuccess.
#define GRADAGG_CUDA_CHECK(call)                                                \
  do {                                                                          \
    const cudaError_t gradaggCudaStatus = (call);                               \
    if (gradaggCudaStatus != cudaSuccess) {                                     \
      throw ::gradagg::CudaError(#call, gradaggCudaStatus, __FILE__, __LINE__); \
    }                                                                           \
  } while (false)

// After a kernel launch: throws gradagg::CudaError naming the kernel if the launch failed. Never synchronises.
#define GRADAGG_CUDA_CHECK_LAUNCH(kernelName)                                                                   \
  do {                                                                                                          \
    const cudaError_t gradaggCudaStatus = cudaGetLastError();                                                   \
    if (gradaggCudaStatus != cudaSuccess) {                                                                     \
      throw ::gradagg::CudaError(std::string("kernel ") + (kernelName), gradaggCudaStatus, __FILE__, __LINE__); \
    }                                                                                                           \
  } while (false)
