#include "common/cuda/cuda_error.h"
#include "common/cuda/element_convert.cuh"
#include "common/cuda/grid_stride.h"
#include "intra_node/cuda/float32_conversion.h"

namespace gradagg {
namespace {

using cuda_detail::FromFloat;
using cuda_detail::GridStrideBlocks;
using cuda_detail::ToFloat;
using cuda_detail::WithElementType;

constexpr int kThreads = cuda_detail::kGridStrideThreads;

template <typename T>
__global__ void ToFloatKernel(const T* in, size_t count, float* out) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < count; i += size_t{gridDim.x} * blockDim.x)
    out[i] = ToFloat(in[i]);
}

template <typename T>
__global__ void FromFloatKernel(const float* in, size_t count, T* out) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < count; i += size_t{gridDim.x} * blockDim.x)
    out[i] = FromFloat<T>(in[i]);
}

}  // namespace

void ConvertToFloat32(const void* tensor, ElementType type, size_t count, float* out, cudaStream_t stream) {
  if (count == 0) return;
  if (type == ElementType::kFloat32) {
    GRADAGG_CUDA_CHECK(cudaMemcpyAsync(out, tensor, count * sizeof(float), cudaMemcpyDeviceToDevice, stream));
    return;
  }
  WithElementType(type, [&](auto zero) {
    using T = decltype(zero);
    ToFloatKernel<<<GridStrideBlocks(count), kThreads, 0, stream>>>(static_cast<const T*>(tensor), count, out);
  });
  GRADAGG_CUDA_CHECK_LAUNCH("ToFloatKernel");
}

void ConvertFromFloat32(const float* values, size_t count, void* tensor, ElementType type, cudaStream_t stream) {
  if (count == 0) return;
  if (type == ElementType::kFloat32) {
    GRADAGG_CUDA_CHECK(cudaMemcpyAsync(tensor, values, count * sizeof(float), cudaMemcpyDeviceToDevice, stream));
    return;
  }
  WithElementType(type, [&](auto zero) {
    using T = decltype(zero);
    FromFloatKernel<<<GridStrideBlocks(count), kThreads, 0, stream>>>(values, count, static_cast<T*>(tensor));
  });
  GRADAGG_CUDA_CHECK_LAUNCH("FromFloatKernel");
}

}  // namespace gradagg
