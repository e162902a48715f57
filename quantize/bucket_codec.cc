// The bucket codec of bucket_codec.h, written once over Highway's vectors. hwy/foreach_target.h includes this file
// again for every target; HWY_DYNAMIC_DISPATCH picks the best one the CPU supports at run time.
//
// Vectors hold N = 1 to 16 consecutive elements (the widths that divide the canonical sum's 32 lanes); the few
// elements past a bucket's last whole vector go through the same code on one-lane vectors. Arithmetic is one float32
// rounding per operation in the order docs/DESIGN.md gives (this target is compiled with -ffp-contract=off, so no
// multiply and add are fused).
#include "quantize/bucket_codec.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "quantize/canonical_sum.h"
#include "quantize/wire_format.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "quantize/bucket_codec.cc"
#include "hwy/cache_control.h"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace gradagg {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

constexpr size_t kMaxLanes = 16;
using D = hn::CappedTag<float, kMaxLanes>;  // the main vectors
using D1 = hn::CappedTag<float, 1>;         // one element: the tails
constexpr size_t kWordBits = 32;
constexpr float kMinRange = 1e-36f;  // narrower ranges decode every element to 0 (docs/DESIGN.md)

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

// The two header floats of a bucket: 1 bit, the values of bit 0 and bit 1; 2-8 bits, the ends of the range.
struct Header {
  float first;
  float second;

  bool finite() const { return std::isfinite(first) && std::isfinite(second); }
  float nonFinite() const { return first + second; }  // what a non-finite bucket decodes to
};

// Codes of 2-8 bits, derived from the header floats only, as every receiver derives them: code k decodes to the
// midpoint lower + (k + 0.5) * step of one of 2^bits cells, or to 0 for a degenerate range.
struct RangeCoder {
  float lower;
  float upper;
  float cells;
  float step;
  float codeScale;  // cells per unit: code = floor((v - lower) * codeScale)
  bool degenerate;

  RangeCoder(int bits, Header header)
      : lower(header.first),
        upper(header.second),
        cells(static_cast<float>(1u << bits)),
        step((header.second - header.first) / cells),
        codeScale(cells / (header.second - header.first)),
        degenerate(header.second - header.first < kMinRange) {}

  template <class DT, class VI>
  hn::Vec<DT> Decode(DT d, VI codes) const {
    if (degenerate) return hn::Zero(d);
    return hn::Set(d, lower) + (hn::ConvertTo(d, codes) + hn::Set(d, 0.5f)) * hn::Set(d, step);
  }
};

// --- Statistics.

// The canonical sum (canonical_sum.h) of term(d, x) over v[0, length). Each chunk of 4N elements is loaded
// de-interleaved, so x_c holds element c of N consecutive lanes' 4-element groups and those N lanes add x_0 .. x_3
// in turn. N divides 32, so a chunk never straddles a 128-element block and element i stays in lane (i % 128) / 4.
template <class Term>
float CanonicalSum(const float* HWY_RESTRICT v, size_t length, Term term) {
  constexpr size_t kBlock = kSumLanes * kLaneGroup;
  const D d;
  const size_t chunk = kLaneGroup * hn::Lanes(d);
  HWY_ALIGN float lanes[kSumLanes] = {};
  size_t i = 0;
  for (; i + chunk <= length; i += chunk) {
    hn::Vec<D> x0, x1, x2, x3;
    hn::LoadInterleaved4(d, v + i, x0, x1, x2, x3);
    float* lane = lanes + (i % kBlock) / kLaneGroup;
    hn::Store(hn::Load(d, lane) + term(d, x0) + term(d, x1) + term(d, x2) + term(d, x3), d, lane);
  }
  const D1 d1;
  for (; i < length; ++i) {
    float* lane = lanes + (i % kBlock) / kLaneGroup;
    hn::Store(hn::Load(d1, lane) + term(d1, hn::LoadU(d1, v + i)), d1, lane);
  }
  for (int step = kSumLanes / 2; step > 0; step /= 2) {
    for (int k = 0; k < step; ++k) lanes[k] += lanes[k + step];
  }
  return lanes[0];
}

size_t CountAtLeast(const float* HWY_RESTRICT v, size_t length, float threshold) {
  const D d;
  const D1 d1;
  const size_t n = hn::Lanes(d);
  size_t count = 0;
  size_t i = 0;
  for (; i + n <= length; i += n) count += hn::CountTrue(d, hn::LoadU(d, v + i) >= hn::Set(d, threshold));
  for (; i < length; ++i) count += hn::CountTrue(d1, hn::LoadU(d1, v + i) >= hn::Set(d1, threshold));
  return count;
}

