#include "quantize/quantizer.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "quantize/canonical_sum.h"
#include "quantize/wire_format.h"

namespace gradagg {
namespace {

// Ranges narrower than this decode every element to the lower end (DESIGN.md).
constexpr float kMinRange = 1e-36f;
constexpr float kClipStddevs = 4.0f;

float LoadFloat(const unsigned char* p) {
  float value;
  std::memcpy(&value, p, sizeof value);
  return value;
}

uint32_t LoadWord(const unsigned char* p) {
  uint32_t value;
  std::memcpy(&value, p, sizeof value);
  return value;
}

void StoreFloat(unsigned char* p, float value) { std::memcpy(p, &value, sizeof value); }
void StoreWord(unsigned char* p, uint32_t value) { std::memcpy(p, &value, sizeof value); }

// How a bucket's codes turn back into values, derived from the two header floats only, so that the encoder's
// residual and every receiver's decode agree bit for bit.
struct BucketDecoder {
  int bits;
  float first;   // 1 bit: value of bit 0; else the lower end of the range
  float second;  // 1 bit: value of bit 1; else the upper end
  float step = 0.0f;
  bool degenerate = false;

  BucketDecoder(int codeBits, float headerFirst, float headerSecond)
      : bits(codeBits), first(headerFirst), second(headerSecond) {
    if (bits == 1) return;
    const float range = second - first;
    const float levels = static_cast<float>((1u << bits) - 1);
    degenerate = range < kMinRange;
    step = range / levels;
  }

