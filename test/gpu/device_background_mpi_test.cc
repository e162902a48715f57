// AggregateGradientsAsync and the double-buffered mode on GPUs under mpirun, one rank per GPU, on the layout and
// transport the run asks for: the background starts after the caller's queued work, and its results are bitwise
// the serial simulation's. Skips itself (on every rank alike) without one GPU per rank.
#include <cuda_runtime_api.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "test/gpu/device_aggregation_fixture.h"

namespace gradagg {
namespace {

using test::AllInputs;
using test::DeviceAggregation;
using test::IdenticalOnAllRanks;
using test::Oracle;
using test::RandomGradient;
using test::SameBits;
using test::WorldRank;
using test::WorldSize;

using DeviceBackground = DeviceAggregation;

// Work that keeps `stream` busy for a few milliseconds: copies between two large scratch buffers.
void QueueBusyWork(DeviceBuffer& a, DeviceBuffer& b, cudaStream_t stream) {
  for (int i = 0; i < 16; ++i)
    ASSERT_EQ(cudaMemcpyAsync(i % 2 ? a.get() : b.get(), i % 2 ? b.get() : a.get(), a.bytes(), cudaMemcpyDeviceToDevice,
                              stream),
              cudaSuccess);
}

TEST_F(DeviceBackground, AsyncStartsAfterTheCallersQueuedWorkAndMatchesTheSimulation) {
  const AggregatorOptions options = Options(1);
  Aggregator aggregator(MPI_COMM_WORLD, options);
  SerialSimulation oracle = Oracle(options);
  const size_t count = 1 << 20;
  DeviceBuffer scratchA(256 << 20), scratchB(256 << 20);
  for (uint32_t step = 0; step < 3; ++step) {
    DeviceBuffer source = DeviceBuffer::From(RandomGradient(count, 60 + step, WorldRank()));
    DeviceBuffer gradient(count * sizeof(float));
    ASSERT_EQ(cudaMemsetAsync(gradient.get(), 0xff, gradient.bytes(), stream_), cudaSuccess);
    QueueBusyWork(scratchA, scratchB, stream_);
    // Queued behind the busy work: the aggregation must see these values, not the 0xff bytes.
    ASSERT_EQ(cudaMemcpyAsync(gradient.get(), source.get(), gradient.bytes(), cudaMemcpyDeviceToDevice, stream_),
              cudaSuccess);
    GradientHeader header;
    header.numSamples = 2;
    PendingAggregation pending =
        aggregator.AggregateGradientsAsync({{gradient.get(), count, DataType::kFloat32}}, stream_, &header);
    QueueBusyWork(scratchA, scratchB, stream_);  // the caller's next work, free to overlap
    pending.Wait();
    const std::vector<float> result = gradient.ToHost<float>(count);
    EXPECT_TRUE(SameBits(result, oracle.Run(AllInputs(count, 60 + step)))) << "step " << step;
    EXPECT_TRUE(IdenticalOnAllRanks(result)) << "step " << step;
    EXPECT_EQ(header.numSamples, 2u * static_cast<uint64_t>(WorldSize()));
  }
}

// Blocks the stream it is queued on for 300 ms without using the GPU.
void CUDART_CB HoldStream(void*) { std::this_thread::sleep_for(std::chrono::milliseconds(300)); }

TEST_F(DeviceBackground, AggregatorsStartedInOtherOrdersOnTheGpusDoNotHang) {
  // A DDP hook keeps one Aggregator per bucket, each with a stream of its own, and starts the next bucket before the
  // last is done. Their NVLink kernels spin until the same call's kernels on the node's other GPUs arrive, and one of
  // 512 threads on every multiprocessor leaves room for at most four at once. Here local rank 0's first four calls
  // may start at once and its last four are held back 300 ms on their streams; local rank 1's the other way round.
  // Without device turns (aggregator/device_call_order.h) each GPU fills up with calls its peer cannot start, until
  // the NVLink deadline; with them the calls run one at a time in the order they were made, on both.
  const AggregatorOptions options = Options(1);
  if (Aggregator(MPI_COMM_WORLD, options).ranksPerNode() < 2) GTEST_SKIP() << "needs a node of two ranks";
  constexpr int kAggregators = 8;
  const size_t count = 8 << 20;  // 32 MiB: all-push, a block on every multiprocessor
  const bool firstHalfHeld = WorldRank() % 2 == 1;
  std::vector<std::unique_ptr<Aggregator>> aggregators;
  std::vector<SerialSimulation> oracles;
  std::vector<cudaStream_t> streams(kAggregators);
  for (int k = 0; k < kAggregators; ++k) {
    aggregators.push_back(std::make_unique<Aggregator>(MPI_COMM_WORLD, options));
    oracles.push_back(Oracle(options));
    ASSERT_EQ(cudaStreamCreate(&streams[k]), cudaSuccess);
  }
  for (uint32_t step = 0; step < 3; ++step) {  // step 0 sets the Aggregators up (synchronising the device): no holds
    std::vector<DeviceBuffer> gradients;
    std::vector<PendingAggregation> pending;
    for (int k = 0; k < kAggregators; ++k) {
      const uint32_t seed = 700 + 10 * step + static_cast<uint32_t>(k);
      gradients.push_back(DeviceBuffer::From(RandomGradient(count - 1000 * k, seed, WorldRank())));
      if (step > 0 && (k < kAggregators / 2) == firstHalfHeld)
        ASSERT_EQ(cudaLaunchHostFunc(streams[k], HoldStream, nullptr), cudaSuccess);
      pending.push_back(aggregators[k]->AggregateGradientsAsync(
          {{gradients[k].get(), count - 1000 * k, DataType::kFloat32}}, streams[k]));
    }
    for (int k = 0; k < kAggregators; ++k) {
      pending[k].Wait();
      const std::vector<float> result = gradients[k].ToHost<float>(count - 1000 * k);
      const uint32_t seed = 700 + 10 * step + static_cast<uint32_t>(k);
      EXPECT_TRUE(SameBits(result, oracles[k].Run(AllInputs(count - 1000 * k, seed))))
          << "step " << step << ", aggregator " << k;
    }
  }
  for (cudaStream_t stream : streams) cudaStreamDestroy(stream);
}

TEST_F(DeviceBackground, AsyncBadTensorsThrowFromWaitOnEveryRank) {
  if (WorldSize() < 2) GTEST_SKIP() << "needs two ranks";
  Aggregator aggregator(MPI_COMM_WORLD, Options(1));
  DeviceBuffer gradient(1000 * sizeof(float));
  std::vector<float> host(1000);
  void* data = WorldRank() == 0 ? static_cast<void*>(host.data()) : gradient.get();
  PendingAggregation pending = aggregator.AggregateGradientsAsync({{data, 1000, DataType::kFloat32}}, stream_);
  try {
    pending.Wait();
    ADD_FAILURE() << "no exception";
  } catch (const UsageError& error) {
    EXPECT_NE(std::string(error.what()).find("is not device memory"), std::string::npos) << error.what();
  }
  SerialSimulation oracle = Oracle(Options(1));
  ExpectMatchesOracle(aggregator, oracle, 1000, 1, "after the error");
}

TEST_F(DeviceBackground, DoubleBufferedReturnsThePreviousStepsAggregateAndFlushesTheLast) {
  AggregatorOptions options = Options(1);
  options.doubleBuffered = true;
  Aggregator aggregator(MPI_COMM_WORLD, options);
  SerialSimulation oracle = Oracle(options);
  const size_t first = 1001;
  const size_t second = 70003;  // two tensors: the copy's second one starts at an aligned offset
  const size_t count = first + second;
  DeviceBuffer a(first * sizeof(float)), b(second * sizeof(float));
  const std::vector<DeviceGradient> tensors = {{a.get(), first, DataType::kFloat32},
                                               {b.get(), second, DataType::kFloat32}};
  const auto load = [&](uint32_t seed) {
    const std::vector<float> input = RandomGradient(count, seed, WorldRank());
    ASSERT_EQ(cudaMemcpy(a.get(), input.data(), a.bytes(), cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(b.get(), input.data() + first, b.bytes(), cudaMemcpyHostToDevice), cudaSuccess);
  };
  const auto result = [&] {
    EXPECT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
    std::vector<float> values = a.ToHost<float>(first);
    const std::vector<float> rest = b.ToHost<float>(second);
    values.insert(values.end(), rest.begin(), rest.end());
    return values;
  };
  std::vector<float> expected(count, 0.0f);
  for (uint32_t step = 0; step < 4; ++step) {
    load(80 + step);
    GradientHeader header;
    header.numSamples = 10 + step;
    aggregator.AggregateGradients(tensors, stream_, &header);
    EXPECT_TRUE(SameBits(result(), expected)) << "step " << step;
    EXPECT_EQ(header.numSamples, step == 0 ? 0u : (10 + step - 1) * static_cast<uint64_t>(WorldSize()));
    expected = oracle.Run(AllInputs(count, 80 + step), {}, {first, second});  // buckets per tensor
  }
  GradientHeader header;
  EXPECT_TRUE(aggregator.FlushDoubleBuffer(tensors, stream_, &header));
  EXPECT_TRUE(SameBits(result(), expected)) << "flush";
  EXPECT_EQ(header.numSamples, 13u * static_cast<uint64_t>(WorldSize()));
  EXPECT_FALSE(aggregator.FlushDoubleBuffer(tensors, stream_, &header));
  const std::vector<DeviceGradient> fewer = {tensors[0]};
  aggregator.AggregateGradients(tensors, stream_);
  EXPECT_THROW(aggregator.FlushDoubleBuffer(fewer, stream_), UsageError);
}

}  // namespace
}  // namespace gradagg