Header ZeroThresholdHeader(const float* v, size_t length) {
  const size_t upperCount = CountAtLeast(v, length, 0.0f);
  const size_t lowerCount = length - upperCount;
  // NaN >= 0 is false: a NaN lands on the lower side, as in the scalar definition.
  const float lowerSum =
      CanonicalSum(v, length, [](auto d, auto x) { return hn::IfThenZeroElse(x >= hn::Zero(d), x); });
  const float upperSum =
      CanonicalSum(v, length, [](auto d, auto x) { return hn::IfThenElseZero(x >= hn::Zero(d), x); });
  // A side with no values counts as one value of 0, so an all-zero bucket decodes to 0.
  return {lowerCount != 0 ? lowerSum / static_cast<float>(lowerCount) : 0.0f,
          upperCount != 0 ? upperSum / static_cast<float>(upperCount) : 0.0f};
}

Header MeanThresholdHeader(const float* v, size_t length, float* mean) {
  const float count = static_cast<float>(length);
  const float m = CanonicalSum(v, length, [](auto, auto x) { return x; }) / count;
  const float deviation = CanonicalSum(v, length, [m](auto d, auto x) { return hn::Abs(x - hn::Set(d, m)); }) / count;
  *mean = m;
  return {m - deviation, m + deviation};
}

Header RangeHeader(const float* v, size_t length, float clip) {
  const float meanSquare = CanonicalSum(v, length, [](auto, auto x) { return x * x; }) / static_cast<float>(length);
  const float stddev = std::sqrt(meanSquare);
  return {-clip * stddev, clip * stddev};
}

// --- Codes and residuals.

// The mask's lanes as bits, lane 0 least significant.
template <class DT, class M>
uint32_t MaskBits(DT d, M mask) {
  uint8_t bytes[8] = {};
  hn::StoreMaskBits(d, mask, bytes);
  uint32_t bits;
  std::memcpy(&bits, bytes, sizeof bits);
  return bits;
}

// One vector of 1-bit codes: returns the bits, writes the residuals.
template <class DT>
uint32_t OneBitCodes(DT d, const float* v, float threshold, Header header, float* residual) {
  const auto x = hn::LoadU(d, v);
  const auto upper = x >= hn::Set(d, threshold);
  if (residual != nullptr) {
    hn::StoreU(x - hn::IfThenElse(upper, hn::Set(d, header.second), hn::Set(d, header.first)), d, residual);
  }
  return MaskBits(d, upper);
}

void WriteOneBitCodes(const float* v, size_t length, float threshold, Header header, unsigned char* words,
                      float* residual) {
  const D d;
  const D1 d1;
  const size_t n = hn::Lanes(d);
  for (size_t wordStart = 0; wordStart < length; wordStart += kWordBits) {
    const size_t wordEnd = std::min(wordStart + kWordBits, length);
    uint32_t word = 0;
    size_t i = wordStart;
    for (; i + n <= wordEnd; i += n) {
      word |= OneBitCodes(d, v + i, threshold, header, residual != nullptr ? residual + i : nullptr) << (i - wordStart);
    }
    for (; i < wordEnd; ++i) {
      word |= OneBitCodes(d1, v + i, threshold, header, residual != nullptr ? residual + i : nullptr)
              << (i - wordStart);
    }
    StoreWord(words + kCodeWordBytes * (wordStart / kWordBits), word);
  }
}

// One vector of 2-8-bit codes, returned, and their residuals. The clamp is branch-free (min/max; values here are
// finite), and floor goes through int32, which truncates: scaled is non-negative where it is used.
template <class DT>
auto RangeCodes(DT d, const float* v, const RangeCoder& coder, uint32_t maxCode, float* residual) {
  const hn::RebindToSigned<DT> di;
  const auto x = hn::LoadU(d, v);
  const auto cells = hn::Set(d, coder.cells);
  const auto lower = hn::Set(d, coder.lower);
  const auto clipped = hn::Min(hn::Max(x, lower), hn::Set(d, coder.upper));
  const auto scaled = (clipped - lower) * hn::Set(d, coder.codeScale);
  const auto inside = hn::And(scaled >= hn::Zero(d), scaled < cells);
  auto code = hn::ConvertTo(di, hn::IfThenElseZero(inside, scaled));
  code = hn::IfThenElse(hn::RebindMask(di, scaled >= cells), hn::Set(di, static_cast<int32_t>(maxCode)), code);
  if (coder.degenerate) code = hn::Zero(di);
  if (residual != nullptr) hn::StoreU(x - coder.Decode(d, code), d, residual);
  return code;
}

