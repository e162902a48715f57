#include <cuda_runtime_api.h>

#include "common/cuda/cuda_error.h"
#include "intra_node/cuda/peer_access.h"

namespace gradagg::nvlink {

std::string CurrentDevicePciBusId() {
  int device = 0;
  GRADAGG_CUDA_CHECK(cudaGetDevice(&device));
  char id[64] = {};
  GRADAGG_CUDA_CHECK(cudaDeviceGetPCIBusId(id, sizeof(id), device));
  return id;
}

namespace {

// For each GPU named by its PCI bus id, what `link(device, peer)` says of the current device and it: itself true, a
// GPU this process cannot see false.
template <typename Link>
std::vector<bool> RowOf(const std::vector<std::string>& pciBusIds, Link link) {
  int device = 0;
  GRADAGG_CUDA_CHECK(cudaGetDevice(&device));
  std::vector<bool> row;
  for (const std::string& id : pciBusIds) {
    int peer = -1;
    if (cudaDeviceGetByPCIBusId(&peer, id.c_str()) != cudaSuccess) {
      cudaGetLastError();  // not visible to this process: no direct access
      row.push_back(false);
      continue;
    }
    row.push_back(peer == device || link(device, peer));
  }
  return row;
}

}  // namespace

std::vector<bool> PeerAccessRow(const std::vector<std::string>& pciBusIds) {
  return RowOf(pciBusIds, [](int device, int peer) {
    int canAccess = 0;
    GRADAGG_CUDA_CHECK(cudaDeviceCanAccessPeer(&canAccess, device, peer));
    return canAccess != 0;
  });
}

std::vector<bool> NativeAtomicsRow(const std::vector<std::string>& pciBusIds) {
  return RowOf(pciBusIds, [](int device, int peer) {
    int atomics = 0;
    GRADAGG_CUDA_CHECK(cudaDeviceGetP2PAttribute(&atomics, cudaDevP2PAttrNativeAtomicSupported, device, peer));
    return atomics != 0;
  });
}

}  // namespace gradagg::nvlink
