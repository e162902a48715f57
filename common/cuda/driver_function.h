// CUDA driver functions looked up through the runtime's entry-point query, so that nothing links libcuda (CI builds
// and tests without a driver), and their results checked. Host-only header; needs <cuda.h>.
#pragma once

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <string>

#include "common/cuda/cuda_error.h"

namespace gradagg {

// The driver's `name` (its CUDA 12 form), as `Function`; throws CudaError when this driver has none.
template <typename Function>
Function DriverFunction(const char* name) {
  void* function = nullptr;
  cudaDriverEntryPointQueryResult found{};
  GRADAGG_CUDA_CHECK(cudaGetDriverEntryPointByVersion(name, &function, 12000, cudaEnableDefault, &found));
  if (found != cudaDriverEntryPointSuccess || function == nullptr)
    throw CudaError(std::string("looking up driver function ") + name, cudaErrorSymbolNotFound, __FILE__, __LINE__);
  return reinterpret_cast<Function>(function);
}

// Throws CudaError naming `what` unless the driver call returned CUDA_SUCCESS.
inline void CheckDriver(CUresult result, const char* what) {
  if (result != CUDA_SUCCESS)
    throw CudaError(std::string(what) + " (driver error " + std::to_string(static_cast<int>(result)) + ")",
                    cudaErrorInvalidValue, __FILE__, __LINE__);
}

}  // namespace gradagg
