// The staged and mapped device exchanges on their own (mpi/cuda/device_exchange.h): bytes from every peer reach
// the work onReady queues, though Run does not wait for the stream; pools and events are reused across rounds of
// changing sizes; and a peer that never comes ends in TimeoutError with the stream drained.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gradagg/device_gradient.h"
#include "gradagg/errors.h"
#include "common/cuda/device_memory.h"
#include "mpi/cuda/device_exchange.h"
#include "test/gpu/one_gpu_per_rank.h"
#include "test/mpi/timeout_expectation.h"

namespace gradagg::test {
namespace {

// The two host-staged transports, by name: "staged" (messages in device memory, copied through a pinned pool) and
// "mapped" (messages in mapped pinned memory, read and written in place).
class DeviceExchangeTest : public OneGpuPerRank, public ::testing::WithParamInterface<const char*> {
 protected:
  bool Mapped() const { return std::string(GetParam()) == "mapped"; }
  std::unique_ptr<DeviceExchange> Exchange(double timeoutSeconds) const {
    return Mapped() ? MakeMappedExchange(timeoutSeconds)
                    : MakeDeviceExchange(false, kMinStagingChunkBytes, timeoutSeconds);
  }
  // Memory for messages of the transport's kind.
  std::shared_ptr<void> Messages(size_t bytes) const {
    if (Mapped()) return std::shared_ptr<void>(AllocateMappedMessages(bytes));
    auto buffer = std::make_shared<DeviceBuffer>(bytes);
    return std::shared_ptr<void>(buffer, buffer->get());
  }
};

// The byte at `index` of what `from` sends `to` in round `round`.
unsigned char Pattern(int from, int to, size_t round, size_t index) {
  return static_cast<unsigned char>(from * 131 + to * 31 + round * 7 + index * 13 + (index >> 8));
}

// Waits at most `seconds` for the stream to finish; true if it did.
bool Drains(cudaStream_t stream, double seconds) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < end) {
    const cudaError_t status = cudaStreamQuery(stream);
    if (status == cudaSuccess) return true;
    if (status != cudaErrorNotReady) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return false;
}

// Several rounds of sizes that grow and shrink, with the smallest chunks: many per message. onReady(p) copies
// p's receive buffer on the stream into a buffer of its own, so the test sees what onReady's work saw.
TEST_P(DeviceExchangeTest, RoundsOfChangingSizesDeliverEveryByteToWorkQueuedInOnReady) {
  const int rank = WorldRank();
  const int size = WorldSize();
  const std::unique_ptr<DeviceExchange> exchange = Exchange(30.0);
  size_t round = 0;
  for (size_t bytes : {size_t{100}, size_t{3 * kMinStagingChunkBytes + 17}, size_t{5}, size_t{70001}, size_t{4096}}) {
    ++round;
    const std::shared_ptr<void> outgoingMemory = Messages(bytes * static_cast<size_t>(size));
    const std::shared_ptr<void> incomingMemory = Messages(bytes * static_cast<size_t>(size));
    auto* outgoing = static_cast<unsigned char*>(outgoingMemory.get());
    auto* incoming = static_cast<unsigned char*>(incomingMemory.get());
    DeviceBuffer seen(bytes * static_cast<size_t>(size));
    std::vector<unsigned char> pattern(bytes * static_cast<size_t>(size));
    std::vector<SendBuffer> sends(static_cast<size_t>(size));
    std::vector<ReceiveBuffer> receives(static_cast<size_t>(size));
    for (int peer = 0; peer < size; ++peer) {
      for (size_t i = 0; i < bytes; ++i) pattern[static_cast<size_t>(peer) * bytes + i] = Pattern(rank, peer, round, i);
      if (peer == rank) continue;
      sends[static_cast<size_t>(peer)] = {outgoing + static_cast<size_t>(peer) * bytes, bytes};
      receives[static_cast<size_t>(peer)] = {incoming + static_cast<size_t>(peer) * bytes, bytes};
    }
    ASSERT_EQ(cudaMemcpyAsync(outgoing, pattern.data(), pattern.size(), cudaMemcpyDefault, stream_), cudaSuccess);
    std::vector<int> order;
    exchange->Run(
        MPI_COMM_WORLD, 5, sends, receives, stream_,
        [&](int peer) {
          order.push_back(peer);
          if (peer == rank) return;
          const size_t offset = static_cast<size_t>(peer) * bytes;
          ASSERT_EQ(
              cudaMemcpyAsync(seen.as<unsigned char>() + offset, incoming + offset, bytes, cudaMemcpyDefault, stream_),
              cudaSuccess);
        },
        "the test round", nullptr, nullptr);
    std::vector<int> expectedOrder;
    for (int peer = 0; peer < size; ++peer) expectedOrder.push_back(peer);
    EXPECT_EQ(order, expectedOrder) << bytes << " bytes";
    std::vector<unsigned char> host(bytes * static_cast<size_t>(size));
    ASSERT_EQ(cudaMemcpyAsync(host.data(), seen.get(), host.size(), cudaMemcpyDeviceToHost, stream_), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
    for (int peer = 0; peer < size; ++peer) {
      if (peer == rank) continue;
      size_t wrong = 0;
      for (size_t i = 0; i < bytes; ++i)
        wrong += host[static_cast<size_t>(peer) * bytes + i] != Pattern(peer, rank, round, i);
      EXPECT_EQ(wrong, 0u) << bytes << " bytes from rank " << peer;
    }
  }
}

// The last rank never joins: every other rank throws TimeoutError naming it about a second after the deadline's
// start, and leaves nothing on its stream that waits for that rank.
TEST_P(DeviceExchangeTest, APeerThatNeverComesTimesOutAndTheStreamDrains) {
  if (WorldSize() < 2) GTEST_SKIP() << "needs two ranks";
  WithoutTheLastRank([&](MPI_Comm comm, int absent) {
    const int rank = WorldRank();
    const int size = WorldSize();
    const size_t bytes = 3 * kMinStagingChunkBytes;
    const std::shared_ptr<void> outgoing = Messages(bytes);
    const std::shared_ptr<void> incomingMemory = Messages(bytes * static_cast<size_t>(size));
    auto* incoming = static_cast<unsigned char*>(incomingMemory.get());
    std::vector<SendBuffer> sends(static_cast<size_t>(size));
    std::vector<ReceiveBuffer> receives(static_cast<size_t>(size));
    for (int peer = 0; peer < size; ++peer) {
      if (peer == rank) continue;
      sends[static_cast<size_t>(peer)] = {outgoing.get(), bytes};
      receives[static_cast<size_t>(peer)] = {incoming + static_cast<size_t>(peer) * bytes, bytes};
    }
    const std::unique_ptr<DeviceExchange> exchange = Exchange(1.0);
    ExpectTimeoutNamingRank(
        [&] {
          exchange->Run(
              comm, 9, sends, receives, stream_, [](int) {}, "the test round", nullptr, nullptr);
        },
        "the test round: waited 1 s", absent, 1.0, 1.5);
    EXPECT_TRUE(Drains(stream_, 5.0)) << "the stream still holds work for the absent rank";
  });
}

INSTANTIATE_TEST_SUITE_P(Transports, DeviceExchangeTest, ::testing::Values("staged", "mapped"));

}  // namespace
}  // namespace gradagg::test