#if HWY_TARGET != HWY_SCALAR
// Packs a vector of N codes (N a multiple of 4, starting on a byte boundary) into N * kBits / 8 bytes: element e at
// bit e * kBits of the little-endian code words. Narrowed to bytes, then 2 or 4 neighbouring bytes merged into one.
template <int kBits, class DI, class VI>
void StorePacked(DI di, VI code, unsigned char* out) {
  const hn::Rebind<uint8_t, DI> d8;
  if constexpr (kBits == 8) {
    hn::StoreU(hn::DemoteTo(d8, code), d8, out);
  } else if constexpr (kBits == 4) {  // lanes c0 | c1 << 8 -> c0 | c1 << 4
    const hn::Repartition<int16_t, decltype(d8)> d16;
    const auto pairs = hn::BitCast(d16, hn::DemoteTo(d8, code));
    const auto packed =
        hn::Or(hn::And(pairs, hn::Set(d16, 0x000F)), hn::And(hn::ShiftRight<4>(pairs), hn::Set(d16, 0x00F0)));
    const hn::Rebind<uint8_t, decltype(d16)> dOut;
    hn::StoreU(hn::DemoteTo(dOut, packed), dOut, out);
  } else {  // lanes c0 | c1 << 8 | c2 << 16 | c3 << 24 -> c0 | c1 << 2 | c2 << 4 | c3 << 6
    const hn::Repartition<int32_t, decltype(d8)> d32;
    const auto quads = hn::BitCast(d32, hn::DemoteTo(d8, code));
    const auto packed =
        hn::Or(hn::Or(hn::And(quads, hn::Set(d32, 0x03)), hn::And(hn::ShiftRight<6>(quads), hn::Set(d32, 0x0C))),
               hn::Or(hn::And(hn::ShiftRight<12>(quads), hn::Set(d32, 0x30)),
                      hn::And(hn::ShiftRight<18>(quads), hn::Set(d32, 0xC0))));
    const hn::Rebind<uint8_t, decltype(d32)> dOut;
    hn::StoreU(hn::DemoteTo(dOut, packed), dOut, out);
  }
}
#endif

// Codes of kBits bits, packed as wire_format.h says: whole vectors packed in registers, then the last few elements
// one at a time into the zeroed bytes that remain (they start on a byte boundary: N is a multiple of 4).
template <int kBits>
void WriteRangeCodes(const float* v, size_t length, Header header, unsigned char* words, float* residual) {
  const D1 d1;
  const RangeCoder coder(kBits, header);
  const uint32_t maxCode = (1u << kBits) - 1;
  size_t i = 0;
#if HWY_TARGET != HWY_SCALAR
  const D d;
  const hn::RebindToSigned<D> di;
  const size_t n = hn::Lanes(d);
  for (; i + n <= length; i += n) {
    const auto code = RangeCodes(d, v + i, coder, maxCode, residual != nullptr ? residual + i : nullptr);
    StorePacked<kBits>(di, code, words + i * kBits / 8);
  }
#endif
  const size_t tailByte = i * kBits / 8;
  std::memset(words + tailByte, 0, BucketWireBytes(length, kBits) - kBucketHeaderBytes - tailByte);
  for (; i < length; ++i) {
    const auto code = RangeCodes(d1, v + i, coder, maxCode, residual != nullptr ? residual + i : nullptr);
    const size_t bit = i * kBits;
    words[bit / 8] =
        static_cast<unsigned char>(words[bit / 8] | (static_cast<uint32_t>(hn::GetLane(code)) << (bit % 8)));
  }
}

// A run's next bucket follows the current one in memory: start loading it while this one is worked on in L1 (the
// statistics passes leave memory idle otherwise). Harmless past the run's end: a prefetch never faults.
void PrefetchNextBucket(const float* bucket, size_t length) {
  if (bucket == nullptr) return;
  constexpr size_t kLineFloats = 64 / sizeof(float);
  for (size_t i = length; i < 2 * length; i += kLineFloats) hwy::Prefetch(bucket + i);
}

// v = values + residual.
void AddResidual(const float* values, const float* residual, size_t length, float* v) {
  const D d;
  const D1 d1;
  const size_t n = hn::Lanes(d);
  size_t i = 0;
  for (; i + n <= length; i += n) hn::StoreU(hn::LoadU(d, values + i) + hn::LoadU(d, residual + i), d, v + i);
  for (; i < length; ++i) hn::StoreU(hn::LoadU(d1, values + i) + hn::LoadU(d1, residual + i), d1, v + i);
}

