#include "quantize/quantizer_config.h"

#include <stdexcept>

namespace gradagg {

bool IsSupportedBits(int bits) { return bits == 1 || bits == 2 || bits == 4 || bits == 8 || bits == 32; }

std::string ToString(OneBitThreshold threshold) { return threshold == OneBitThreshold::kMean ? "mean" : "zero"; }

void ValidateQuantizerConfig(const QuantizerConfig& config) {
  if (!IsSupportedBits(config.bits)) {
    throw std::invalid_argument("bits must be 1, 2, 4, 8 or 32, not " + std::to_string(config.bits));
  }
  if (config.bucketSize == 0 || config.bucketSize > kMaxBucketSize) {
    throw std::invalid_argument("bucket size must be between 1 and " + std::to_string(kMaxBucketSize) + ", not " +
                                std::to_string(config.bucketSize));
  }
}

}  // namespace gradagg
