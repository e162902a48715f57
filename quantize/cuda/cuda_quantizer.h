// The quantizer of DESIGN.md on the GPU: the same wire format and, for every mode, the same bytes as the CPU
// Quantizer (quantize/quantizer.h) on the same input.
//
// Stream-ordered: every call enqueues on `stream` and returns without synchronising; all pointers are device
// memory. A launch failure throws CudaError naming the kernel. Inputs are float32, bfloat16 or float16; statistics,
// residuals and sums are float32. NaN in a bucket poisons it as on the CPU; the GPU writes the canonical NaN, so NaN
// payloads may differ from the CPU's (every other bit agrees).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "quantize/element_type.h"
#include "quantize/quantizer_config.h"

namespace gradagg {

class CudaQuantizer {
 public:
  explicit CudaQuantizer(const QuantizerConfig& config);  // throws std::invalid_argument for a bad config

  const QuantizerConfig& config() const { return config_; }
  size_t WireBytes(size_t count) const;

  // Encodes `count` elements (starting on a bucket boundary) of `values` into WireBytes(count) bytes at `wire`
  // (4-byte aligned). With a residual (float32, error feedback) v = values + residual, and the residual becomes
  // v - decode(code); with residual == nullptr, v = values. One pass over values and residual.
  void Encode(const void* values, ElementType type, float* residual, size_t count, void* wire,
              cudaStream_t stream) const;

  // out[i] = decode(i), rounded to `type`.
  void Decode(const void* wire, size_t count, void* out, ElementType type, cudaStream_t stream) const;

  // accumulator[i] = accumulator[i] + decode(i), float32.
  void DecodeAccumulate(const void* wire, size_t count, float* accumulator, cudaStream_t stream) const;

 private:
  QuantizerConfig config_;
};

}  // namespace gradagg
