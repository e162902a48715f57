#include "quantize/quantizer.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "quantize/canonical_sum.h"
#include "quantize/wire_format.h"

namespace gradagg {
namespace {

// Ranges narrower than this decode every element to the lower end (DESIGN.md).
constexpr float kMinRange = 1e-36f;
constexpr float kClipStddevs = 4.0f;
constexpr size_t kWordBits = 32;

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

// The two header floats of a bucket.
struct BucketHeader {
  float first;   // 1 bit: value of bit 0; else the lower end of the range
  float second;  // 1 bit: value of bit 1; else the upper end
};

// How codes of 2-8 bits decode, derived from the header floats only, so that the encoder's residual and every
// receiver's decode agree bit for bit: lower + (code + 0.5) * step, or lower for a degenerate range.
struct RangeDecoder {
  float lower;
  float step;
  bool degenerate;

  RangeDecoder(int bits, BucketHeader header)
      : lower(header.first),
        step((header.second - header.first) / static_cast<float>((1u << bits) - 1)),
        degenerate(header.second - header.first < kMinRange) {}

  float operator()(uint32_t code) const {
    return degenerate ? lower : lower + (static_cast<float>(code) + 0.5f) * step;
  }
};

// --- 1. Statistics, each over the bucket's values v in the canonical order.

BucketHeader ZeroThresholdHeader(const float* v, size_t length) {
  size_t upperCount = 0;
  for (size_t i = 0; i < length; ++i) upperCount += v[i] >= 0.0f ? 1 : 0;
  const size_t lowerCount = length - upperCount;
  const float lowerSum = CanonicalSum(length, [v](size_t i) { return v[i] >= 0.0f ? 0.0f : v[i]; });
  const float upperSum = CanonicalSum(length, [v](size_t i) { return v[i] >= 0.0f ? v[i] : 0.0f; });
  // A side with no values counts as one value of 0, so an all-zero bucket decodes to 0.
  return {lowerCount != 0 ? lowerSum / static_cast<float>(lowerCount) : 0.0f,
          upperCount != 0 ? upperSum / static_cast<float>(upperCount) : 0.0f};
}

BucketHeader MeanThresholdHeader(const float* v, size_t length, float* mean) {
  const float count = static_cast<float>(length);
  *mean = CanonicalSum(length, [v](size_t i) { return v[i]; }) / count;
  const float m = *mean;
  const float deviation = CanonicalSum(length, [v, m](size_t i) { return std::fabs(v[i] - m); }) / count;
  return {m - deviation, m + deviation};
}

BucketHeader RangeHeader(const float* v, size_t length) {
  const float meanSquare = CanonicalSum(length, [v](size_t i) { return v[i] * v[i]; }) / static_cast<float>(length);
  const float stddev = std::sqrt(meanSquare);
  return {-kClipStddevs * stddev, kClipStddevs * stddev};
}

// --- 2. Codes and 3. residuals.

void WriteOneBitCodes(const float* v, size_t length, float threshold, BucketHeader header, unsigned char* words,
                      float* residual) {
  if (residual != nullptr) {
    for (size_t i = 0; i < length; ++i) residual[i] = v[i] - (v[i] >= threshold ? header.second : header.first);
  }
  for (size_t wordStart = 0; wordStart < length; wordStart += kWordBits) {
    const size_t wordLength = std::min(kWordBits, length - wordStart);
    uint32_t word = 0;
    for (size_t j = 0; j < wordLength; ++j) word |= (v[wordStart + j] >= threshold ? 1u : 0u) << j;
    StoreWord(words + kCodeWordBytes * (wordStart / kWordBits), word);
  }
}

void WriteRangeCodes(const float* v, size_t length, int bits, BucketHeader header, unsigned char* words,
                     float* residual, uint32_t* codes) {
  const RangeDecoder decode(bits, header);
  const uint32_t maxCode = (1u << bits) - 1;
  const float levels = static_cast<float>(maxCode);
  const float lower = header.first;
  const float upper = header.second;
  const float codeScale = levels / (upper - lower);
  for (size_t i = 0; i < length; ++i) {
    const float clipped = v[i] < lower ? lower : (v[i] > upper ? upper : v[i]);  // NaN stays NaN
    const float scaled = (clipped - lower) * codeScale;
    // floor for scaled in [0, levels); the top code at the upper end; NaN -> 0. Through int32, which SSE2
    // converts in one vector instruction (codes are below 256).
    const int32_t floored = static_cast<int32_t>(scaled >= 0.0f && scaled < levels ? scaled : 0.0f);
    const uint32_t code = scaled >= levels ? maxCode : static_cast<uint32_t>(floored);
    codes[i] = decode.degenerate ? 0u : code;
  }
  if (residual != nullptr) {
    for (size_t i = 0; i < length; ++i) residual[i] = v[i] - decode(codes[i]);
  }
  const size_t perWord = kWordBits / static_cast<size_t>(bits);
  for (size_t wordStart = 0; wordStart < length; wordStart += perWord) {
    const size_t wordLength = std::min(perWord, length - wordStart);
    uint32_t word = 0;
    for (size_t j = 0; j < wordLength; ++j) word |= codes[wordStart + j] << (j * static_cast<size_t>(bits));
    StoreWord(words + kCodeWordBytes * (wordStart / perWord), word);
  }
}

}  // namespace

Quantizer::Quantizer(const QuantizerConfig& config) : config_(config) { ValidateQuantizerConfig(config_); }

size_t Quantizer::WireBytes(size_t count) const { return gradagg::WireBytes(count, config_.bucketSize, config_.bits); }

void Quantizer::Encode(const float* values, float* residual, size_t count, void* wire) const {
  auto* out = static_cast<unsigned char*>(wire);
  const int bits = config_.bits;
  if (bits == kRawBits) {
    for (size_t i = 0; i < count; ++i) {
      StoreFloat(out + sizeof(float) * i, residual != nullptr ? values[i] + residual[i] : values[i]);
    }
    if (residual != nullptr) std::fill(residual, residual + count, 0.0f);
    return;
  }
  const size_t scratchLength = std::min(config_.bucketSize, count);
  std::vector<float> withResidual(residual != nullptr ? scratchLength : 0);
  std::vector<uint32_t> codes(bits > 1 ? scratchLength : 0);
  for (size_t start = 0; start < count; start += config_.bucketSize) {
    const size_t length = std::min(config_.bucketSize, count - start);
    // v = values + residual, once per bucket.
    const float* v = values + start;
    float* bucketResidual = residual != nullptr ? residual + start : nullptr;
    if (bucketResidual != nullptr) {
      for (size_t i = 0; i < length; ++i) withResidual[i] = v[i] + bucketResidual[i];
      v = withResidual.data();
    }
    BucketHeader header;
    if (bits == 1) {
      float threshold = 0.0f;
      header = config_.threshold == OneBitThreshold::kZero ? ZeroThresholdHeader(v, length)
                                                           : MeanThresholdHeader(v, length, &threshold);
      WriteOneBitCodes(v, length, threshold, header, out + kBucketHeaderBytes, bucketResidual);
    } else {
      header = RangeHeader(v, length);
      WriteRangeCodes(v, length, bits, header, out + kBucketHeaderBytes, bucketResidual, codes.data());
    }
    StoreFloat(out, header.first);
    StoreFloat(out + sizeof(float), header.second);
    out += BucketWireBytes(length, bits);
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
  const size_t perWord = kWordBits / static_cast<size_t>(bits);
  const uint32_t mask = (1u << bits) - 1;
  // Every code's value, once per bucket: a table of 2^bits entries, each computed exactly as the encoder did.
  float table[256];
  for (size_t start = 0; start < count; start += config_.bucketSize) {
    const size_t length = std::min(config_.bucketSize, count - start);
    const BucketHeader header{LoadFloat(in), LoadFloat(in + sizeof(float))};
    if (bits == 1) {
      table[0] = header.first;
      table[1] = header.second;
    } else {
      const RangeDecoder decode(bits, header);
      for (uint32_t code = 0; code <= mask; ++code) table[code] = decode(code);
    }
    const unsigned char* words = in + kBucketHeaderBytes;
    for (size_t wordStart = 0; wordStart < length; wordStart += perWord) {
      const uint32_t word = LoadWord(words + kCodeWordBytes * (wordStart / perWord));
      const size_t wordLength = std::min(perWord, length - wordStart);
      for (size_t j = 0; j < wordLength; ++j) {
        emit(start + wordStart + j, table[(word >> (j * static_cast<size_t>(bits))) & mask]);
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
