// Inputs shared by the CPU and GPU quantizer tests: reproducible normal values and the config for a mode.
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

#include "quantize/quantizer_config.h"

namespace gradagg::test {

inline std::vector<float> RandomNormal(size_t count, uint32_t seed, float scale = 1.0f) {
  std::mt19937 generator(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> values(count);
  for (float& v : values) v = normal(generator);
  return values;
}

inline QuantizerConfig QuantizerConfigFor(int bits, size_t bucket, bool meanThreshold) {
  QuantizerConfig config;
  config.bits = bits;
  config.bucketSize = bucket;
  config.threshold = meanThreshold ? OneBitThreshold::kMean : OneBitThreshold::kZero;
  return config;
}

}  // namespace gradagg::test
