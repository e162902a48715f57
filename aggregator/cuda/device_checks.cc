#include "aggregator/cuda/device_checks.h"

#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstdio>
#include <vector>

#include "aggregator/device_path.h"
#include "common/cuda/cuda_error.h"
#include "intra_node/cuda/ipc_memory.h"

namespace gradagg {
namespace {

bool IsKnown(DataType type) {
  return type == DataType::kFloat32 || type == DataType::kBFloat16 || type == DataType::kFloat16;
}

}  // namespace

std::string Hex(const void* pointer) {
  char text[32];
  std::snprintf(text, sizeof text, "%p", pointer);
  return text;
}

std::string CurrentGpuProblem(int device, int& current) {
  if (const cudaError_t status = cudaGetDevice(&current); status != cudaSuccess) {
    cudaGetLastError();
    return std::string("no usable GPU for device gradients: ") + cudaGetErrorString(status);
  }
  if (device >= 0 && current != device) {
    return "the current GPU is " + std::to_string(current) + ", but this Aggregator works on GPU " +
           std::to_string(device) + " (its GPU when first called with device gradients); keep one GPU per rank";
  }
  return "";
}

std::string MemoryProblem(const std::string& which, const void* data, size_t bytes, size_t alignment, int current,
                          bool forPeers) {
  if (data == nullptr) return which + " is null with " + std::to_string(bytes) + " bytes";
  if (reinterpret_cast<uintptr_t>(data) % alignment != 0)
    return which + " at " + Hex(data) + " is not aligned to its " + std::to_string(alignment) + "-byte elements";
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, data) != cudaSuccess ||
      (attributes.type != cudaMemoryTypeDevice && (forPeers || attributes.type != cudaMemoryTypeManaged))) {
    cudaGetLastError();
    return which + " at " + Hex(data) + " is not device memory" + (forPeers ? " from cudaMalloc" : "");
  }
  if (attributes.type == cudaMemoryTypeDevice && attributes.device != current)
    return which + " lives on GPU " + std::to_string(attributes.device) + ", but this rank's current GPU is " +
           std::to_string(current);
  try {
    const nvlink::AllocationIdentity allocation = nvlink::IdentifyAllocation(data);
    const uintptr_t end = reinterpret_cast<uintptr_t>(data) + bytes;
    if (end > allocation.base + allocation.bytes)
      return which + " (" + std::to_string(bytes) + " bytes at " + Hex(data) + ") runs " +
             std::to_string(end - allocation.base - allocation.bytes) + " bytes past the end of its allocation";
    if (forPeers) nvlink::ExportBuffer(const_cast<void*>(data), bytes);
  } catch (const CudaError& error) {
    cudaGetLastError();
    return which + " at " + Hex(data) + ": " +
           (forPeers ? "CUDA IPC cannot share it (" : "its allocation is unknown to CUDA (") + error.what() + ")";
  }
  return "";
}

std::string DeviceGradientProblem(const std::vector<DeviceGradient>& gradients, int device) {
  int current = -1;
  if (std::string problem = CurrentGpuProblem(device, current); !problem.empty()) return problem;
  for (size_t i = 0; i < gradients.size(); ++i) {
    const DeviceGradient& tensor = gradients[i];
    const std::string which = "device gradient " + std::to_string(i);
    if (!IsKnown(tensor.type))
      return which + " has an unknown DataType " + std::to_string(static_cast<int>(tensor.type));
    if (tensor.count == 0) continue;
    const size_t elementBytes = ElementBytes(tensor.type);
    if (std::string problem =
            MemoryProblem(which, tensor.data, tensor.count * elementBytes, elementBytes, current, false);
        !problem.empty())
      return problem;
  }
  return "";
}

}  // namespace gradagg
