#include <cuda.h>

#include <cstring>

#include "common/cuda/cuda_error.h"
#include "intra_node/cuda/ipc_memory.h"

namespace gradagg::nvlink {
namespace {

// Driver functions through the runtime's entry-point query, so nothing links libcuda (CI has no driver).
template <typename Function>
Function DriverFunction(const char* name) {
  void* function = nullptr;
  cudaDriverEntryPointQueryResult found{};
  GRADAGG_CUDA_CHECK(cudaGetDriverEntryPointByVersion(name, &function, 12000, cudaEnableDefault, &found));
  if (found != cudaDriverEntryPointSuccess || function == nullptr)
    throw CudaError(std::string("looking up driver function ") + name, cudaErrorSymbolNotFound, __FILE__, __LINE__);
  return reinterpret_cast<Function>(function);
}

void CheckDriver(CUresult result, const char* what) {
  if (result != CUDA_SUCCESS)
    throw CudaError(std::string(what) + " (driver error " + std::to_string(static_cast<int>(result)) + ")",
                    cudaErrorInvalidValue, __FILE__, __LINE__);
}

}  // namespace

AllocationIdentity IdentifyAllocation(const void* pointer) {
  using GetAddressRange = CUresult (*)(CUdeviceptr*, size_t*, CUdeviceptr);
  using GetAttribute = CUresult (*)(void*, CUpointer_attribute, CUdeviceptr);
  static const auto getAddressRange = DriverFunction<GetAddressRange>("cuMemGetAddressRange");
  static const auto getAttribute = DriverFunction<GetAttribute>("cuPointerGetAttribute");
  const auto address = reinterpret_cast<CUdeviceptr>(pointer);
  CUdeviceptr base = 0;
  AllocationIdentity identity;
  CheckDriver(getAddressRange(&base, &identity.bytes, address), "cuMemGetAddressRange: not a device allocation");
  CheckDriver(getAttribute(&identity.bufferId, CU_POINTER_ATTRIBUTE_BUFFER_ID, address),
              "cuPointerGetAttribute(BUFFER_ID)");
  identity.base = static_cast<uintptr_t>(base);
  return identity;
}

ExportedBuffer ExportBuffer(void* buffer, size_t bytes) {
  const AllocationIdentity allocation = IdentifyAllocation(buffer);
  ExportedBuffer exported{};
  GRADAGG_CUDA_CHECK(cudaIpcGetMemHandle(&exported.handle, reinterpret_cast<void*>(allocation.base)));
  exported.offset = reinterpret_cast<uintptr_t>(buffer) - allocation.base;
  exported.bytes = bytes;
  exported.bufferId = allocation.bufferId;
  return exported;
}

PeerMappings::Key PeerMappings::KeyOf(int peer, const ExportedBuffer& exported) {
  std::string bytes(exported.handle.reserved, sizeof(exported.handle.reserved));
  bytes.append(reinterpret_cast<const char*>(&exported.bufferId), sizeof(exported.bufferId));
  return {peer, bytes};
}

void* PeerMappings::Acquire(int peer, const ExportedBuffer& exported) {
  Mapping& mapping = open_[KeyOf(peer, exported)];
  if (mapping.users == 0) {
    void* base = nullptr;
    const cudaError_t status = cudaIpcOpenMemHandle(&base, exported.handle, cudaIpcMemLazyEnablePeerAccess);
    if (status != cudaSuccess) {
      open_.erase(KeyOf(peer, exported));
      throw CudaError("cudaIpcOpenMemHandle of local rank " + std::to_string(peer) + "'s buffer", status, __FILE__,
                      __LINE__);
    }
    mapping.base = base;
  }
  ++mapping.users;
  return static_cast<char*>(mapping.base) + exported.offset;
}

void PeerMappings::Release(int peer, const ExportedBuffer& exported) {
  const auto found = open_.find(KeyOf(peer, exported));
  if (found == open_.end()) return;
  if (--found->second.users == 0) {
    const void* base = found->second.base;
    open_.erase(found);
    GRADAGG_CUDA_CHECK(cudaIpcCloseMemHandle(const_cast<void*>(base)));
  }
}

PeerMappings::~PeerMappings() {
  for (auto& [key, mapping] : open_) cudaIpcCloseMemHandle(mapping.base);
}

}  // namespace gradagg::nvlink
