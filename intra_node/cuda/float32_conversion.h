// Gradients to and from the float32 that every phase sums in, on the device. Stream-ordered; all pointers device
// memory; any count. Used by the multi-group node (intra_node/group_chain.h) and by the GPU aggregation path.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "common/element_type.h"

namespace gradagg {

// out[i] = float(tensor[i]), exact for every type.
void ConvertToFloat32(const void* tensor, ElementType type, size_t count, float* out, cudaStream_t stream);

// tensor[i] = values[i] rounded to `type` (nearest even).
void ConvertFromFloat32(const float* values, size_t count, void* tensor, ElementType type, cudaStream_t stream);

}  // namespace gradagg
