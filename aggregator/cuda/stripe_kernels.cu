#include "aggregator/cuda/stripe_kernels.h"
#include "common/cuda/cuda_error.h"
#include "common/cuda/grid_stride.h"

namespace gradagg {
namespace {

using cuda_detail::GridStrideBlocks;
constexpr int kThreads = cuda_detail::kGridStrideThreads;

__global__ void AddIntoKernel(float* sum, const float* values, size_t count) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < count; i += size_t{gridDim.x} * blockDim.x)
    sum[i] = __fadd_rn(sum[i], values[i]);
}

__global__ void FoldResidualKernel(float* values, float* residual, size_t count) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < count; i += size_t{gridDim.x} * blockDim.x) {
    values[i] = __fadd_rn(values[i], residual[i]);
    residual[i] = 0.0f;
  }
}

}  // namespace

void AddInto(float* sum, const float* values, size_t count, cudaStream_t stream) {
  if (count == 0) return;
  AddIntoKernel<<<GridStrideBlocks(count), kThreads, 0, stream>>>(sum, values, count);
  GRADAGG_CUDA_CHECK_LAUNCH("AddIntoKernel");
}

void FoldResidual(float* values, float* residual, size_t count, cudaStream_t stream) {
  if (count == 0) return;
  FoldResidualKernel<<<GridStrideBlocks(count), kThreads, 0, stream>>>(values, residual, count);
  GRADAGG_CUDA_CHECK_LAUNCH("FoldResidualKernel");
}

}  // namespace gradagg
