// Host side of the CUDA quantizer: picks the kernel for (element type, bits, threshold), checks alignment for
// vector access, and launches on the caller's stream. Kernels: encode_kernel.cuh, decode_kernel.cuh.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "common/cuda/cuda_error.h"
#include "quantize/cuda/cuda_quantizer.h"
#include "quantize/cuda/decode_kernel.cuh"
#include "quantize/cuda/encode_kernel.cuh"
#include "quantize/wire_format.h"

namespace gradagg {
namespace {

using cuda_detail::DecodeArgs;
using cuda_detail::EncodeArgs;
using cuda_detail::EncodeInput;
using cuda_detail::EncodeMode;

constexpr int kThreads = cuda_detail::kBlockThreads;
constexpr int kBucketsPerBlock = kThreads / cuda_detail::kWarpSize;
constexpr int kRawBlocksMax = 65536;

bool Aligned(const void* p, size_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

// 4-element vector access works when every group starts aligned: aligned base pointers, buckets of a multiple of 4
// elements, and segments that start on a multiple of 4.
bool VectorAccess(const cuda_detail::BucketTable& table, const void* elements, size_t elementBytes,
                  const void* residual) {
  return table.bucketSize % 4 == 0 && table.alignedStarts && Aligned(elements, 4 * elementBytes) &&
         (residual == nullptr || Aligned(residual, 16));
}

// Every array of a set starts on a multiple of `bytes`.
template <typename T>
bool ArraysAligned(const ValueArrays<T>& arrays, size_t bytes) {
  for (int i = 0; i < arrays.count; ++i) {
    if (!Aligned(arrays.at[i], bytes)) return false;
  }
  return true;
}

unsigned BlocksFor(size_t buckets) {
  return static_cast<unsigned>((buckets + kBucketsPerBlock - 1) / kBucketsPerBlock);
}

unsigned RawBlocks(size_t count) {
  return static_cast<unsigned>(std::min<size_t>((count + kThreads - 1) / kThreads, kRawBlocksMax));
}

template <typename T, int kBits, EncodeMode kMode, EncodeInput kInput>
void LaunchEncode(const EncodeArgs<T>& args, cudaStream_t stream) {
  cuda_detail::EncodeBucketsKernel<T, kBits, kMode, kInput>
      <<<BlocksFor(args.table.buckets), kThreads, 0, stream>>>(args);
  GRADAGG_CUDA_CHECK_LAUNCH("EncodeBucketsKernel<bits=" + std::to_string(kBits) + ">");
}

template <typename T, EncodeInput kInput>
void LaunchEncode(const QuantizerConfig& config, const EncodeArgs<T>& args, cudaStream_t stream) {
  switch (config.bits) {
    case 1:
      if (config.threshold == OneBitThreshold::kMean) {
        LaunchEncode<T, 1, EncodeMode::kOneBitMean, kInput>(args, stream);
      } else {
        LaunchEncode<T, 1, EncodeMode::kOneBitZero, kInput>(args, stream);
      }
      break;
    case 2:
      LaunchEncode<T, 2, EncodeMode::kRange, kInput>(args, stream);
      break;
    case 4:
      LaunchEncode<T, 4, EncodeMode::kRange, kInput>(args, stream);
      break;
    default:
      LaunchEncode<T, 8, EncodeMode::kRange, kInput>(args, stream);
      break;
  }
}

// `first` and `addend`: nullptr, or wire images of the same layout: the sum first + addend (`values` unused), or
// values + addend, is encoded.
template <typename T>
void EncodeTyped(const QuantizerConfig& config, float clip, const T* values, const void* first, const void* addend,
                 float* residual, const cuda_detail::BucketTable& table, void* wire, cudaStream_t stream) {
  if (config.bits == kRawBits) {
    const T* terms = first != nullptr ? static_cast<const T*>(first) : values;  // raw wire images are float32
    cuda_detail::EncodeRawKernel<T><<<RawBlocks(table.count), kThreads, 0, stream>>>(
        terms, static_cast<const float*>(addend), residual, table.count, static_cast<float*>(wire));
    GRADAGG_CUDA_CHECK_LAUNCH("EncodeRawKernel");
    return;
  }
  const EncodeArgs<T> args{values,
                           static_cast<const unsigned char*>(first),
                           static_cast<const unsigned char*>(addend),
                           residual,
                           table,
                           static_cast<unsigned char*>(wire),
                           VectorAccess(table, values, sizeof(T), residual),
                           clip};
  if (addend == nullptr) {
    LaunchEncode<T, EncodeInput::kValues>(config, args, stream);
  } else if constexpr (std::is_same_v<T, float>) {  // sums are float32: no other kernels compiled
    if (first != nullptr) {
      LaunchEncode<T, EncodeInput::kWirePlusWire>(config, args, stream);
    } else {
      LaunchEncode<T, EncodeInput::kValuesPlusWire>(config, args, stream);
    }
  }
}

// EncodeTerms and DecodeCopies: quantized widths only, and 1 to 16 arrays (else std::invalid_argument).
void CheckQuantizedArrays(const char* what, const QuantizerConfig& config, int count) {
  if (config.bits == kRawBits) throw std::invalid_argument(std::string(what) + ": 32 bits are not quantized");
  CheckArrayCount(what, count);
}

void EncodeTermsTyped(const QuantizerConfig& config, float clip, const ValueTerms& values, float* residual,
                      const cuda_detail::BucketTable& table, void* wire, cudaStream_t stream) {
  const bool vector = VectorAccess(table, values.at[0], sizeof(float), residual) && ArraysAligned(values, 16);
  EncodeArgs<float> args{nullptr, nullptr, nullptr, residual, table, static_cast<unsigned char*>(wire), vector, clip};
  args.terms = values;
  LaunchEncode<float, EncodeInput::kTerms>(config, args, stream);
}

template <typename TOut, bool kAccumulate, bool kCopies = false>
void DecodeTyped(const QuantizerConfig& config, const void* wire, const cuda_detail::BucketTable& table, TOut* out,
                 unsigned long long* nonFinite, cudaStream_t stream, const ValueCopies& copies = {}) {
  if (config.bits == kRawBits) {
    cuda_detail::DecodeRawKernel<TOut, kAccumulate>
        <<<RawBlocks(table.count), kThreads, 0, stream>>>(static_cast<const float*>(wire), table.count, out);
    GRADAGG_CUDA_CHECK_LAUNCH("DecodeRawKernel");
    return;
  }
  const void* first = kCopies ? static_cast<const void*>(copies.at[0]) : out;
  const bool vector =
      VectorAccess(table, first, sizeof(TOut), nullptr) && (!kCopies || ArraysAligned(copies, 4 * sizeof(TOut)));
  DecodeArgs<TOut> args{static_cast<const unsigned char*>(wire), table, out, vector, nonFinite};
  args.copies = copies;
  const unsigned blocks = BlocksFor(table.buckets);
  switch (config.bits) {
    case 1:
      cuda_detail::DecodeBucketsKernel<TOut, 1, kAccumulate, kCopies><<<blocks, kThreads, 0, stream>>>(args);
      break;
    case 2:
      cuda_detail::DecodeBucketsKernel<TOut, 2, kAccumulate, kCopies><<<blocks, kThreads, 0, stream>>>(args);
      break;
    case 4:
      cuda_detail::DecodeBucketsKernel<TOut, 4, kAccumulate, kCopies><<<blocks, kThreads, 0, stream>>>(args);
      break;
    default:
      cuda_detail::DecodeBucketsKernel<TOut, 8, kAccumulate, kCopies><<<blocks, kThreads, 0, stream>>>(args);
      break;
  }
  GRADAGG_CUDA_CHECK_LAUNCH("DecodeBucketsKernel<bits=" + std::to_string(config.bits) + ">");
}

}  // namespace

CudaQuantizer::CudaQuantizer(const QuantizerConfig& config) : config_(config), clip_(0.0f) {
  ValidateQuantizerConfig(config_);
  clip_ = ClipOf(config_);
}

size_t CudaQuantizer::WireBytes(const BucketLayout& layout) const { return gradagg::WireBytes(layout, config_.bits); }

size_t CudaQuantizer::WireBytes(size_t count) const {
  return gradagg::WireBytes(count, config_.bucketSize, config_.bits);
}

DeviceBucketLayout CudaQuantizer::Uniform(size_t count) const {
  DeviceBucketLayout layout;
  layout.table_ = {nullptr,
                   0,
                   count,
                   (count + config_.bucketSize - 1) / config_.bucketSize,
                   config_.bucketSize,
                   BucketWireBytes(config_.bucketSize, config_.bits), true};
  return layout;
}

DeviceBucketLayout CudaQuantizer::Upload(const BucketLayout& layout) const {
  if (layout.bucketSize() != config_.bucketSize && layout.elements() != 0) {
    throw std::invalid_argument("CudaQuantizer::Upload: a layout of buckets of " + std::to_string(layout.bucketSize()) +
                                " for a quantizer of " + std::to_string(config_.bucketSize));
  }
  DeviceBucketLayout device = Uniform(layout.elements());
  if (layout.segments().size() <= 1) return device;
  std::vector<cuda_detail::TableSegment> segments;
  size_t wire = 0;
  for (const BucketSegment& segment : layout.segments()) {
    segments.push_back({segment.begin, segment.count, segment.firstBucket, wire});
    device.table_.alignedStarts = device.table_.alignedStarts && segment.begin % 4 == 0;
    wire += gradagg::WireBytes(segment.count, config_.bucketSize, config_.bits);
  }
  device.segments_ = DeviceBuffer::From(segments);
  device.table_.segments = device.segments_.as<cuda_detail::TableSegment>();
  device.table_.segmentCount = static_cast<int>(segments.size());
  device.table_.buckets = layout.buckets();
  return device;
}

void CudaQuantizer::Encode(const void* values, ElementType type, float* residual, const DeviceBucketLayout& layout,
                           void* wire, cudaStream_t stream) const {
  if (layout.elements() == 0) return;
  cuda_detail::WithElementType(type, [&](auto element) {
    using T = decltype(element);
    EncodeTyped(config_, clip_, static_cast<const T*>(values), nullptr, nullptr, residual, layout.table(), wire,
                stream);
  });
}

void CudaQuantizer::EncodeSum(SumTerm first, const void* addend, float* residual, const DeviceBucketLayout& layout,
                              void* wire, cudaStream_t stream) const {
  if (layout.elements() == 0) return;
  EncodeTyped(config_, clip_, first.values, first.wire, addend, residual, layout.table(), wire, stream);
}

void CudaQuantizer::EncodeTerms(const ValueTerms& values, float* residual, const DeviceBucketLayout& layout,
                                void* wire, cudaStream_t stream) const {
  CheckQuantizedArrays("CudaQuantizer::EncodeTerms", config_, values.count);
  if (layout.elements() == 0) return;
  EncodeTermsTyped(config_, clip_, values, residual, layout.table(), wire, stream);
}

void CudaQuantizer::Decode(const void* wire, const DeviceBucketLayout& layout, void* out, ElementType type,
                           cudaStream_t stream, unsigned long long* nonFinite) const {
  if (layout.elements() == 0) return;
  cuda_detail::WithElementType(type, [&](auto element) {
    using T = decltype(element);
    DecodeTyped<T, false>(config_, wire, layout.table(), static_cast<T*>(out), nonFinite, stream);
  });
}

void CudaQuantizer::DecodeCopies(const void* wire, const DeviceBucketLayout& layout, const ValueCopies& out,
                                 cudaStream_t stream, unsigned long long* nonFinite) const {
  CheckQuantizedArrays("CudaQuantizer::DecodeCopies", config_, out.count);
  if (layout.elements() == 0) return;
  DecodeTyped<float, false, true>(config_, wire, layout.table(), nullptr, nonFinite, stream, out);
}

void CudaQuantizer::DecodeAccumulate(const void* wire, const DeviceBucketLayout& layout, float* accumulator,
                                     cudaStream_t stream, unsigned long long* nonFinite) const {
  if (layout.elements() == 0) return;
  DecodeTyped<float, true>(config_, wire, layout.table(), accumulator, nonFinite, stream);
}

}  // namespace gradagg