void EncodeBucketOnTarget(const BucketRule& rule, const float* values, float* residual, size_t length,
                          const BucketScratch& scratch, unsigned char* wire) {
  PrefetchNextBucket(values, length);
  PrefetchNextBucket(residual, length);
  const float* v = values;
  if (residual != nullptr) {
    AddResidual(values, residual, length, scratch.v);
    v = scratch.v;
  }
  float threshold = 0.0f;
  const Header header = rule.bits > 1
                            ? RangeHeader(v, length, rule.clip)
                            : (rule.threshold == OneBitThreshold::kZero ? ZeroThresholdHeader(v, length)
                                                                        : MeanThresholdHeader(v, length, &threshold));
  StoreFloat(wire, header.first);
  StoreFloat(wire + sizeof(float), header.second);
  unsigned char* words = wire + kBucketHeaderBytes;
  if (!header.finite()) {  // every code 0; the residual keeps its value
    std::memset(words, 0, BucketWireBytes(length, rule.bits) - kBucketHeaderBytes);
  } else if (rule.bits == 1) {
    WriteOneBitCodes(v, length, threshold, header, words, residual);
  } else if (rule.bits == 2) {
    WriteRangeCodes<2>(v, length, header, words, residual);
  } else if (rule.bits == 4) {
    WriteRangeCodes<4>(v, length, header, words, residual);
  } else {
    WriteRangeCodes<8>(v, length, header, words, residual);
  }
}

// --- Decoding.

template <bool kAccumulate, class DT, class V>
void Emit(DT d, V value, float* out) {
  if constexpr (kAccumulate) {
    hn::StoreU(hn::LoadU(d, out) + value, d, out);
  } else {
    hn::StoreU(value, d, out);
  }
}

template <bool kAccumulate>
void EmitConstant(float value, size_t length, float* out) {
  const D d;
  const D1 d1;
  const size_t n = hn::Lanes(d);
  size_t i = 0;
  for (; i + n <= length; i += n) Emit<kAccumulate>(d, hn::Set(d, value), out + i);
  for (; i < length; ++i) Emit<kAccumulate>(d1, hn::Set(d1, value), out + i);
}

// Lane k of the result is bit k of `bits`.
template <class DT>
auto LanesOfBits(DT d, uint32_t bits) {
  const hn::RebindToUnsigned<DT> du;
  return hn::RebindMask(d, hn::TestBit(hn::Set(du, bits), hn::Set(du, 1u) << hn::Iota(du, 0)));
}

template <bool kAccumulate>
void DecodeOneBit(const unsigned char* words, size_t length, Header header, float* out) {
  const D d;
  const D1 d1;
  const size_t n = hn::Lanes(d);
  for (size_t wordStart = 0; wordStart < length; wordStart += kWordBits) {
    const size_t wordEnd = std::min(wordStart + kWordBits, length);
    const uint32_t word = LoadWord(words + kCodeWordBytes * (wordStart / kWordBits));
    size_t i = wordStart;
    for (; i + n <= wordEnd; i += n) {
      const auto upper = LanesOfBits(d, word >> (i - wordStart));
      Emit<kAccumulate>(d, hn::IfThenElse(upper, hn::Set(d, header.second), hn::Set(d, header.first)), out + i);
    }
    for (; i < wordEnd; ++i) {
      const auto upper = LanesOfBits(d1, word >> (i - wordStart));
      Emit<kAccumulate>(d1, hn::IfThenElse(upper, hn::Set(d1, header.second), hn::Set(d1, header.first)), out + i);
    }
  }
}

// Code of element e: it starts at bit e * bits of the little-endian code words (bits divides 8).
uint32_t CodeAt(const unsigned char* words, size_t e, int bits) {
  const size_t bit = e * static_cast<size_t>(bits);
  return (static_cast<uint32_t>(words[bit / 8]) >> (bit % 8)) & ((1u << bits) - 1);
}

