#include "aggregator/cuda/stripe_kernels.h"
#include "ground/cuda/cuda_error.h"

namespace gradagg {
namespace {

constexpr int kThreads = 256;
constexpr unsigned kMaxBlocks = 8192;  // grid-stride beyond this

unsigned BlocksFor(size_t count) {
  const size_t blocks = (count + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < kMaxBlocks ? blocks : kMaxBlocks);
}

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
  AddIntoKernel<<<BlocksFor(count), kThreads, 0, stream>>>(sum, values, count);
  GRADAGG_CUDA_CHECK_LAUNCH("AddIntoKernel");
}

void FoldResidual(float* values, float* residual, size_t count, cudaStream_t stream) {
  if (count == 0) return;
  FoldResidualKernel<<<BlocksFor(count), kThreads, 0, stream>>>(values, residual, count);
  GRADAGG_CUDA_CHECK_LAUNCH("FoldResidualKernel");
}

}  // namespace gradagg
