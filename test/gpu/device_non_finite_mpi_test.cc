// The non-finite scenario (test/mpi/non_finite_scenario.h) on GPUs: device tensors, the CUDA quantizer, the NVLink
// phases and the run's transport, checked against the serial simulation (the CPU quantizer), so the CPU and CUDA
// paths agree bit for bit on non-finite buckets too. Skips itself without one GPU per rank.
#include <memory>
#include <vector>

#include "test/gpu/device_aggregation_fixture.h"
#include "test/mpi/non_finite_scenario.h"

namespace gradagg {
namespace {

using test::DeviceAggregation;
using test::NonFiniteScenario;
using test::WorldRank;

TEST_F(DeviceAggregation, NonFiniteInputPoisonsOneStepsBucketOnlyAtEveryBitWidth) {
  for (int bits : {1, 2, 4, 8, 32}) {
    const AggregatorOptions options = Options(bits);
    const bool quantized = Aggregator(MPI_COMM_WORLD, options).nodeCount() > 1 && bits != 32;
    cudaStream_t stream = stream_;
    NonFiniteScenario::Expect(options, quantized, [stream](const AggregatorOptions& callOptions) {
      auto aggregator = std::make_shared<Aggregator>(MPI_COMM_WORLD, callOptions);
      return [aggregator, stream](const std::vector<std::vector<float>>& inputs) {
        const std::vector<float>& mine = inputs[static_cast<size_t>(WorldRank())];
        DeviceBuffer gradient = DeviceBuffer::From(mine);
        std::vector<DeviceGradient> tensors;
        size_t offset = 0;
        for (size_t length : NonFiniteScenario::Tensors()) {
          tensors.push_back({gradient.as<float>() + offset, length, DataType::kFloat32});
          offset += length;
        }
        aggregator->AggregateGradients(tensors, stream);
        return NonFiniteScenario::Outcome{gradient.ToHost<float>(mine.size()),
                                          aggregator->LastStats().nonFiniteBuckets};
      };
    });
    if (HasFatalFailure()) return;
  }
}

}  // namespace
}  // namespace gradagg
