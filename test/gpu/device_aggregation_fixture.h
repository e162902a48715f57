// The fixture of the AggregateGradients tests on GPUs: the layout and transport the run asks for
// (GRADAGG_TEST_RANKS_PER_NODE, GRADAGG_CUDA_AWARE_MPI), the serial simulation of it, and one checked call.
#pragma once

#include <string>
#include <vector>

#include "gradagg/aggregator.h"
#include "common/cuda/device_memory.h"
#include "test/gpu/one_gpu_per_rank.h"
#include "test/mpi/oracle_support.h"

namespace gradagg::test {

class DeviceAggregation : public OneGpuPerRank {
 protected:
  // The layout and transport of this run, from the environment, with `bits`.
  static AggregatorOptions Options(int bits) {
    AggregatorOptions options = ApplyEnvironment(AggregatorOptions());
    options.bits = bits;
    options.ranksPerNode = TestRanksPerNode();
    return options;
  }

  // One float32 call with device memory on every rank, checked against the oracle; returns the result.
  std::vector<float> ExpectMatchesOracle(Aggregator& aggregator, SerialSimulation& oracle, size_t count, uint32_t seed,
                                         const std::string& what) {
    const std::vector<float> input = RandomGradient(count, seed, WorldRank());
    DeviceBuffer gradient = DeviceBuffer::From(input);
    aggregator.AggregateGradients({{gradient.get(), count, DataType::kFloat32}}, stream_);
    const std::vector<float> result = gradient.ToHost<float>(count);
    const std::vector<float> expected = oracle.Run(AllInputs(count, seed));
    EXPECT_TRUE(SameBits(result, expected)) << what << ": differs from the serial simulation";
    EXPECT_TRUE(IdenticalOnAllRanks(result)) << what << ": ranks differ";
    return result;
  }
};

}  // namespace gradagg::test