// 8 bits: a byte per code, widened a vector at a time. 2 and 4 bits: 32 elements at a time (a whole number of
// words): the chunk's words are spread over the lanes by a table lookup and shifted per lane. The rest, and
// everything on one-lane vectors, one element at a time.
template <bool kAccumulate, int kBits>
void DecodeRange(const unsigned char* words, size_t length, Header header, float* out) {
  const D d;
  const D1 d1;
  const hn::RebindToSigned<D> di;
  const hn::RebindToSigned<D1> di1;
  const size_t n = hn::Lanes(d);
  const RangeCoder coder(kBits, header);
  size_t i = 0;
  if constexpr (kBits == 8) {  // one byte per code: widen them
    const hn::Rebind<uint8_t, D> d8;
    for (; i + n <= length; i += n) {
      const auto code = hn::BitCast(di, hn::PromoteTo(hn::RebindToUnsigned<D>(), hn::LoadU(d8, words + i)));
      Emit<kAccumulate>(d, coder.Decode(d, code), out + i);
    }
  }
#if HWY_TARGET != HWY_SCALAR  // one-lane vectors take the element loop below
  if constexpr (kBits == 2 || kBits == 4) {
    if (n >= static_cast<size_t>(kBits)) {  // a chunk's kBits words fit one vector: spread them by a table lookup
      constexpr size_t kPerWord = kWordBits / kBits;
      constexpr size_t kChunk = kWordBits;
      constexpr uint32_t kMask = (1u << kBits) - 1;
      const hn::RebindToUnsigned<D> du;
      HWY_ALIGN int32_t wordOf[kChunk];
      HWY_ALIGN uint32_t shiftOf[kChunk];
      for (size_t e = 0; e < kChunk; ++e) {
        wordOf[e] = static_cast<int32_t>(e / kPerWord);
        shiftOf[e] = static_cast<uint32_t>((e % kPerWord) * kBits);
      }
      const hn::Repartition<uint64_t, decltype(du)> d64;
      const auto mask = hn::Set(du, kMask);
      for (; i + kChunk <= length; i += kChunk) {
        // The words in registers, repeated: 2 bits [w0 w1 w0 w1 ...], 4 bits [w0 w1 w2 w3 w0 ...].
        const unsigned char* chunk = words + kCodeWordBytes * (i / kPerWord);
        uint64_t low = 0, high = 0;
        std::memcpy(&low, chunk, sizeof low);
        if constexpr (kBits == 4) std::memcpy(&high, chunk + sizeof low, sizeof high);
        const auto all = hn::BitCast(
            du, kBits == 2 ? hn::Set(d64, low) : hn::InterleaveLower(d64, hn::Set(d64, low), hn::Set(d64, high)));
        for (size_t j = 0; j < kChunk; j += n) {
          const auto spread = hn::TableLookupLanes(all, hn::SetTableIndices(du, wordOf + j));
          const auto code = hn::And(spread >> hn::Load(du, shiftOf + j), mask);
          Emit<kAccumulate>(d, coder.Decode(d, hn::BitCast(di, code)), out + i + j);
        }
      }
    }
  }
#endif
  for (; i < length; ++i) {
    const auto code = hn::Set(di1, static_cast<int32_t>(CodeAt(words, i, kBits)));
    Emit<kAccumulate>(d1, coder.Decode(d1, code), out + i);
  }
}

template <bool kAccumulate>
bool Decode(int bits, const unsigned char* wire, size_t length, float* out) {
  if (kAccumulate) PrefetchNextBucket(out, length);
  const Header header{LoadFloat(wire), LoadFloat(wire + sizeof(float))};
  const unsigned char* words = wire + kBucketHeaderBytes;
  if (!header.finite()) {
    EmitConstant<kAccumulate>(header.nonFinite(), length, out);
    return true;
  }
  if (bits == 1) {
    DecodeOneBit<kAccumulate>(words, length, header, out);
  } else if (bits == 2) {
    DecodeRange<kAccumulate, 2>(words, length, header, out);
  } else if (bits == 4) {
    DecodeRange<kAccumulate, 4>(words, length, header, out);
  } else {
    DecodeRange<kAccumulate, 8>(words, length, header, out);
  }
  return false;
}

bool DecodeBucketOnTarget(int bits, const unsigned char* wire, size_t length, float* out, bool accumulate) {
  return accumulate ? Decode<true>(bits, wire, length, out) : Decode<false>(bits, wire, length, out);
}

const char* TargetNameOnTarget() { return hwy::TargetName(HWY_TARGET); }

}  // namespace HWY_NAMESPACE
}  // namespace gradagg
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace gradagg {

HWY_EXPORT(EncodeBucketOnTarget);
HWY_EXPORT(DecodeBucketOnTarget);
HWY_EXPORT(TargetNameOnTarget);

void EncodeBucket(const BucketRule& rule, const float* values, float* residual, size_t length,
                  const BucketScratch& scratch, unsigned char* wire) {
  HWY_DYNAMIC_DISPATCH(EncodeBucketOnTarget)(rule, values, residual, length, scratch, wire);
}

bool DecodeBucket(int bits, const unsigned char* wire, size_t length, float* out, bool accumulate) {
  return HWY_DYNAMIC_DISPATCH(DecodeBucketOnTarget)(bits, wire, length, out, accumulate);
}

const char* BucketCodecTarget() { return HWY_DYNAMIC_DISPATCH(TargetNameOnTarget)(); }

}  // namespace gradagg
#endif  // HWY_ONCE
