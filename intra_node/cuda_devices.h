// What CUDA sees at run time. Built from a .cu file when gradagg is built with CUDA; elsewhere a stub says so.
#pragma once

#include <string>

namespace gradagg {

// Whether this build of gradagg contains CUDA code.
bool BuiltWithCuda();

// How many GPUs this process sees (0 without CUDA, a driver or a GPU).
int CudaDeviceCount();

// One line per visible GPU ("GPU 0: NVIDIA H200, cc 9.0, 139 GiB"), or why there is none.
std::string DescribeCudaDevices();

}  // namespace gradagg
