// The checks of the GPU path's inputs, run by every rank on its own arguments before they are agreed on (each
// returns "" or what is wrong, for AgreeOnProblem), and the small conversions they share with the path.
#pragma once

#include <cstddef>
#include <string>

#include "gradagg/device_gradient.h"
#include "common/element_type.h"

namespace gradagg {

std::string Hex(const void* pointer);

// The calling thread's GPU, which must be `device` where that is known (>= 0).
std::string CurrentGpuProblem(int device, int& current);

// `bytes` bytes at `data` ("which" names them) as memory of GPU `current`: not device memory (managed memory
// passes unless `forPeers`, which also needs memory CUDA IPC can export), misaligned, or running past the end of
// its allocation.
std::string MemoryProblem(const std::string& which, const void* data, size_t bytes, size_t alignment, int current,
                          bool forPeers);

}  // namespace gradagg
