// An owned CUDA stream, destroyed with its owner. Host-only header.
#pragma once

#include <cuda_runtime_api.h>

#include <memory>

#include "common/cuda/cuda_error.h"

namespace gradagg {

struct CudaStreamDestroy {
  void operator()(cudaStream_t stream) const noexcept { cudaStreamDestroy(stream); }
};

using OwnedStream = std::unique_ptr<CUstream_st, CudaStreamDestroy>;

// A stream on the current device that does not wait for the legacy default stream.
inline OwnedStream MakeNonBlockingStream() {
  cudaStream_t stream = nullptr;
  GRADAGG_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  return OwnedStream(stream);
}

}  // namespace gradagg
