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

std::vector<bool> PeerAccessRow(const std::vector<std::string>& pciBusIds) {
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
    int canAccess = 0;
    if (peer != device) GRADAGG_CUDA_CHECK(cudaDeviceCanAccessPeer(&canAccess, device, peer));
    row.push_back(peer == device || canAccess != 0);
  }
  return row;
}

}  // namespace gradagg::nvlink
