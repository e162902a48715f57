// 16-byte vectors of gradient elements, summed in float32 in a fixed order: the first term assigned, each further
// term added with one rounding (__fadd_rn), exactly as the serial simulation does on the host.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/cuda/element_convert.cuh"

namespace gradagg::nvlink::device {

using cuda_detail::FromFloat;
using cuda_detail::ToFloat;

template <typename T>
struct Vector {
  static constexpr int kElements = 16 / static_cast<int>(sizeof(T));
  uint4 bits;
};

// Loads that bypass L1: the data was written by another GPU (or arrives over NVLink) during this kernel.
template <typename T>
__device__ inline uint4 LoadVector(const T* p) {
  return __ldcg(reinterpret_cast<const uint4*>(p));
}
// Through an intrinsic: as a plain assignment of a uint4 made from summed elements, NVVM (CUDA 13.0) emitted four
// 4-byte stores (the two-shot's stores to every rank had no vector store at all). The same split cost the quantizer's
// decode into a peer's memory a third of its speed; the two-shot measured the same either way (4 H200s, 2-4 MiB).
template <typename T>
__device__ inline void StoreVector(T* p, uint4 v) {
  __stcg(reinterpret_cast<uint4*>(p), v);
}
template <typename T>
__device__ inline T LoadScalar(const T* p) {
  return *static_cast<const volatile T*>(p);
}

// acc = v (first) or acc = acc + v (the others), element by element.
template <typename T>
__device__ inline void Accumulate(float (&acc)[Vector<T>::kElements], uint4 v, bool first) {
  const T* e = reinterpret_cast<const T*>(&v);
#pragma unroll
  for (int k = 0; k < Vector<T>::kElements; ++k) acc[k] = first ? ToFloat(e[k]) : __fadd_rn(acc[k], ToFloat(e[k]));
}

template <typename T>
__device__ inline uint4 Round(const float (&acc)[Vector<T>::kElements]) {
  uint4 v;
  T* e = reinterpret_cast<T*>(&v);
#pragma unroll
  for (int k = 0; k < Vector<T>::kElements; ++k) e[k] = FromFloat<T>(acc[k]);
  return v;
}

__host__ __device__ inline size_t DivUp(size_t a, size_t b) { return (a + b - 1) / b; }

// Block `block` of `blocks` takes [begin, end) of [0, count), cut at multiples of `granule` elements, so every rank
// splits the same range the same way.
struct BlockRange {
  size_t begin;
  size_t end;
};
__device__ inline BlockRange RangeOfBlock(size_t count, size_t granule) {
  const size_t perBlock = DivUp(DivUp(count, gridDim.x), granule) * granule;
  const size_t begin = min(count, static_cast<size_t>(blockIdx.x) * perBlock);
  return {begin, min(count, begin + perBlock)};
}

}  // namespace gradagg::nvlink::device
