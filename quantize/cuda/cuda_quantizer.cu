// Host side of the CUDA quantizer: picks the kernel for (element type, bits, threshold), checks alignment for
// vector access, and launches on the caller's stream. Kernels: encode_kernel.cuh, decode_kernel.cuh.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "quantize/cuda/cuda_error.h"
#include "quantize/cuda/cuda_quantizer.h"
#include "quantize/cuda/decode_kernel.cuh"
#include "quantize/cuda/encode_kernel.cuh"
#include "quantize/wire_format.h"

namespace gradagg {
namespace {

using cuda_detail::DecodeArgs;
using cuda_detail::EncodeArgs;
using cuda_detail::EncodeMode;

constexpr int kThreads = 256;  // 8 warps: 8 buckets per block
constexpr int kBucketsPerBlock = kThreads / cuda_detail::kWarpSize;
constexpr int kRawBlocksMax = 65536;

bool Aligned(const void* p, size_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

// 4-element vector access works when every group starts aligned: aligned base pointers and buckets of a multiple
// of 4 elements.
bool VectorAccess(size_t bucketSize, const void* elements, size_t elementBytes, const void* residual) {
  return bucketSize % 4 == 0 && Aligned(elements, 4 * elementBytes) && (residual == nullptr || Aligned(residual, 16));
}

unsigned BlocksFor(size_t buckets) {
  return static_cast<unsigned>((buckets + kBucketsPerBlock - 1) / kBucketsPerBlock);
}

unsigned RawBlocks(size_t count) {
  return static_cast<unsigned>(std::min<size_t>((count + kThreads - 1) / kThreads, kRawBlocksMax));
}

template <typename T, int kBits, EncodeMode kMode>
void LaunchEncode(const EncodeArgs<T>& args, cudaStream_t stream) {
  cuda_detail::EncodeBucketsKernel<T, kBits, kMode><<<BlocksFor(args.buckets), kThreads, 0, stream>>>(args);
  GRADAGG_CUDA_CHECK_LAUNCH("EncodeBucketsKernel<bits=" + std::to_string(kBits) + ">");
}

template <typename T>
void EncodeTyped(const QuantizerConfig& config, const T* values, float* residual, size_t count, void* wire,
                 cudaStream_t stream) {
  if (config.bits == kRawBits) {
    cuda_detail::EncodeRawKernel<T>
        <<<RawBlocks(count), kThreads, 0, stream>>>(values, residual, count, static_cast<float*>(wire));
    GRADAGG_CUDA_CHECK_LAUNCH("EncodeRawKernel");
    return;
  }
  EncodeArgs<T> args{values,
                     residual,
                     count,
                     config.bucketSize,
                     (count + config.bucketSize - 1) / config.bucketSize,
                     BucketWireBytes(config.bucketSize, config.bits),
                     static_cast<unsigned char*>(wire),
                     VectorAccess(config.bucketSize, values, sizeof(T), residual)};
  switch (config.bits) {
    case 1:
      if (config.threshold == OneBitThreshold::kMean) {
        LaunchEncode<T, 1, EncodeMode::kOneBitMean>(args, stream);
      } else {
        LaunchEncode<T, 1, EncodeMode::kOneBitZero>(args, stream);
      }
      break;
    case 2:
      LaunchEncode<T, 2, EncodeMode::kRange>(args, stream);
      break;
    case 4:
      LaunchEncode<T, 4, EncodeMode::kRange>(args, stream);
      break;
    default:
      LaunchEncode<T, 8, EncodeMode::kRange>(args, stream);
      break;
  }
}

template <typename TOut, bool kAccumulate>
void DecodeTyped(const QuantizerConfig& config, const void* wire, size_t count, TOut* out, cudaStream_t stream) {
  if (config.bits == kRawBits) {
    cuda_detail::DecodeRawKernel<TOut, kAccumulate>
        <<<RawBlocks(count), kThreads, 0, stream>>>(static_cast<const float*>(wire), count, out);
    GRADAGG_CUDA_CHECK_LAUNCH("DecodeRawKernel");
    return;
  }
  const DecodeArgs<TOut> args{static_cast<const unsigned char*>(wire),
                              count,
                              config.bucketSize,
                              (count + config.bucketSize - 1) / config.bucketSize,
                              BucketWireBytes(config.bucketSize, config.bits),
                              out,
                              VectorAccess(config.bucketSize, out, sizeof(TOut), nullptr)};
  const unsigned blocks = BlocksFor(args.buckets);
  switch (config.bits) {
    case 1:
      cuda_detail::DecodeBucketsKernel<TOut, 1, kAccumulate><<<blocks, kThreads, 0, stream>>>(args);
      break;
    case 2:
      cuda_detail::DecodeBucketsKernel<TOut, 2, kAccumulate><<<blocks, kThreads, 0, stream>>>(args);
      break;
    case 4:
      cuda_detail::DecodeBucketsKernel<TOut, 4, kAccumulate><<<blocks, kThreads, 0, stream>>>(args);
      break;
    default:
      cuda_detail::DecodeBucketsKernel<TOut, 8, kAccumulate><<<blocks, kThreads, 0, stream>>>(args);
      break;
  }
  GRADAGG_CUDA_CHECK_LAUNCH("DecodeBucketsKernel<bits=" + std::to_string(config.bits) + ">");
}

}  // namespace

CudaQuantizer::CudaQuantizer(const QuantizerConfig& config) : config_(config) { ValidateQuantizerConfig(config_); }

size_t CudaQuantizer::WireBytes(size_t count) const {
  return gradagg::WireBytes(count, config_.bucketSize, config_.bits);
}

void CudaQuantizer::Encode(const void* values, ElementType type, float* residual, size_t count, void* wire,
                           cudaStream_t stream) const {
  if (count == 0) return;
  cuda_detail::WithElementType(type, [&](auto element) {
    using T = decltype(element);
    EncodeTyped(config_, static_cast<const T*>(values), residual, count, wire, stream);
  });
}

void CudaQuantizer::Decode(const void* wire, size_t count, void* out, ElementType type, cudaStream_t stream) const {
  if (count == 0) return;
  cuda_detail::WithElementType(type, [&](auto element) {
    using T = decltype(element);
    DecodeTyped<T, false>(config_, wire, count, static_cast<T*>(out), stream);
  });
}

void CudaQuantizer::DecodeAccumulate(const void* wire, size_t count, float* accumulator, cudaStream_t stream) const {
  if (count == 0) return;
  DecodeTyped<float, true>(config_, wire, count, accumulator, stream);
}

}  // namespace gradagg
