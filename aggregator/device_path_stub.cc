// The device path of a build without CUDA: every device call is refused, the same way on every rank.
#include "aggregator/device_handoff.h"
#include "aggregator/device_path.h"

namespace gradagg {
namespace {
const char kNoCuda[] = "this gradagg was built without CUDA, so it cannot aggregate device gradients";
}

std::string DeviceGradientProblem(const std::vector<DeviceGradient>&, int) {
  return std::string(kNoCuda) + " (rebuild where nvcc is found)";
}

std::unique_ptr<DevicePath> MakeDevicePath(const NodeTopology&, const AggregatorOptions&) { throw UsageError(kNoCuda); }

std::unique_ptr<DeviceHandoff> MakeDeviceHandoff() { throw UsageError(kNoCuda); }

}  // namespace gradagg
