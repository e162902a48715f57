// --device cuda in a build without CUDA: refused alike on every rank.
#include "apps/gradagg/device_size_run.h"

namespace gradagg::cli {

struct DeviceSizeRunner::State {};

DeviceSizeRunner::DeviceSizeRunner(Aggregator&, const NodeTopology&, const CliOptions&) {
  throw UsageError("--device cuda: this gradagg was built without CUDA; use --device cpu");
}
DeviceSizeRunner::~DeviceSizeRunner() = default;
std::string DeviceSizeRunner::Describe() const { return ""; }
SizeResult DeviceSizeRunner::Run(size_t) { return {}; }

}  // namespace gradagg::cli
