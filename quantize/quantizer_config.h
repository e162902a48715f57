// What the quantizer needs to know: code width, bucket size and, for 1 bit, where the threshold sits.
#pragma once

#include <cstddef>
#include <string>

namespace gradagg {

// The 1-bit threshold rule (docs/DESIGN.md, Quantizer).
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
  // 2-8 bits: the range is [-clip * s, +clip * s], s = sqrt(mean(v^2)) of the bucket; 0 takes DefaultClip(bits).
  float clip = 0.0f;
};

// The clip factor of 2, 4 and 8 bits that measured closest to the optimal uniform quantizer on Gaussian data
// (bench/NOTES.md, section 8; gradagg_quantizer_error prints the table).
float DefaultClip(int bits);
// config.clip, or DefaultClip(config.bits) where it is 0.
float ClipOf(const QuantizerConfig& config);

// Throws std::invalid_argument naming the bad field.
void ValidateQuantizerConfig(const QuantizerConfig& config);

bool IsSupportedBits(int bits);
std::string ToString(OneBitThreshold threshold);

}  // namespace gradagg
