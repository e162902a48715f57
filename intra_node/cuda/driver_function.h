// CUDA driver functions through the runtime's entry-point query, so that nothing links libcuda (CI has no driver).
// Host-only; internal to intra_node/cuda.
#pragma once

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <string>

#include "common/cuda/cuda_error.h"

namespace gradagg::nvlink {

// The driver's `name` (as of the CUDA 12.0 ABI); throws CudaError when this driver has none.
template <typename Function>
Function DriverFunction(const char* name) {
  void* function = nullptr;
  cudaDriverEntryPointQueryResult found{};
  GRADAGG_CUDA_CHECK(cudaGetDriverEntryPointByVersion(name, &function, 12000, cudaEnableDefault, &found));
  if (found != cudaDriverEntryPointSuccess || function == nullptr)
    throw CudaError(std::string("looking up driver function ") + name, cudaErrorSymbolNotFound, __FILE__, __LINE__);
  return reinterpret_cast<Function>(function);
}

// Throws CudaError naming `what` unless the driver call succeeded.
inline void CheckDriver(CUresult result, const char* what) {
  if (result != CUDA_SUCCESS)
    throw CudaError(std::string(what) + " (driver error " + std::to_string(static_cast<int>(result)) + ")",
                    cudaErrorInvalidValue, __FILE__, __LINE__);
}

}  // namespace gradagg::nvlink
