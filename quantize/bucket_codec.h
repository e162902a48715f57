// One bucket of the quantizer (quantizer.h), in the widest SIMD this CPU offers: Google Highway compiles
// bucket_codec.cc once per x86 target (SSSE3, SSE4, AVX2, AVX-512, and a portable fallback) and picks one at run
// time. Every target computes the same bits as the CUDA kernels: the canonical order of canonical_sum.h, one float32
// rounding per operation, no FMA.
#pragma once

#include <cstddef>
#include <cstdint>

#include "quantize/quantizer_config.h"

namespace gradagg {

// How a bucket is encoded: the code width (1, 2, 4 or 8), the 1-bit threshold rule and the 2-8-bit clip factor.
struct BucketRule {
  int bits = 1;
  OneBitThreshold threshold = OneBitThreshold::kZero;
  float clip = 0.0f;
};

// The encoder's working memory, reused bucket after bucket: v = values + residual, `length` elements.
struct BucketScratch {
  float* v = nullptr;
};

// Encodes values[0, length) into BucketWireBytes(length, rule.bits) bytes at `wire`. With a residual, encodes
// v = values + residual and sets residual = v - decode(code), except in a non-finite bucket, whose residual stays.
void EncodeBucket(const BucketRule& rule, const float* values, float* residual, size_t length,
                  const BucketScratch& scratch, unsigned char* wire);

// Decodes one bucket of `length` elements: out[i] = decode(i), or out[i] += decode(i) with `accumulate`.
// Returns whether the bucket is non-finite.
bool DecodeBucket(int bits, const unsigned char* wire, size_t length, float* out, bool accumulate);

// The SIMD target the codec runs on (for benchmarks and logs), e.g. "AVX3" or "AVX2".
const char* BucketCodecTarget();

}  // namespace gradagg
