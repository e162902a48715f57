#include "quantize/quantizer_config.h"

#include <stdexcept>

namespace gradagg {

bool IsSupportedBits(int bits) { return bits == 1 || bits == 2 || bits == 4 || bits == 8 || bits == 32; }

float DefaultClip(int bits) {
  switch (bits) {
    case 2:
      return 2.0f;
    case 4:
      return 2.7f;
    case 8:
      return 4.0f;
    default:
      return 0.0f;  // 1 and 32 bits have no range
  }
}

float ClipOf(const QuantizerConfig& config) { return config.clip != 0.0f ? config.clip : DefaultClip(config.bits); }

std::string ToString(OneBitThreshold threshold) { return threshold == OneBitThreshold::kMean ? "mean" : "zero"; }

void ValidateQuantizerConfig(const QuantizerConfig& config) {
  if (!IsSupportedBits(config.bits)) {
    throw std::invalid_argument("bits must be 1, 2, 4, 8 or 32, not " + std::to_string(config.bits));
  }
  if (config.bucketSize == 0 || config.bucketSize > kMaxBucketSize) {
    throw std::invalid_argument("bucket size must be between 1 and " + std::to_string(kMaxBucketSize) + ", not " +
                                std::to_string(config.bucketSize));
  }
  if (!(config.clip == 0.0f || (config.clip >= 0.5f && config.clip <= 64.0f))) {
    throw std::invalid_argument("clip factor must be 0 (the default) or between 0.5 and 64, not " +
                                std::to_string(config.clip));
  }
}

}  // namespace gradagg
