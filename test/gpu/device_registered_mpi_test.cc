// RegisterDeviceBuffer under mpirun, one rank per GPU, on the layout the run asks for: a single float32 tensor in a
// registered buffer is reduced in place (LastStats().inPlace) with bitwise the results of the copying path (the
// serial simulation); ranks whose tensors do not lie alike fall back to copies, with the same results; bad
// registrations throw on every rank. Skips itself (on every rank alike) without one GPU per rank.
#include <cuda_runtime_api.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "test/gpu/device_aggregation_fixture.h"

namespace gradagg::test {
namespace {

// Larger than every path that takes any buffer (the one-shot: at most 2 MiB; the line two-shot: at most 4 MiB; this is
// 4 MiB and 4 KiB), so peers must reach the tensor itself.
constexpr size_t kLarge = (size_t{1} << 20) + 1024;

class RegisteredBuffer : public DeviceAggregation {
 protected:
  // Whether a large call on a tensor that is not registered alike still runs in place: only without peers, or on a
  // node of several NVLink groups (GRADAGG_NVLINK_GROUP_SIZE below the ranks per node), which copies into buffers
  // of its own.
  static bool InPlaceUnregistered(const Aggregator& aggregator) {
    const char* size = std::getenv("GRADAGG_NVLINK_GROUP_SIZE");
    const int forced = size != nullptr ? std::atoi(size) : 0;
    return aggregator.ranksPerNode() == 1 || (forced > 0 && forced < aggregator.ranksPerNode());
  }
  // Whether a large call runs in place when only the last rank's tensor lies elsewhere: the node decides, so the
  // other nodes (ranks are laid out node by node) still run in place.
  static bool InPlaceUnlessOnTheLastRanksNode(const Aggregator& aggregator) {
    const int perNode = aggregator.ranksPerNode();
    return InPlaceUnregistered(aggregator) || WorldRank() / perNode != (WorldSize() - 1) / perNode;
  }

