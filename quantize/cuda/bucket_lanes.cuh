// Device helpers shared by the quantizer kernels: one warp per bucket, each lane owning the 4-element groups
// lane, lane + 32, lane + 64, ... of the bucket (canonical_sum.h), and the warp form of the canonical sum.
#pragma once

#include <cstdint>

#include "common/cuda/element_convert.cuh"

namespace gradagg::cuda_detail {

constexpr int kWarpSize = 32;
constexpr int kBlockThreads = 256;  // 8 warps: 8 buckets per block
constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kGroup = 4;                         // elements per lane group
constexpr int kGroupStride = kWarpSize * kGroup;  // 128: a warp's sweep over the bucket

// A lane's group at bucket offset `base`: how many of its 4 elements exist, and whether one 4-wide access may
// read or write them all (`vector`: the arrays are aligned for it, checked by the host). `whole` is its own
// comparison on purpose: CUDA 13.0's ptxas fused `valid == 4` with the min/max that computes `valid` into one
// VIMNMX whose predicate took the vector path for partial groups (seen on an H100 under compute-sanitizer).
struct Group {
  int valid;
  bool wide;
};

__device__ inline Group GroupAt(int base, int length, bool vector) {
  return {max(0, min(kGroup, length - base)), vector && base + kGroup <= length};
}

// Loads elements p[0 .. group.valid) as float; the rest of `out` becomes 0.
template <typename T>
__device__ inline void LoadGroup(const T* __restrict__ p, Group group, float (&out)[kGroup]) {
  if (group.wide) {
    if constexpr (sizeof(T) == 4) {
      const float4 q = *reinterpret_cast<const float4*>(p);
      out[0] = q.x;
      out[1] = q.y;
      out[2] = q.z;
      out[3] = q.w;
    } else {
      const uint2 q = *reinterpret_cast<const uint2*>(p);
      const T* halves = reinterpret_cast<const T*>(&q);
#pragma unroll
      for (int c = 0; c < kGroup; ++c) out[c] = ToFloat(halves[c]);
    }
    return;
  }
#pragma unroll
  for (int c = 0; c < kGroup; ++c) out[c] = c < group.valid ? ToFloat(p[c]) : 0.0f;
}

// How StoreGroup writes a whole group. kPlain: an assignment, which nvcc (CUDA 13.0) merged with the element-wise
// branch into four 4-byte stores; they are cheap into this GPU's memory, but a warp's 4-byte stores 16 bytes apart
// cross NVLink as partial writes (decoding into a peer's copy ran at 228-262 GB/s). kVector: one 16-byte store through
// an intrinsic, the copy kernel's 360 GB/s (bench/results/gpu_aggregation/decode_copies_4xh100/). Stores into this
// GPU's memory keep kPlain: with the intrinsic the 1-bit encoder spilled at the 48 registers five blocks per SM allow
// (ptxas, decode_copies_4xh100/ptxas_encoder.txt).
enum class WideStore { kPlain, kVector };

// Stores values[0 .. group.valid) to p, converted to T.
template <typename T, WideStore kWide = WideStore::kPlain>
__device__ inline void StoreGroup(T* __restrict__ p, Group group, const float (&values)[kGroup]) {
  if (group.wide) {
    if constexpr (sizeof(T) == 4) {
      const float4 q = make_float4(values[0], values[1], values[2], values[3]);
      if constexpr (kWide == WideStore::kVector) {
        __stcg(reinterpret_cast<float4*>(p), q);
      } else {
        *reinterpret_cast<float4*>(p) = q;
      }
    } else {
      uint2 q;
      T* halves = reinterpret_cast<T*>(&q);
#pragma unroll
      for (int c = 0; c < kGroup; ++c) halves[c] = FromFloat<T>(values[c]);
      if constexpr (kWide == WideStore::kVector) {
        __stcg(reinterpret_cast<uint2*>(p), q);
      } else {
        *reinterpret_cast<uint2*>(p) = q;
      }
    }
    return;
  }
#pragma unroll
  for (int c = 0; c < kGroup; ++c) {
    if (c < group.valid) p[c] = FromFloat<T>(values[c]);
  }
}

// The butterfly of the canonical sum: after it every lane holds lane 0's value of the CPU tree (a + b == b + a).
__device__ inline float WarpCanonicalSum(float laneSum) {
#pragma unroll
  for (int step = kWarpSize / 2; step > 0; step /= 2) {
    laneSum = __fadd_rn(laneSum, __shfl_xor_sync(kFullMask, laneSum, step));
  }
  return laneSum;
}

}  // namespace gradagg::cuda_detail
