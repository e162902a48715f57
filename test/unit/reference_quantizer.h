// A plain scalar restatement of docs/DESIGN.md's quantizer, kept apart from quantize/ so that the two can judge each
// other: one bucket at a time, one element at a time, codes packed bit by bit.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

namespace gradagg::test {

// docs/DESIGN.md's canonical order: lane (i / 4) % 32, each lane from +0 in increasing i, then a butterfly 16..1.
inline float ReferenceSum(const std::vector<float>& terms) {
  float lanes[32];
  for (float& lane : lanes) lane = 0.0f;
  for (size_t i = 0; i < terms.size(); ++i) {
    const size_t lane = (i / 4) % 32;
    lanes[lane] = lanes[lane] + terms[i];
  }
  for (int step = 16; step >= 1; step /= 2) {
    for (int k = 0; k < step; ++k) lanes[k] = lanes[k] + lanes[k + step];
  }
  return lanes[0];
}

struct ReferenceResult {
  std::vector<unsigned char> wire;
  std::vector<float> decoded;  // what a receiver decodes
};

// Encodes v (error feedback already added) with buckets of `bucket` elements; 2-8 bits clip at +-clip * s.
inline ReferenceResult ReferenceEncode(const std::vector<float>& v, int bits, size_t bucket, bool meanThreshold,
                                       float clip) {
  ReferenceResult out;
  auto pushFloat = [&](float x) {
    unsigned char bytes[4];
    std::memcpy(bytes, &x, 4);
    out.wire.insert(out.wire.end(), bytes, bytes + 4);
  };
  for (size_t start = 0; start < v.size(); start += bucket) {
    const size_t length = std::min(bucket, v.size() - start);
    std::vector<float> x(v.begin() + static_cast<long>(start), v.begin() + static_cast<long>(start + length));
    if (bits == 32) {
      for (float value : x) {
        pushFloat(value);
        out.decoded.push_back(value);
      }
      continue;
    }
    std::vector<uint32_t> codes(length);
    float first = 0.0f;
    float second = 0.0f;
    std::vector<float> decodedBucket(length);
    if (bits == 1 && !meanThreshold) {
      std::vector<float> lowTerms(length, 0.0f);
      std::vector<float> highTerms(length, 0.0f);
      size_t lowCount = 0;
      size_t highCount = 0;
      for (size_t i = 0; i < length; ++i) {
        if (x[i] >= 0.0f) {
          highTerms[i] = x[i];
          ++highCount;
          codes[i] = 1;
        } else {
          lowTerms[i] = x[i];
          ++lowCount;
          codes[i] = 0;
        }
      }
      first = lowCount > 0 ? ReferenceSum(lowTerms) / static_cast<float>(lowCount) : 0.0f;
      second = highCount > 0 ? ReferenceSum(highTerms) / static_cast<float>(highCount) : 0.0f;
      for (size_t i = 0; i < length; ++i) decodedBucket[i] = codes[i] ? second : first;
    } else if (bits == 1) {
      const float mean = ReferenceSum(x) / static_cast<float>(length);
      std::vector<float> deviations(length);
      for (size_t i = 0; i < length; ++i) deviations[i] = std::fabs(x[i] - mean);
      const float deviation = ReferenceSum(deviations) / static_cast<float>(length);
      first = mean - deviation;
      second = mean + deviation;
      for (size_t i = 0; i < length; ++i) {
        codes[i] = x[i] >= mean ? 1 : 0;
        decodedBucket[i] = codes[i] ? second : first;
      }
    } else {
      // L = 2^bits cells over [-c*s, +c*s]; each code decodes to its cell's midpoint.
      std::vector<float> squares(length);
      for (size_t i = 0; i < length; ++i) squares[i] = x[i] * x[i];
      const float s = std::sqrt(ReferenceSum(squares) / static_cast<float>(length));
      first = -clip * s;
      second = clip * s;
      const float range = second - first;
      const uint32_t top = (1u << bits) - 1;
      const float cells = static_cast<float>(1u << bits);
      for (size_t i = 0; i < length; ++i) {
        if (range < 1e-36f) {
          codes[i] = 0;
          decodedBucket[i] = 0.0f;
          continue;
        }
        float c = x[i];
        if (c < first) c = first;
        if (c > second) c = second;
        const float scaled = (c - first) * (cells / range);
        const float floored = std::floor(scaled);
        codes[i] = floored >= cells - 1.0f ? top : static_cast<uint32_t>(floored);
        decodedBucket[i] = first + (static_cast<float>(codes[i]) + 0.5f) * (range / cells);
      }
    }
    if (!std::isfinite(first) || !std::isfinite(second)) {  // a non-finite bucket: codes 0, decodes to first + second
      std::fill(codes.begin(), codes.end(), 0u);
      std::fill(decodedBucket.begin(), decodedBucket.end(), first + second);
    }
    pushFloat(first);
    pushFloat(second);
    const size_t words = (length * static_cast<size_t>(bits) + 31) / 32;
    std::vector<uint32_t> packed(words, 0);
    for (size_t i = 0; i < length; ++i) {
      for (int b = 0; b < bits; ++b) {
        const size_t bit = i * static_cast<size_t>(bits) + static_cast<size_t>(b);
        if ((codes[i] >> b) & 1u) packed[bit / 32] |= 1u << (bit % 32);
      }
    }
    for (uint32_t word : packed) {
      unsigned char bytes[4];
      std::memcpy(bytes, &word, 4);
      out.wire.insert(out.wire.end(), bytes, bytes + 4);
    }
    out.decoded.insert(out.decoded.end(), decodedBucket.begin(), decodedBucket.end());
  }
  return out;
}

}  // namespace gradagg::test
