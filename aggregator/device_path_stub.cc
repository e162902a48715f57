// The device path of a build without CUDA: every device call is refused, the same way on every rank.
#include "aggregator/device_path.h"

namespace gradagg {

std::string DeviceGradientProblem(const std::vector<DeviceGradient>&, int) {
  return "this gradagg was built without CUDA, so it cannot aggregate device gradients (rebuild where nvcc is found)";
}

std::unique_ptr<DevicePath> MakeDevicePath(const NodeTopology&, const AggregatorOptions&) {
  throw UsageError("this gradagg was built without CUDA, so it cannot aggregate device gradients");
}

}  // namespace gradagg
