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

// Ranges narrower than this decode every element to 0 (docs/DESIGN.md).
constexpr float kMinRange = 1e-36f;
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

  bool finite() const { return std::isfinite(first) && std::isfinite(second); }
  // What every element of a non-finite bucket decodes to: NaN, or an Inf of the overflowing side.
  float nonFinite() const { return first + second; }
};

// How codes of 2-8 bits decode, derived from the header floats only, so that the encoder's residual and every
// receiver's decode agree bit for bit: the midpoint lower + (code + 0.5) * step of one of L = 2^bits cells, or 0 for
// a degenerate range.
struct RangeDecoder {
  float lower;
  float step;
  bool degenerate;

  RangeDecoder(int bits, BucketHeader header)
      : lower(header.first),
        step((header.second - header.first) / static_cast<float>(1u << bits)),
        degenerate(header.second - header.first < kMinRange) {}

  float operator()(uint32_t code) const { return degenerate ? 0.0f : lower + (static_cast<float>(code) + 0.5f) * step; }
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

BucketHeader RangeHeader(const float* v, size_t length, float clip) {
  const float meanSquare = CanonicalSum(length, [v](size_t i) { return v[i] * v[i]; }) / static_cast<float>(length);
  const float stddev = std::sqrt(meanSquare);
  return {-clip * stddev, clip * stddev};
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
  const float cells = static_cast<float>(1u << bits);
  const float lower = header.first;
  const float upper = header.second;
  const float codeScale = cells / (upper - lower);
  for (size_t i = 0; i < length; ++i) {
    // Branch-free (minss/maxss): at 2 bits some 5% of Gaussian values lie outside the range, and a branch
    // mispredicts on them. Values here are finite (non-finite buckets never get here), so it equals the comparisons.
    const float clipped = std::min(std::max(v[i], lower), upper);
    const float scaled = (clipped - lower) * codeScale;
    // floor for scaled in [0, L); the top cell at the upper end. Through int32, which SSE2 converts in one vector
    // instruction (codes are below 256).
    const int32_t floored = static_cast<int32_t>(scaled >= 0.0f && scaled < cells ? scaled : 0.0f);
    const uint32_t code = scaled >= cells ? maxCode : static_cast<uint32_t>(floored);
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
      StoreFloat(out + sizeof(float) * i, residual != nullptr ? values[i] + residual[i] : values[i]);
    }
    if (residual != nullptr) std::fill(residual, residual + count, 0.0f);
    return;
  }
  const size_t scratchLength = std::min(layout.bucketSize(), count);
  std::vector<float> withResidual(residual != nullptr ? scratchLength : 0);
  std::vector<uint32_t> codes(bits > 1 ? scratchLength : 0);
  layout.ForEachBucket([&](size_t start, size_t length) {
    // v = values + residual, once per bucket.
    const float* v = values + start;
    float* bucketResidual = residual != nullptr ? residual + start : nullptr;
    if (bucketResidual != nullptr) {
      for (size_t i = 0; i < length; ++i) withResidual[i] = v[i] + bucketResidual[i];
      v = withResidual.data();
    }
    float threshold = 0.0f;
    const BucketHeader header =
        bits > 1 ? RangeHeader(v, length, clip_)
                 : (config_.threshold == OneBitThreshold::kZero ? ZeroThresholdHeader(v, length)
                                                                : MeanThresholdHeader(v, length, &threshold));
    StoreFloat(out, header.first);
    StoreFloat(out + sizeof(float), header.second);
    unsigned char* words = out + kBucketHeaderBytes;
    const size_t bucketBytes = BucketWireBytes(length, bits);
    out += bucketBytes;
    if (!header.finite()) {  // all codes 0; the residual keeps its value
      std::memset(words, 0, bucketBytes - kBucketHeaderBytes);
    } else if (bits == 1) {
      WriteOneBitCodes(v, length, threshold, header, words, bucketResidual);
    } else {
      WriteRangeCodes(v, length, bits, header, words, bucketResidual, codes.data());
    }
  });
}

template <typename Emit>
size_t Quantizer::DecodeWith(const void* wire, const BucketLayout& layout, Emit emit) const {
  const auto* in = static_cast<const unsigned char*>(wire);
  const int bits = config_.bits;
  if (bits == kRawBits) {
    for (size_t i = 0; i < layout.elements(); ++i) emit(i, LoadFloat(in + sizeof(float) * i));
    return 0;
  }
  const size_t perWord = kWordBits / static_cast<size_t>(bits);
  const uint32_t mask = (1u << bits) - 1;
  size_t nonFinite = 0;
  // Every code's value, once per bucket: a table of 2^bits entries, each computed exactly as the encoder did.
  float table[256];
  layout.ForEachBucket([&](size_t start, size_t length) {
    const BucketHeader header{LoadFloat(in), LoadFloat(in + sizeof(float))};
    if (!header.finite()) {
      ++nonFinite;
      std::fill(table, table + mask + 1, header.nonFinite());
    } else if (bits == 1) {
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
  });
  return nonFinite;
}

size_t Quantizer::Decode(const void* wire, const BucketLayout& layout, float* out) const {
  return DecodeWith(wire, layout, [out](size_t i, float value) { out[i] = value; });
}

size_t Quantizer::DecodeAccumulate(const void* wire, const BucketLayout& layout, float* accumulator) const {
  return DecodeWith(wire, layout, [accumulator](size_t i, float value) { accumulator[i] += value; });
}

}  // namespace gradagg
