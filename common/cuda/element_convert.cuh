// Device conversions between the gradient element types and the float32 they are summed in, and the one place
// a run-time ElementType becomes a C++ type.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "common/element_type.h"

namespace gradagg::cuda_detail {

__device__ inline float ToFloat(float x) { return x; }
__device__ inline float ToFloat(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ inline float ToFloat(__half x) { return __half2float(x); }

template <typename T>
__device__ inline T FromFloat(float x);
template <>
__device__ inline float FromFloat<float>(float x) {
  return x;
}
template <>
__device__ inline __nv_bfloat16 FromFloat<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}
template <>
__device__ inline __half FromFloat<__half>(float x) {
  return __float2half_rn(x);
}

// Calls use(T{}) with T the C++ type of `type`: float, __nv_bfloat16 or __half.
template <typename Use>
void WithElementType(ElementType type, Use use) {
  switch (type) {
    case ElementType::kBFloat16:
      use(__nv_bfloat16{});
      return;
    case ElementType::kFloat16:
      use(__half{});
      return;
    case ElementType::kFloat32:
      use(float{});
      return;
  }
}

}  // namespace gradagg::cuda_detail
