// Gradients in GPU memory, for Aggregator::AggregateGradients on a CUDA stream. Usable without CUDA's headers.
#pragma once

#include <cstddef>

struct CUstream_st;

namespace gradagg {

// The same type as CUDA's cudaStream_t; nullptr is the legacy default stream.
using CudaStream = CUstream_st*;

enum class DataType { kFloat32, kBFloat16, kFloat16 };

// One tensor in device memory of the calling rank's current GPU. Sums are float32 whatever the type; a bfloat16 or
// float16 result is the float32 aggregate rounded to nearest even.
struct DeviceGradient {
  void* data = nullptr;
  size_t count = 0;
  DataType type = DataType::kFloat32;
};

// How phase 2 hands device data to MPI: straight from device memory (a CUDA-aware MPI), or staged through pinned
// host buffers. kAuto asks MPI (MPIX_Query_cuda_support) and stages when it says no or cannot say.
enum class MpiTransport { kAuto, kCudaAware, kStaged };

// The staged transport's smallest chunk (AggregatorOptions::stagingChunkBytes).
inline constexpr size_t kMinStagingChunkBytes = 4096;

}  // namespace gradagg