  // One call on `count` floats at `tensor`, checked against the oracle; returns whether it ran in place.
  bool ExpectCallMatches(Aggregator& aggregator, SerialSimulation& oracle, float* tensor, size_t count, uint32_t seed,
                         const std::string& what) {
    const std::vector<float> input = RandomGradient(count, seed, WorldRank());
    EXPECT_EQ(cudaMemcpy(tensor, input.data(), count * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
    aggregator.AggregateGradients({{tensor, count, DataType::kFloat32}}, stream_);
    std::vector<float> result(count);
    EXPECT_EQ(cudaMemcpy(result.data(), tensor, count * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
    EXPECT_TRUE(SameBits(result, oracle.Run(AllInputs(count, seed)))) << what << ": differs from the simulation";
    EXPECT_TRUE(IdenticalOnAllRanks(result)) << what << ": ranks differ";
    return aggregator.LastStats().inPlace;
  }
};

TEST_F(RegisteredBuffer, ATensorInARegisteredBufferIsReducedInPlaceWithTheSameBits) {
  for (int bits : {1, 32}) {
    const AggregatorOptions options = Options(bits);
    Aggregator aggregator(MPI_COMM_WORLD, options);
    SerialSimulation oracle = Oracle(options);
    DeviceBuffer buffer((2 * kLarge + 64) * sizeof(float));
    aggregator.RegisterDeviceBuffer(buffer.get(), buffer.bytes());
    // Residuals carry from call to call, through sizes and offsets alike on every rank.
    uint32_t seed = 10 * static_cast<uint32_t>(bits);
    for (size_t offset : {size_t{0}, size_t{64}}) {
      for (size_t count : {size_t{1}, size_t{100003}, kLarge, 2 * kLarge}) {
        const std::string what =
            "bits " + std::to_string(bits) + " offset " + std::to_string(offset) + " count " + std::to_string(count);
        EXPECT_TRUE(ExpectCallMatches(aggregator, oracle, buffer.as<float>() + offset, count, ++seed, what)) << what;
      }
    }
    aggregator.DeregisterDeviceBuffer(buffer.get());
    // Deregistered, the same buffer is copied again (where peers would have to reach it), with the same bits.
    EXPECT_EQ(ExpectCallMatches(aggregator, oracle, buffer.as<float>(), kLarge, ++seed, "deregistered"),
              InPlaceUnregistered(aggregator));
  }
}

TEST_F(RegisteredBuffer, TensorsThatDoNotLieAlikeAreCopiedWithTheSameBits) {
  const AggregatorOptions options = Options(1);
  Aggregator aggregator(MPI_COMM_WORLD, options);
  SerialSimulation oracle = Oracle(options);
  DeviceBuffer buffer((kLarge + 64) * sizeof(float));
  DeviceBuffer other(kLarge * sizeof(float));
  aggregator.RegisterDeviceBuffer(buffer.get(), buffer.bytes());
  const bool last = WorldRank() == WorldSize() - 1;
  // The last rank's tensor at another offset of the registration; then in memory that is not registered.
  float* shifted = buffer.as<float>() + (last ? 64 : 0);
  EXPECT_EQ(ExpectCallMatches(aggregator, oracle, shifted, kLarge, 1, "another offset"),
            InPlaceUnlessOnTheLastRanksNode(aggregator));
  float* elsewhere = last ? other.as<float>() : buffer.as<float>();
  EXPECT_EQ(ExpectCallMatches(aggregator, oracle, elsewhere, kLarge, 2, "unregistered on one rank"),
            InPlaceUnlessOnTheLastRanksNode(aggregator));
  // Several tensors are always copied: they are gathered into one buffer.
  const std::vector<float> input = RandomGradient(kLarge, 3, WorldRank());
  ASSERT_EQ(cudaMemcpy(buffer.get(), input.data(), kLarge * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
  aggregator.AggregateGradients({{buffer.get(), kLarge / 2, DataType::kFloat32},
                                 {buffer.as<float>() + kLarge / 2, kLarge / 2, DataType::kFloat32}},
                                stream_);
  EXPECT_FALSE(aggregator.LastStats().inPlace);
  EXPECT_TRUE(SameBits(buffer.ToHost<float>(kLarge), oracle.Run(AllInputs(kLarge, 3), {}, {kLarge / 2, kLarge / 2})));
  aggregator.DeregisterDeviceBuffer(buffer.get());
}

TEST_F(RegisteredBuffer, BadRegistrationsThrowOnEveryRankNamingTheReporter) {
  Aggregator aggregator(MPI_COMM_WORLD, Options(1));
  DeviceBuffer buffer(4096);
  std::vector<float> host(1024);
  const bool culprit = WorldRank() == WorldSize() - 1;
  const std::string reporter = "rank " + std::to_string(WorldSize() - 1);
  auto expectUsageError = [&](auto call, const std::string& words) {
    try {
      call();
      ADD_FAILURE() << "no error for: " << words;
    } catch (const UsageError& error) {
      const std::string text = error.what();
      EXPECT_NE(text.find(words), std::string::npos) << text;
      EXPECT_NE(text.find(reporter), std::string::npos) << text;
    }
  };
  expectUsageError([&] { aggregator.RegisterDeviceBuffer(culprit ? host.data() : buffer.get(), 4096); },
                   "is not device memory from cudaMalloc");
  expectUsageError([&] { aggregator.RegisterDeviceBuffer(buffer.get(), culprit ? 4097 : 4096); }, "past the end");
  expectUsageError([&] { aggregator.RegisterDeviceBuffer(buffer.get(), culprit ? 0 : 4096); }, "0 bytes");
  aggregator.RegisterDeviceBuffer(buffer.get(), 4096);
  expectUsageError([&] { aggregator.DeregisterDeviceBuffer(culprit ? host.data() : buffer.get()); },
                   "was never registered");
  DeviceBuffer plain(4096);
  expectUsageError([&] { aggregator.RegisterDeviceBuffer(culprit ? buffer.get() : plain.get(), 4096); },
                   "registered already");
  // Memory from a stream-ordered pool cannot be shared through CUDA IPC: refused, not a hang.
  void* pooled = nullptr;
  ASSERT_EQ(cudaMallocAsync(&pooled, 4096, stream_), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  expectUsageError([&] { aggregator.RegisterDeviceBuffer(culprit ? pooled : plain.get(), 4096); },
                   "CUDA IPC cannot share it");
  ASSERT_EQ(cudaFreeAsync(pooled, stream_), cudaSuccess);
  // After all that, registration and calls still work.
  SerialSimulation oracle = Oracle(Options(1));
  EXPECT_TRUE(ExpectCallMatches(aggregator, oracle, buffer.as<float>(), 1024, 4, "after errors"));
  aggregator.DeregisterDeviceBuffer(buffer.get());
}

}  // namespace
}  // namespace gradagg::test
