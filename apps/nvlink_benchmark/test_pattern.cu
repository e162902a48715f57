#include "apps/nvlink_benchmark/test_pattern.h"
#include "common/cuda/cuda_error.h"
#include "common/cuda/element_convert.cuh"

namespace gradagg {
namespace {

using cuda_detail::FromFloat;
using cuda_detail::ToFloat;
using cuda_detail::WithElementType;

__device__ float PatternValue(size_t i, int rank, uint32_t seed) {
  uint32_t h = static_cast<uint32_t>(i) * 2654435761u ^ (static_cast<uint32_t>(i >> 32) + seed) * 2246822519u;
  h ^= h >> 15;
  h = h * 2246822519u + static_cast<uint32_t>(rank) * 3266489917u;
  h ^= h >> 13;
  return static_cast<float>(static_cast<int>(h % 17u) - 8) * 0.25f;  // -2 .. 2 in steps of 1/4
}

template <typename T>
__global__ void FillKernel(T* buffer, size_t count, int rank, uint32_t seed) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<size_t>(gridDim.x) * blockDim.x)
    buffer[i] = FromFloat<T>(PatternValue(i, rank, seed));
}

template <typename T>
__global__ void CountWrongKernel(const T* result, size_t count, int ranks, uint32_t seed, unsigned long long* wrong) {
  unsigned long long mine = 0;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    float expected = 0.0f;
    for (int r = 0; r < ranks; ++r) expected += PatternValue(i, r, seed);
    if (!(ToFloat(result[i]) == expected)) ++mine;
  }
  if (mine != 0) atomicAdd(wrong, mine);
}

constexpr int kBlocks = 1024, kThreads = 256;

}  // namespace

void FillPattern(void* buffer, size_t count, ElementType type, int rank, uint32_t seed, cudaStream_t stream) {
  WithElementType(type, [&](auto element) {
    using T = decltype(element);
    FillKernel<T><<<kBlocks, kThreads, 0, stream>>>(static_cast<T*>(buffer), count, rank, seed);
    GRADAGG_CUDA_CHECK_LAUNCH("FillKernel");
  });
}

size_t CountWrong(const void* result, size_t count, ElementType type, int ranks, uint32_t seed, cudaStream_t stream) {
  unsigned long long* wrong = nullptr;
  GRADAGG_CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&wrong), sizeof(*wrong), stream));
  GRADAGG_CUDA_CHECK(cudaMemsetAsync(wrong, 0, sizeof(*wrong), stream));
  WithElementType(type, [&](auto element) {
    using T = decltype(element);
    CountWrongKernel<T><<<kBlocks, kThreads, 0, stream>>>(static_cast<const T*>(result), count, ranks, seed, wrong);
    GRADAGG_CUDA_CHECK_LAUNCH("CountWrongKernel");
  });
  unsigned long long host = 0;
  GRADAGG_CUDA_CHECK(cudaMemcpyAsync(&host, wrong, sizeof(host), cudaMemcpyDeviceToHost, stream));
  GRADAGG_CUDA_CHECK(cudaFreeAsync(wrong, stream));
  GRADAGG_CUDA_CHECK(cudaStreamSynchronize(stream));
  return static_cast<size_t>(host);
}

}  // namespace gradagg
