// The base of the multi-rank GPU tests: rank r works on GPU r with a stream of its own; without one GPU per rank
// every rank skips alike, unless GRADAGG_NVLINK_SHARE_GPUS=1 puts rank r on GPU r mod GPUs (kernels for more ranks
// than GPUs, tested for correctness only).
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

#include "test/mpi/mpi_test_support.h"

namespace gradagg::test {

class OneGpuPerRank : public ::testing::Test {
 protected:
  void SetUp() override {
    int devices = 0;
    const char* share = std::getenv("GRADAGG_NVLINK_SHARE_GPUS");
    const bool shared = share != nullptr && std::strcmp(share, "1") == 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0 || (devices < WorldSize() && !shared))
      GTEST_SKIP() << "needs one GPU per rank: " << WorldSize() << " ranks, " << devices << " GPUs";
    ASSERT_EQ(cudaSetDevice(WorldRank() % devices), cudaSuccess);
    ASSERT_EQ(cudaStreamCreate(&stream_), cudaSuccess);
  }
  void TearDown() override {
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  cudaStream_t stream_ = nullptr;
};

}  // namespace gradagg::test
