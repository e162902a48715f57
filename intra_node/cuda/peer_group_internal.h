// What the peer group's files share (peer_group.cu, one_shot_launch.cu, two_shot_launch.cu, all_push_launch.cu,
// staged_allreduce.cu): the layout of a rank's scratch memory, call signatures, the device guard and the dispatch on
// the group size. Internal to intra_node/cuda.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "common/cuda/cuda_error.h"
#include "intra_node/cuda/control_block.h"

namespace gradagg::nvlink {

constexpr size_t RoundUp(size_t value, size_t to) { return (value + to - 1) / to * to; }

constexpr size_t kAlignment = 256;
constexpr size_t kControlBytes = RoundUp(sizeof(ControlBlock), kAlignment);  // where the inboxes start

inline bool Aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// What a call looks like, for the first barrier to compare across ranks.
inline uint64_t Mix(uint64_t hash, uint64_t value) {
  hash ^= value + 0x9e3779b97f4a7c15ull + (hash << 6) + (hash >> 2);
  return hash;
}

// Sets the group's device for the duration of a call and puts the caller's back.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    GRADAGG_CUDA_CHECK(cudaGetDevice(&previous_));
    if (previous_ != device) GRADAGG_CUDA_CHECK(cudaSetDevice(device));
  }
  ~DeviceGuard() { cudaSetDevice(previous_); }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = 0;
};

// Calls use(std::integral_constant<int, G>{}) with the group size as a kernel's compile-time rank count: 2, 4 or 8,
// else 0 (the kernels then read the rank count at run time).
template <typename Use>
void WithRankCount(int ranks, Use use) {
  switch (ranks) {
    case 2:
      use(std::integral_constant<int, 2>{});
      return;
    case 4:
      use(std::integral_constant<int, 4>{});
      return;
    case 8:
      use(std::integral_constant<int, 8>{});
      return;
    default:
      use(std::integral_constant<int, 0>{});
      return;
  }
}

}  // namespace gradagg::nvlink
