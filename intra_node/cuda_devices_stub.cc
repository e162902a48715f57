// gradagg built without CUDA.
#include "intra_node/cuda_devices.h"

namespace gradagg {

bool BuiltWithCuda() { return false; }

int CudaDeviceCount() { return 0; }

std::string DescribeCudaDevices() { return "gradagg was built without CUDA\n"; }

}  // namespace gradagg
