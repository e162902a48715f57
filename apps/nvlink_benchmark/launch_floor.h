// The floor under any one-kernel collective in the benchmark's timing loop: an empty kernel, launched and timed the
// same way, costs the host's launch and the GPU's start of a kernel and nothing else.
#pragma once

#include <cuda_runtime_api.h>

namespace gradagg {

// Launches a kernel of one block of 32 threads that does nothing.
void LaunchEmptyKernel(cudaStream_t stream);

}  // namespace gradagg
