// The base of the multi-rank GPU tests: rank r works on GPU r with a stream of its own; without one GPU per rank
// every rank skips alike.
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include "test/mpi/mpi_test_support.h"

namespace gradagg::test {

class OneGpuPerRank : public ::testing::Test {
 protected:
  void SetUp() override {
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices < WorldSize())
      GTEST_SKIP() << "needs one GPU per rank: " << WorldSize() << " ranks, " << devices << " GPUs";
    ASSERT_EQ(cudaSetDevice(WorldRank()), cudaSuccess);
    ASSERT_EQ(cudaStreamCreate(&stream_), cudaSuccess);
  }
  void TearDown() override {
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  cudaStream_t stream_ = nullptr;
};

}  // namespace gradagg::test
