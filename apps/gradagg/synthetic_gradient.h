// Reproducible gradients for the benchmark: a counter-based generator, so any rank can produce any rank's values.
#pragma once

#include <cstddef>
#include <cstdint>

namespace gradagg::cli {

inline uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Values uniform in [-1, 1) on a 2^-23 grid, different for every (seed, rank, step).
inline void FillSyntheticGradient(float* out, size_t count, uint64_t seed, int rank, int step) {
  const uint64_t stream =
      SplitMix64(seed ^ SplitMix64((static_cast<uint64_t>(rank) << 32) ^ static_cast<uint64_t>(step)));
  for (size_t i = 0; i < count; ++i) {
    const uint64_t bits = SplitMix64(stream + i) >> 40;  // 24 random bits
    out[i] = static_cast<float>(bits) * (1.0f / 8388608.0f) - 1.0f;
  }
}

}  // namespace gradagg::cli
