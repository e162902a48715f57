#include <cuda_runtime.h>

#include <string>

#include "intra_node/cuda_devices.h"

namespace gradagg {

bool BuiltWithCuda() { return true; }

int CudaDeviceCount() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return count;
}

std::string DescribeCudaDevices() {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) return std::string("no CUDA device: ") + cudaGetErrorString(status);
  std::string text;
  for (int device = 0; device < count; ++device) {
    cudaDeviceProp properties{};
    if (cudaGetDeviceProperties(&properties, device) != cudaSuccess) continue;
    text += "GPU " + std::to_string(device) + ": " + properties.name + ", cc " + std::to_string(properties.major) +
            "." + std::to_string(properties.minor) + ", " + std::to_string(properties.totalGlobalMem >> 30) + " GiB\n";
  }
  return count == 0 ? "no CUDA device\n" : text;
}

}  // namespace gradagg
