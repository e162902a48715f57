// The bucket quantizer of DESIGN.md on the CPU: encode with error feedback, decode, decode-and-accumulate.
//
// Per bucket, on v = values + residual:
//   1. statistics in the canonical order (canonical_sum.h): the two 1-bit decode values, or the range [-4s, 4s]
//      with s = sqrt(mean(v^2));
//   2. codes, packed as wire_format.h says, after the two header floats;
//   3. residual = v - decode(code), computed from the header floats exactly as a receiver decodes them.
// Arithmetic is float32 with one rounding per operation, so the CUDA kernels can reproduce every bit.
//
// NaN or Inf in a bucket poison its statistics: the whole bucket decodes to NaN (or Inf), and with error feedback
// the residual keeps the NaN until it is reset. Bits 32 copies values through untouched and keeps the residual 0.
#pragma once

#include <cstddef>

#include "quantize/quantizer_config.h"

namespace gradagg {

class Quantizer {
 public:
  explicit Quantizer(const QuantizerConfig& config);  // throws std::invalid_argument for a bad config

  const QuantizerConfig& config() const { return config_; }

  // Wire bytes of `count` elements that start on a bucket boundary.
  size_t WireBytes(size_t count) const;

  // Encodes `count` elements that start on a bucket boundary into WireBytes(count) bytes at `wire`
  // (4-byte aligned). With a residual (error feedback) v = values + residual and the residual becomes
  // v - decode(code); with residual == nullptr, v = values.
  void Encode(const float* values, float* residual, size_t count, void* wire) const;

  // out[i] = decode(i).
  void Decode(const void* wire, size_t count, float* out) const;

  // accumulator[i] = accumulator[i] + decode(i), one float32 rounding each.
  void DecodeAccumulate(const void* wire, size_t count, float* accumulator) const;

 private:
  template <typename Emit>
  void DecodeWith(const void* wire, size_t count, Emit emit) const;

  QuantizerConfig config_;
};

}  // namespace gradagg
