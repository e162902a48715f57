// Small element-wise kernels of the GPU path: the float32 additions of phase 2 that are not decodes (the conversions
// to and from float32 are intra_node/cuda/float32_conversion.h). Stream-ordered; all pointers device memory; any count.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

namespace gradagg {

// sum[i] = sum[i] + values[i], one float32 rounding.
void AddInto(float* sum, const float* values, size_t count, cudaStream_t stream);

// values[i] = values[i] + residual[i]; residual[i] = 0.
void FoldResidual(float* values, float* residual, size_t count, cudaStream_t stream);

}  // namespace gradagg
