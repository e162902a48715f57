// Line packets (intra_node/cuda/line_packets.cuh) as a reader sees them when a line's two 64-byte halves land apart:
// the reader takes the line only once both halves carry the call's flag, and gives up at its deadline when a half
// never lands. The line lies in mapped host memory and the host writes it half by half while one warp waits for it,
// so a late half is certain, not a race to get lucky in. With one flag a line (the format before the torn lines of
// bench/results/nvlink_allreduce/h100x4/torn_lines/) both tests fail: the reader takes the flag half with the stale
// first half. Skipped where no GPU is visible.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>

#include "common/cuda/cuda_error.h"
#include "common/cuda/device_memory.h"
#include "intra_node/cuda/line_packets.cuh"

namespace gradagg::nvlink::device {
namespace {

constexpr int kWords = 4 * kLineVectors;  // 32-bit words in a line, flags included
constexpr uint32_t kOldFlag = 1;
constexpr uint32_t kNewFlag = 2;

// One warp; lanes 0-7 wait for the line under `flag`, then store what they took and whether it came in time.
__global__ void WaitForLine(const uint4* line, uint32_t flag, uint64_t timeoutNs, int* started, uint4* taken,
                            int* inTime) {
  if (threadIdx.x == 0) *reinterpret_cast<volatile int*>(started) = 1;
  const bool valid = threadIdx.x < kLineVectors;
  uint4 v = make_uint4(0, 0, 0, 0);
  const bool ok = WaitLine(line + LineVector(), valid, flag, GlobalTimerNs() + timeoutNs, v);
  if (valid) taken[threadIdx.x] = v;
  if (threadIdx.x == 0) *inTime = ok ? 1 : 0;
}

// A call's image of the line: data words base + i, and the flag in the last word of each half. Written out rather than
// from kFlagEvery, so that a build of one flag a line (kFlagEvery = 8) runs the same test: there the first half's
// flag is just a data word.
uint32_t Word(uint32_t base, uint32_t flag, int i) {
  return i == kWords / 2 - 1 || i == kWords - 1 ? flag : base + static_cast<uint32_t>(i);
}

class LinePacketsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string reason = CudaUnavailableReason();
    if (!reason.empty()) GTEST_SKIP() << reason;
    void* memory = nullptr;
    GRADAGG_CUDA_CHECK(cudaHostAlloc(&memory, 4096, cudaHostAllocMapped));
    host_ = static_cast<uint32_t*>(memory);
    for (int i = 0; i < kWords; ++i) host_[i] = Word(500, kOldFlag, i);  // an earlier call's line
    started_ = reinterpret_cast<int*>(host_ + 64);
    taken_ = reinterpret_cast<uint4*>(host_ + 128);
    inTime_ = reinterpret_cast<int*>(host_ + 256);
    *started_ = 0;
    *inTime_ = -1;
  }
  void TearDown() override {
    if (host_ != nullptr) EXPECT_EQ(cudaFreeHost(host_), cudaSuccess);
  }

  // Starts the waiting warp and returns once it runs.
  void StartReader(uint64_t timeoutNs) {
    uint4* line = nullptr;
    GRADAGG_CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&line), host_, 0));
    auto device = [&](void* p) {
      void* d = nullptr;
      GRADAGG_CUDA_CHECK(cudaHostGetDevicePointer(&d, p, 0));
      return d;
    };
    WaitForLine<<<1, 32>>>(line, kNewFlag, timeoutNs, static_cast<int*>(device(started_)),
                           static_cast<uint4*>(device(taken_)), static_cast<int*>(device(inTime_)));
    GRADAGG_CUDA_CHECK(cudaGetLastError());
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (*reinterpret_cast<volatile int*>(started_) == 0)
      ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "the reader kernel never started";
    // A launch that returned only once the kernel had ended (as under some tools) leaves nothing to test.
    if (cudaStreamQuery(nullptr) == cudaSuccess) GTEST_SKIP() << "the reader ended before the host wrote anything";
  }

  // Writes this call's half (0: words 0-15, 1: words 16-31), its flag last, 1 ms after its data words, so that the
  // half lands whole however the GPU's reads of host memory are split.
  void WriteHalf(int half) {
    volatile uint32_t* words = host_;
    const int last = (half + 1) * kWords / 2 - 1;
    for (int i = half * kWords / 2; i < last; ++i) words[i] = Word(1000, kNewFlag, i);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    words[last] = Word(1000, kNewFlag, last);
    std::atomic_thread_fence(std::memory_order_seq_cst);
  }

  uint32_t* host_ = nullptr;
  int* started_ = nullptr;
  uint4* taken_ = nullptr;
  int* inTime_ = nullptr;
};

TEST_F(LinePacketsTest, ATornLineWaitsForItsFirstHalf) {
  ASSERT_NO_FATAL_FAILURE(StartReader(uint64_t{20} * 1000 * 1000 * 1000));
  if (IsSkipped()) return;
  WriteHalf(1);  // the flag half lands first ...
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  WriteHalf(0);  // ... and the first half 50 ms later
  GRADAGG_CUDA_CHECK(cudaDeviceSynchronize());
  EXPECT_EQ(*inTime_, 1);
  const uint32_t* taken = reinterpret_cast<const uint32_t*>(taken_);
  int stale = 0;
  for (int i = 0; i < kWords; ++i) stale += taken[i] != Word(1000, kNewFlag, i);
  EXPECT_EQ(stale, 0) << "words of the line taken from the earlier call";
}

TEST_F(LinePacketsTest, AHalfThatNeverLandsEndsTheWaitAtItsDeadline) {
  ASSERT_NO_FATAL_FAILURE(StartReader(uint64_t{200} * 1000 * 1000));  // 200 ms
  if (IsSkipped()) return;
  WriteHalf(1);
  GRADAGG_CUDA_CHECK(cudaDeviceSynchronize());
  EXPECT_EQ(*inTime_, 0) << "the reader took a line whose first half never came";
}

}  // namespace
}  // namespace gradagg::nvlink::device
