// Device conversions between the gradient element types and the float32 they are summed in.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

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

}  // namespace gradagg::cuda_detail