  float operator()(uint32_t code) const {
    if (bits == 1) return code != 0 ? second : first;
    if (degenerate) return first;
    return first + (static_cast<float>(code) + 0.5f) * step;
  }
};

template <bool kWithResidual>
void EncodeBucket(const QuantizerConfig& config, const float* values, float* residual, size_t length,
                  unsigned char* out) {
  auto v = [&](size_t i) { return kWithResidual ? values[i] + residual[i] : values[i]; };
  const float count = static_cast<float>(length);
  const int bits = config.bits;

  // 1. Statistics: the two header floats, and the threshold of a 1-bit code.
  float first;
  float second;
  float threshold = 0.0f;
  if (bits == 1 && config.threshold == OneBitThreshold::kZero) {
    size_t upperCount = 0;
    for (size_t i = 0; i < length; ++i) upperCount += v(i) >= 0.0f ? 1 : 0;
    const size_t lowerCount = length - upperCount;
    const float lowerSum = CanonicalSum(length, [&](size_t i) { return v(i) >= 0.0f ? 0.0f : v(i); });
    const float upperSum = CanonicalSum(length, [&](size_t i) { return v(i) >= 0.0f ? v(i) : 0.0f; });
    // A side with no values counts as one value of 0, so an all-zero bucket decodes to 0.
    first = lowerCount != 0 ? lowerSum / static_cast<float>(lowerCount) : 0.0f;
    second = upperCount != 0 ? upperSum / static_cast<float>(upperCount) : 0.0f;
  } else if (bits == 1) {
    const float mean = CanonicalSum(length, v) / count;
    const float deviation = CanonicalSum(length, [&](size_t i) { return std::fabs(v(i) - mean); }) / count;
    threshold = mean;
    first = mean - deviation;
    second = mean + deviation;
  } else {
    const float meanSquare = CanonicalSum(length, [&](size_t i) { return v(i) * v(i); }) / count;
    const float stddev = std::sqrt(meanSquare);
    first = -kClipStddevs * stddev;
    second = kClipStddevs * stddev;
  }
  StoreFloat(out, first);
  StoreFloat(out + sizeof(float), second);
  const BucketDecoder decode(bits, first, second);

  // 2. Codes, and 3. the residual each code leaves behind.
  const uint32_t maxCode = (1u << bits) - 1;
  const float levels = static_cast<float>(maxCode);
  const float codeScale = levels / (second - first);
  const size_t perWord = 32 / static_cast<size_t>(bits);
  unsigned char* words = out + kBucketHeaderBytes;
  for (size_t wordStart = 0; wordStart < length; wordStart += perWord) {
    const size_t wordEnd = std::min(length, wordStart + perWord);
    uint32_t word = 0;
    for (size_t i = wordStart; i < wordEnd; ++i) {
      const float x = v(i);
      uint32_t code;
      if (bits == 1) {
        code = x >= threshold ? 1u : 0u;
      } else if (decode.degenerate) {
        code = 0;
      } else {
        const float clipped = x < first ? first : (x > second ? second : x);  // NaN stays NaN
        const float scaled = (clipped - first) * codeScale;
        code = scaled >= 0.0f ? (scaled < levels ? static_cast<uint32_t>(scaled) : maxCode) : 0u;  // NaN -> 0
      }
      word |= code << ((i - wordStart) * static_cast<size_t>(bits));
      if (kWithResidual) residual[i] = x - decode(code);
    }
    StoreWord(words + kCodeWordBytes * (wordStart / perWord), word);
  }
}

}  // namespace

Quantizer::Quantizer(const QuantizerConfig& config) : config_(config) { ValidateQuantizerConfig(config_); }

size_t Quantizer::WireBytes(size_t count) const { return gradagg::WireBytes(count, config_.bucketSize, config_.bits); }

void Quantizer::Encode(const float* values, float* residual, size_t count, void* wire) const {
  auto* out = static_cast<unsigned char*>(wire);
  if (config_.bits == kRawBits) {
    for (size_t i = 0; i < count; ++i) {
      StoreFloat(out + sizeof(float) * i, residual != nullptr ? values[i] + residual[i] : values[i]);
    }
    if (residual != nullptr) std::fill(residual, residual + count, 0.0f);
    return;
  }
  for (size_t start = 0; start < count; start += config_.bucketSize) {
    const size_t length = std::min(config_.bucketSize, count - start);
    if (residual != nullptr) {
      EncodeBucket<true>(config_, values + start, residual + start, length, out);
    } else {
      EncodeBucket<false>(config_, values + start, nullptr, length, out);
    }
    out += BucketWireBytes(length, config_.bits);
  }
}

template <typename Emit>
void Quantizer::DecodeWith(const void* wire, size_t count, Emit emit) const {
  const auto* in = static_cast<const unsigned char*>(wire);
  const int bits = config_.bits;
  if (bits == kRawBits) {
    for (size_t i = 0; i < count; ++i) emit(i, LoadFloat(in + sizeof(float) * i));
    return;
  }
  const size_t perWord = 32 / static_cast<size_t>(bits);
  const uint32_t mask = (1u << bits) - 1;
  for (size_t start = 0; start < count; start += config_.bucketSize) {
    const size_t length = std::min(config_.bucketSize, count - start);
    const BucketDecoder decode(bits, LoadFloat(in), LoadFloat(in + sizeof(float)));
    const unsigned char* words = in + kBucketHeaderBytes;
    for (size_t wordStart = 0; wordStart < length; wordStart += perWord) {
      const uint32_t word = LoadWord(words + kCodeWordBytes * (wordStart / perWord));
      const size_t wordEnd = std::min(length, wordStart + perWord);
      for (size_t i = wordStart; i < wordEnd; ++i) {
        emit(start + i, decode((word >> ((i - wordStart) * static_cast<size_t>(bits))) & mask));
      }
    }
    in += BucketWireBytes(length, bits);
  }
}

void Quantizer::Decode(const void* wire, size_t count, float* out) const {
  DecodeWith(wire, count, [out](size_t i, float value) { out[i] = value; });
}

void Quantizer::DecodeAccumulate(const void* wire, size_t count, float* accumulator) const {
  DecodeWith(wire, count, [accumulator](size_t i, float value) { accumulator[i] += value; });
}

}  // namespace gradagg
