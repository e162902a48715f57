// CUDA IPC for the ranks of one node: what a rank publishes about one of its device buffers, and the mapping of a
// peer's buffer into this process, cached and reference-counted so one allocation is opened once however many
// registrations point into it. Host-only; no MPI.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <utility>

namespace gradagg::nvlink {

// Which allocation a device pointer lies in. bufferId is CUDA's unique id of the allocation: a buffer freed and
// allocated again at the same address gets a new one, which is how stale registrations are recognised.
struct AllocationIdentity {
  uintptr_t base = 0;
  size_t bytes = 0;
  uint64_t bufferId = 0;
};
AllocationIdentity IdentifyAllocation(const void* pointer);  // throws CudaError for a non-device pointer

// What a rank sends its peers about a buffer: a fixed-size record, exchanged as bytes.
struct ExportedBuffer {
  cudaIpcMemHandle_t handle;
  uint64_t offset;    // of the buffer in its allocation
  uint64_t bytes;     // of the buffer
  uint64_t bufferId;  // of the allocation: a handle is never confused with one of an earlier allocation
};
ExportedBuffer ExportBuffer(void* buffer, size_t bytes);

// The mappings this process holds of peers' allocations.
class PeerMappings {
 public:
  PeerMappings() = default;
  PeerMappings(const PeerMappings&) = delete;
  PeerMappings& operator=(const PeerMappings&) = delete;
  ~PeerMappings();  // closes whatever is still open; never throws

  // The peer's buffer, mapped here (opens its allocation on first use).
  void* Acquire(int peer, const ExportedBuffer& exported);
  // Gives back one Acquire of the same record; the allocation is closed with its last user.
  void Release(int peer, const ExportedBuffer& exported);

 private:
  using Key = std::pair<int, std::string>;  // peer, handle bytes and allocation id
  struct Mapping {
    void* base = nullptr;
    int users = 0;
  };
  static Key KeyOf(int peer, const ExportedBuffer& exported);
  std::map<Key, Mapping> open_;
};

}  // namespace gradagg::nvlink
