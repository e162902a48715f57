// Small element-wise kernels of the GPU path: gradients to and from the float32 flat buffer the phases work on, and
// the float32 additions of phase 2 that are not decodes. Stream-ordered; all pointers device memory; any count.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "ground/element_type.h"

namespace gradagg {

// out[i] = float(tensor[i]), exact for every type.
void ConvertToFloat32(const void* tensor, ElementType type, size_t count, float* out, cudaStream_t stream);

// tensor[i] = values[i] rounded to `type` (nearest even).
void ConvertFromFloat32(const float* values, size_t count, void* tensor, ElementType type, cudaStream_t stream);

// sum[i] = sum[i] + values[i], one float32 rounding.
void AddInto(float* sum, const float* values, size_t count, cudaStream_t stream);

// values[i] = values[i] + residual[i]; residual[i] = 0.
void FoldResidual(float* values, float* residual, size_t count, cudaStream_t stream);

}  // namespace gradagg
