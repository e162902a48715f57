// gradagg built without CUDA.
#include "nvlink/cuda_devices.h"

namespace gradagg {

bool BuiltWithCuda() { return false; }

std::string DescribeCudaDevices() { return "gradagg was built without CUDA\n"; }

}  // namespace gradagg
