// What the quantizer needs to know: code width, bucket size and, for 1 bit, where the threshold sits.
#pragma once

#include <cstddef>
#include <string>

namespace gradagg {

// The 1-bit threshold rule (DESIGN.md, Quantizer).
enum class OneBitThreshold {
  kZero,  // bit = (v >= 0); decodes to the means of the negative and the non-negative values
  kMean,  // bit = (v >= m), m the bucket mean; decodes to m -/+ the mean absolute deviation from m
};

inline constexpr size_t kDefaultBucketSize = 512;
// Bucket lengths stay exactly representable as float32, so a mean is one rounding of sum / length.
inline constexpr size_t kMaxBucketSize = size_t{1} << 24;

struct QuantizerConfig {
  int bits = 1;  // 1, 2, 4, 8, or 32 (raw floats, no quantization)
  size_t bucketSize = kDefaultBucketSize;
  OneBitThreshold threshold = OneBitThreshold::kZero;
};

// Throws std::invalid_argument naming the bad field.
void ValidateQuantizerConfig(const QuantizerConfig& config);

bool IsSupportedBits(int bits);
std::string ToString(OneBitThreshold threshold);

}  // namespace gradagg
