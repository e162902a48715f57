// Inputs whose sums are exact in every element type and every summation order (multiples of 1/4, at most 2 in
// magnitude per rank), so the benchmark can check every element of every size on the device.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "common/element_type.h"

namespace gradagg {

// buffer[i] = rank's pattern value at i (seeded; never all zeros).
void FillPattern(void* buffer, size_t count, ElementType type, int rank, uint32_t seed, cudaStream_t stream);

// How many of result[0 .. count) differ from the sum of the patterns of ranks 0 .. ranks-1 (synchronises).
size_t CountWrong(const void* result, size_t count, ElementType type, int ranks, uint32_t seed, cudaStream_t stream);

}  // namespace gradagg
