#include "quantize/quantizer.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "quantize/bucket_codec.h"
#include "quantize/wire_format.h"

namespace gradagg {

Quantizer::Quantizer(const QuantizerConfig& config) : config_(config), clip_(0.0f) {
  ValidateQuantizerConfig(config_);
  clip_ = ClipOf(config_);
}

size_t Quantizer::WireBytes(const BucketLayout& layout) const { return gradagg::WireBytes(layout, config_.bits); }

void Quantizer::Encode(const float* values, float* residual, const BucketLayout& layout, void* wire) const {
  auto* out = static_cast<unsigned char*>(wire);
  const int bits = config_.bits;
  const size_t count = layout.elements();
  if (bits == kRawBits) {
    for (size_t i = 0; i < count; ++i) {
      const float value = residual != nullptr ? values[i] + residual[i] : values[i];
      std::memcpy(out + sizeof(float) * i, &value, sizeof value);
    }
    if (residual != nullptr) std::fill(residual, residual + count, 0.0f);
    return;
  }
  const BucketRule rule{bits, config_.threshold, clip_};
  const size_t scratchLength = std::min(layout.bucketSize(), count);
  std::vector<float> withResidual(residual != nullptr ? scratchLength : 0);
  const BucketScratch scratch{withResidual.data()};
  layout.ForEachBucket([&](size_t start, size_t length) {
    EncodeBucket(rule, values + start, residual != nullptr ? residual + start : nullptr, length, scratch, out);
    out += BucketWireBytes(length, bits);
  });
}

size_t Quantizer::DecodeInto(const void* wire, const BucketLayout& layout, float* out, bool accumulate) const {
  const auto* in = static_cast<const unsigned char*>(wire);
  const int bits = config_.bits;
  if (bits == kRawBits) {
    if (!accumulate) {
      if (layout.elements() > 0) std::memcpy(out, in, sizeof(float) * layout.elements());
      return 0;
    }
    for (size_t i = 0; i < layout.elements(); ++i) {
      float value;
      std::memcpy(&value, in + sizeof(float) * i, sizeof value);
      out[i] += value;
    }
    return 0;
  }
  size_t nonFinite = 0;
  layout.ForEachBucket([&](size_t start, size_t length) {
    nonFinite += DecodeBucket(bits, in, length, out + start, accumulate) ? 1 : 0;
    in += BucketWireBytes(length, bits);
  });
  return nonFinite;
}

size_t Quantizer::Decode(const void* wire, const BucketLayout& layout, float* out) const {
  return DecodeInto(wire, layout, out, false);
}

size_t Quantizer::DecodeAccumulate(const void* wire, const BucketLayout& layout, float* accumulator) const {
  return DecodeInto(wire, layout, accumulator, true);
}

}  // namespace gradagg
