// The quantizer of docs/DESIGN.md on the GPU: the same wire format and, for every mode, the same bytes as the CPU
// Quantizer (quantize/quantizer.h) on the same input, non-finite buckets included.
//
// Stream-ordered: every call enqueues on `stream` and returns without synchronising; all pointers are device
// memory. A launch failure throws CudaError naming the kernel. Inputs are float32, bfloat16 or float16; statistics,
// residuals and sums are float32. NaN payloads may differ from the CPU's (the GPU writes the canonical NaN); every
// other bit agrees.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "quantize/bucket_layout.h"
#include "quantize/cuda/bucket_table.h"
#include "common/cuda/device_memory.h"
#include "common/element_type.h"
#include "quantize/quantizer_config.h"
#include "quantize/sum_term.h"

namespace gradagg {

// A BucketLayout in device memory, for one quantizer (the wire offsets depend on the bit width). A run of one
// segment needs no device memory.
class DeviceBucketLayout {
 public:
  DeviceBucketLayout() = default;
  size_t elements() const { return table_.count; }
  const cuda_detail::BucketTable& table() const { return table_; }

 private:
  friend class CudaQuantizer;
  DeviceBuffer segments_;
  cuda_detail::BucketTable table_{nullptr, 0, 0, 0, 1, 0, true};
};

class CudaQuantizer {
 public:
  explicit CudaQuantizer(const QuantizerConfig& config);  // throws std::invalid_argument for a bad config

  const QuantizerConfig& config() const { return config_; }
  size_t WireBytes(const BucketLayout& layout) const;
  size_t WireBytes(size_t count) const;

  // The layout for this quantizer's kernels (synchronous copy; none for one segment).
  DeviceBucketLayout Upload(const BucketLayout& layout) const;
  // A run of `count` elements that is one segment.
  DeviceBucketLayout Uniform(size_t count) const;

  // Encodes the run of `values` into WireBytes bytes at `wire` (4-byte aligned). With a residual (float32, error
  // feedback) v = values + residual, and the residual becomes v - decode(code) except in non-finite buckets; with
  // residual == nullptr, v = values. One pass over values and residual.
  void Encode(const void* values, ElementType type, float* residual, const DeviceBucketLayout& layout, void* wire,
              cudaStream_t stream) const;

  // Encode of first[i] + decode(addend)[i], float32, `addend` a wire image of the same layout (4-byte aligned), each
  // sum one rounding: the bytes and residual of DecodeAccumulate(addend) into a copy of the first term, then Encode,
  // without the sum ever stored. Non-finite buckets of either term make their sums non-finite, as there.
  void EncodeSum(SumTerm first, const void* addend, float* residual, const DeviceBucketLayout& layout, void* wire,
                 cudaStream_t stream) const;

  // Encode of the sum of the arrays of `values` in their order (float32, any device memory this GPU can read, e.g.
  // peers' through NVLink), each addition one rounding: the bytes and residual of summing them into one array first
  // and encoding that. Quantized bit widths only (not 32: std::invalid_argument).
  void EncodeTerms(const ValueTerms& values, float* residual, const DeviceBucketLayout& layout, void* wire,
                   cudaStream_t stream) const;

  // out[i] = decode(i), rounded to `type`. Adds the number of non-finite buckets to *nonFinite (device memory) when
  // it is not null.
  void Decode(const void* wire, const DeviceBucketLayout& layout, void* out, ElementType type, cudaStream_t stream,
              unsigned long long* nonFinite = nullptr) const;

  // Decode into every array of `out` (float32, any device memory this GPU can write, e.g. peers' through NVLink);
  // counts as Decode does. Quantized bit widths only (not 32: std::invalid_argument).
  void DecodeCopies(const void* wire, const DeviceBucketLayout& layout, const ValueCopies& out, cudaStream_t stream,
                    unsigned long long* nonFinite = nullptr) const;

  // accumulator[i] = accumulator[i] + decode(i), float32; counts as Decode does.
  void DecodeAccumulate(const void* wire, const DeviceBucketLayout& layout, float* accumulator, cudaStream_t stream,
                        unsigned long long* nonFinite = nullptr) const;

 private:
  QuantizerConfig config_;
  float clip_;
};

}  // namespace gradagg
