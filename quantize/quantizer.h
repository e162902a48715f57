// The bucket quantizer of docs/DESIGN.md on the CPU: encode with error feedback, decode, decode-and-accumulate.
//
// Per bucket (bucket_layout.h: buckets never span two segments), on v = values + residual:
//   1. statistics in the canonical order (canonical_sum.h): the two 1-bit decode values, or the range
//      [-c*s, +c*s] with s = sqrt(mean(v^2)) and c the clip factor of the bit width;
//   2. codes, packed as wire_format.h says, after the two header floats: code = floor((v - lower) * L / range)
//      clamped to [0, L-1], L = 2^bits cells, each decoding to its midpoint, inside the range;
//   3. residual = v - decode(code), computed from the header floats exactly as a receiver decodes them.
// Arithmetic is float32 with one rounding per operation, so the CUDA kernels can reproduce every bit.
//
// Non-finite buckets: where v holds a NaN or Inf (so the statistics are not finite; at 2-8 bits also values whose
// squares overflow float32, beyond about 1e19), the header floats carry the non-finite statistics, every code is 0,
// the residual keeps its value from before the call, and every element decodes to first + second (NaN or Inf).
// The decodes return how many such buckets they met. Bits 32 copies values through untouched (non-finite ones too)
// and keeps the residual 0.
#pragma once

#include <cstddef>

#include "quantize/bucket_layout.h"
#include "quantize/quantizer_config.h"

namespace gradagg {

class Quantizer {
 public:
  explicit Quantizer(const QuantizerConfig& config);  // throws std::invalid_argument for a bad config

  const QuantizerConfig& config() const { return config_; }
  // A run of `count` elements that is one segment (the buckets of config().bucketSize from its start).
  BucketLayout Uniform(size_t count) const { return BucketLayout::Uniform(count, config_.bucketSize); }

  size_t WireBytes(const BucketLayout& layout) const;

  // Encodes the run into WireBytes(layout) bytes at `wire` (4-byte aligned). With a residual (error feedback)
  // v = values + residual and the residual becomes v - decode(code), except in non-finite buckets; with
  // residual == nullptr, v = values.
  void Encode(const float* values, float* residual, const BucketLayout& layout, void* wire) const;

  // out[i] = decode(i). Returns the number of non-finite buckets.
  size_t Decode(const void* wire, const BucketLayout& layout, float* out) const;

  // accumulator[i] = accumulator[i] + decode(i), one float32 rounding each. Returns the number of non-finite buckets.
  size_t DecodeAccumulate(const void* wire, const BucketLayout& layout, float* accumulator) const;

  // The same on a run of one segment.
  size_t WireBytes(size_t count) const { return WireBytes(Uniform(count)); }
  void Encode(const float* values, float* residual, size_t count, void* wire) const {
    Encode(values, residual, Uniform(count), wire);
  }
  size_t Decode(const void* wire, size_t count, float* out) const { return Decode(wire, Uniform(count), out); }
  size_t DecodeAccumulate(const void* wire, size_t count, float* accumulator) const {
    return DecodeAccumulate(wire, Uniform(count), accumulator);
  }

 private:
  size_t DecodeInto(const void* wire, const BucketLayout& layout, float* out, bool accumulate) const;

  QuantizerConfig config_;
  float clip_;
};

}  // namespace gradagg
