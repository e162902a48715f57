// The quantizer against the plain reference, bit for bit, for every mode, bucket shape and awkward input.
#include "quantize/quantizer.h"

#include <gtest/gtest.h>
#include <hwy/targets.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <tuple>
#include <utility>
#include <vector>

#include "quantize/bucket_codec.h"
#include "quantize/bucket_layout.h"
#include "quantize/wire_format.h"
#include "reference_quantizer.h"
#include "test/common/quantizer_inputs.h"
#include "test/common/relative_error.h"

namespace gradagg {
namespace {

using test::QuantizerConfigFor;
using test::RandomNormal;
using test::ReferenceEncode;

std::vector<unsigned char> EncodeBytes(const Quantizer& quantizer, const std::vector<float>& values,
                                       std::vector<float>* residual) {
  std::vector<uint32_t> words((quantizer.WireBytes(values.size()) + 3) / 4 + 1, 0xdeadbeef);
  quantizer.Encode(values.data(), residual != nullptr ? residual->data() : nullptr, values.size(), words.data());
  const auto* bytes = reinterpret_cast<const unsigned char*>(words.data());
  EXPECT_EQ(words.back(), 0xdeadbeefu) << "Encode wrote past WireBytes";
  return std::vector<unsigned char>(bytes, bytes + quantizer.WireBytes(values.size()));
}

bool SameBits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

// (bits, mean threshold, bucket size, element count)
class QuantizerModes : public ::testing::TestWithParam<std::tuple<int, bool, size_t, size_t>> {};

// Encode (with a residual), Decode and DecodeAccumulate against the reference, bit for bit.
void ExpectMatchesReference(int bits, bool mean, size_t bucket, size_t count) {
  const Quantizer quantizer(QuantizerConfigFor(bits, bucket, mean));
  const std::vector<float> values = RandomNormal(count, static_cast<uint32_t>(count * 31 + bits));
  std::vector<float> residual = RandomNormal(count, 7, 0.1f);

  std::vector<float> v(count);
  for (size_t i = 0; i < count; ++i) v[i] = values[i] + residual[i];
  const test::ReferenceResult expected = ReferenceEncode(v, bits, bucket, mean, DefaultClip(bits));

  const std::vector<unsigned char> wire = EncodeBytes(quantizer, values, &residual);
  ASSERT_EQ(wire.size(), WireBytes(count, bucket, bits));
  ASSERT_EQ(wire, expected.wire);
  for (size_t i = 0; i < count; ++i) {
    ASSERT_TRUE(SameBits(residual[i], v[i] - expected.decoded[i])) << "residual at " << i;
  }

  std::vector<float> decoded(count, std::numeric_limits<float>::quiet_NaN());
  quantizer.Decode(wire.data(), count, decoded.data());
  std::vector<float> accumulated(count, 1.5f);
  quantizer.DecodeAccumulate(wire.data(), count, accumulated.data());
  for (size_t i = 0; i < count; ++i) {
    ASSERT_TRUE(SameBits(decoded[i], expected.decoded[i])) << "decode at " << i;
    ASSERT_TRUE(SameBits(accumulated[i], 1.5f + expected.decoded[i])) << "accumulate at " << i;
  }
}

TEST_P(QuantizerModes, MatchesReferenceBitwiseWithResidual) {
  const auto [bits, mean, bucket, count] = GetParam();
  ExpectMatchesReference(bits, mean, bucket, count);
}

TEST_P(QuantizerModes, WithoutResidualEncodesTheValues) {
  const auto [bits, mean, bucket, count] = GetParam();
  const Quantizer quantizer(QuantizerConfigFor(bits, bucket, mean));
  const std::vector<float> values = RandomNormal(count, 99);
  EXPECT_EQ(EncodeBytes(quantizer, values, nullptr),
            ReferenceEncode(values, bits, bucket, mean, DefaultClip(bits)).wire);
}

INSTANTIATE_TEST_SUITE_P(AllModes, QuantizerModes,
                         ::testing::Combine(::testing::Values(1, 2, 4, 8, 32), ::testing::Bool(),
                                            ::testing::Values(size_t{512}, size_t{1}, size_t{3}, size_t{100}),
                                            ::testing::Values(size_t{0}, size_t{1}, size_t{2}, size_t{99}, size_t{511},
                                                              size_t{512}, size_t{513}, size_t{2000})));

TEST(Quantizer, DecodesAnAllZeroBucketToZeroInEveryMode) {
  for (int bits : {1, 2, 4, 8, 32}) {
    for (bool mean : {false, true}) {
      const Quantizer quantizer(QuantizerConfigFor(bits, 512, mean));
      std::vector<float> zeros(700, 0.0f);
      std::vector<float> residual(700, 0.0f);
      const std::vector<unsigned char> wire = EncodeBytes(quantizer, zeros, &residual);
      std::vector<float> decoded(700, 1.0f);
      quantizer.Decode(wire.data(), decoded.size(), decoded.data());
      for (size_t i = 0; i < decoded.size(); ++i) {
        ASSERT_EQ(decoded[i], 0.0f) << "bits " << bits << " element " << i;
        ASSERT_EQ(residual[i], 0.0f);
      }
    }
  }
}

TEST(Quantizer, OneBitZeroThresholdUsesTheMeanOfEachSide) {
  const Quantizer quantizer(QuantizerConfigFor(1, 4, false));
  const std::vector<float> values = {-1.0f, 3.0f, -3.0f, 5.0f};
  std::vector<float> decoded(4);
  quantizer.Decode(EncodeBytes(quantizer, values, nullptr).data(), 4, decoded.data());
  EXPECT_EQ(decoded, (std::vector<float>{-2.0f, 4.0f, -2.0f, 4.0f}));
}

TEST(Quantizer, OneBitSideWithNoValuesCountsAsZero) {
  const Quantizer quantizer(QuantizerConfigFor(1, 4, false));
  const std::vector<float> values = {-1.0f, -3.0f, -2.0f, -2.0f};
  std::vector<float> residual(4, 0.0f);
  const std::vector<unsigned char> wire = EncodeBytes(quantizer, values, &residual);
  float header[2];
  std::memcpy(header, wire.data(), sizeof header);
  EXPECT_EQ(header[0], -2.0f);
  EXPECT_EQ(header[1], 0.0f);
}

TEST(Quantizer, OneBitMeanThresholdDecodesToMeanPlusMinusDeviation) {
  const Quantizer quantizer(QuantizerConfigFor(1, 4, true));
  const std::vector<float> values = {1.0f, 3.0f, 5.0f, 7.0f};  // mean 4, mean |x - 4| = 2
  std::vector<float> decoded(4);
  quantizer.Decode(EncodeBytes(quantizer, values, nullptr).data(), 4, decoded.data());
  EXPECT_EQ(decoded, (std::vector<float>{2.0f, 2.0f, 6.0f, 6.0f}));
}

TEST(Quantizer, MultiBitTopCodeDecodesInsideTheRange) {
  const Quantizer quantizer(QuantizerConfigFor(8, 64, false));
  std::vector<float> values(64, 0.0f);
  values[0] = 1000.0f;  // s = 1000 / 8, range [-4s, 4s] = [-500, 500], 256 cells of 1000 / 256
  std::vector<float> decoded(64);
  const std::vector<unsigned char> wire = EncodeBytes(quantizer, values, nullptr);
  float header[2];
  std::memcpy(header, wire.data(), sizeof header);
  EXPECT_EQ(header[0], -500.0f);
  EXPECT_EQ(header[1], 500.0f);
  quantizer.Decode(wire.data(), 64, decoded.data());
  EXPECT_FLOAT_EQ(decoded[0], 500.0f - 0.5f * 1000.0f / 256.0f);  // the top cell's midpoint
  EXPECT_FLOAT_EQ(decoded[1], 0.5f * 1000.0f / 256.0f);           // 0 lies on a cell edge: the cell above it
}

// Single-pass relative L2 error of Gaussian data at each bit width, and every decode value inside [lower, upper].
TEST(Quantizer, GaussianErrorIsNearTheUniformOptimumAtEveryBitWidth) {
  const std::vector<float> values = RandomNormal(512 * 256, 41, 0.01f);
  const std::pair<int, double> bounds[] = {{1, 0.62}, {2, 0.37}, {4, 0.12}, {8, 0.01}};
  double previous = 1.0;
  for (const auto& [bits, bound] : bounds) {
    const Quantizer quantizer(QuantizerConfigFor(bits, 512, false));
    std::vector<float> decoded(values.size());
    quantizer.Decode(EncodeBytes(quantizer, values, nullptr).data(), values.size(), decoded.data());
    const double error = test::RelativeL2Error(decoded, values);
    EXPECT_LE(error, bound) << "bits " << bits;
    EXPECT_LT(error, previous) << "bits " << bits << " is no better than fewer bits";
    previous = error;
  }
}

TEST(Quantizer, EveryCodeDecodesInsideTheRange) {
  for (int bits : {2, 4, 8}) {
    // Heavy tails, so that every code is used: u^9 for u evenly over [-1, 1] has max / s = sqrt(19) > 4.
    const size_t count = 65536;
    const Quantizer quantizer(QuantizerConfigFor(bits, count, false));
    std::vector<float> values(count);
    for (size_t i = 0; i < count; ++i) {
      values[i] = static_cast<float>(std::pow(-1.0 + 2.0 * static_cast<double>(i) / (count - 1), 9));
    }
    const std::vector<unsigned char> wire = EncodeBytes(quantizer, values, nullptr);
    float header[2];
    std::memcpy(header, wire.data(), sizeof header);
    std::vector<float> decoded(values.size());
    quantizer.Decode(wire.data(), values.size(), decoded.data());
    std::vector<float> levels(decoded);
    std::sort(levels.begin(), levels.end());
    levels.erase(std::unique(levels.begin(), levels.end()), levels.end());
    EXPECT_EQ(levels.size(), size_t{1} << bits) << "bits " << bits << ": every code used";
    EXPECT_GT(levels.front(), header[0]) << "bits " << bits;
    EXPECT_LT(levels.back(), header[1]) << "bits " << bits;
    EXPECT_FLOAT_EQ(levels.front(), -levels.back()) << "bits " << bits << ": symmetric levels";
  }
}

TEST(Quantizer, TinyRangeDecodesToZero) {
  const Quantizer quantizer(QuantizerConfigFor(4, 8, false));
  const std::vector<float> values(8, 1e-39f);  // s ~ 1e-39: range under 1e-36
  std::vector<float> residual(8, 0.0f);
  const std::vector<unsigned char> wire = EncodeBytes(quantizer, values, &residual);
  std::vector<float> decoded(8, 1.0f);
  quantizer.Decode(wire.data(), 8, decoded.data());
  for (float d : decoded) EXPECT_EQ(d, 0.0f);
  for (size_t i = 0; i < 8; ++i) EXPECT_TRUE(SameBits(residual[i], values[i]));
}

// A NaN, +Inf or -Inf in one bucket: that bucket decodes non-finite everywhere and is counted, its residual keeps
// its value, the other buckets are untouched, and the next finite call is clean.
void ExpectNonFiniteBucketsHandled() {
  const float bads[] = {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                        -std::numeric_limits<float>::infinity()};
  for (int bits : {1, 2, 4, 8}) {
    for (bool mean : {false, true}) {
      if (mean && bits != 1) continue;
      for (float bad : bads) {
        const Quantizer quantizer(QuantizerConfigFor(bits, 16, mean));
        std::vector<float> values = RandomNormal(48, 3);
        values[20] = bad;  // bucket 1 of 3
        const std::vector<float> before = RandomNormal(48, 4, 0.1f);
        std::vector<float> residual = before;
        const std::vector<unsigned char> wire = EncodeBytes(quantizer, values, &residual);
        std::vector<float> decoded(48);
        EXPECT_EQ(quantizer.Decode(wire.data(), 48, decoded.data()), 1u) << "bits " << bits;
        std::vector<float> sums(48, 1.0f);
        EXPECT_EQ(quantizer.DecodeAccumulate(wire.data(), 48, sums.data()), 1u) << "bits " << bits;
        for (size_t i = 0; i < 48; ++i) {
          const bool poisoned = i >= 16 && i < 32;
          EXPECT_EQ(std::isfinite(decoded[i]), !poisoned) << "bits " << bits << " element " << i;
          EXPECT_EQ(std::isfinite(residual[i]), true) << "bits " << bits << " element " << i;
          if (poisoned) EXPECT_TRUE(SameBits(residual[i], before[i])) << "bits " << bits << " element " << i;
        }
        // The next call, finite, is clean everywhere.
        const std::vector<unsigned char> next = EncodeBytes(quantizer, RandomNormal(48, 5), &residual);
        EXPECT_EQ(quantizer.Decode(next.data(), 48, decoded.data()), 0u);
        for (size_t i = 0; i < 48; ++i) EXPECT_TRUE(std::isfinite(decoded[i]) && std::isfinite(residual[i])) << i;
      }
    }
  }
}

TEST(Quantizer, NonFiniteBucketKeepsItsResidualAndIsCounted) { ExpectNonFiniteBucketsHandled(); }

TEST(Quantizer, OverflowingStatisticsCountAsNonFinite) {
  const Quantizer quantizer(QuantizerConfigFor(4, 16, false));
  std::vector<float> values(16, 1e30f);  // squares overflow float32
  std::vector<float> residual(16, 0.0f);
  const std::vector<unsigned char> wire = EncodeBytes(quantizer, values, &residual);
  std::vector<float> decoded(16);
  EXPECT_EQ(quantizer.Decode(wire.data(), 16, decoded.data()), 1u);
  for (float r : residual) EXPECT_EQ(r, 0.0f);
}

// Buckets restart at every segment (tensor): the same bytes as encoding each segment on its own, end to end.
TEST(Quantizer, SegmentedLayoutEncodesEachSegmentFromItsOwnStart) {
  const std::vector<size_t> segments = {2, 5010, 6, 0, 513};
  for (int bits : {1, 2, 4, 8, 32}) {
    const Quantizer quantizer(QuantizerConfigFor(bits, 512, false));
    const BucketLayout layout(segments, 512);
    const std::vector<float> values = RandomNormal(layout.elements(), 8);
    std::vector<float> residual = RandomNormal(layout.elements(), 9, 0.1f);
    std::vector<float> pieceResidual = residual;
    std::vector<uint32_t> words(quantizer.WireBytes(layout) / 4 + 1, 0xdeadbeef);
    quantizer.Encode(values.data(), residual.data(), layout, words.data());
    EXPECT_EQ(words.back(), 0xdeadbeefu) << "Encode wrote past WireBytes";
    std::vector<unsigned char> pieces;
    size_t begin = 0;
    for (size_t length : segments) {
      std::vector<float> piece(values.begin() + static_cast<long>(begin),
                               values.begin() + static_cast<long>(begin + length));
      std::vector<float> r(pieceResidual.begin() + static_cast<long>(begin),
                           pieceResidual.begin() + static_cast<long>(begin + length));
      const std::vector<unsigned char> bytes = EncodeBytes(quantizer, piece, &r);
      pieces.insert(pieces.end(), bytes.begin(), bytes.end());
      std::copy(r.begin(), r.end(), pieceResidual.begin() + static_cast<long>(begin));
      begin += length;
    }
    ASSERT_EQ(pieces.size(), quantizer.WireBytes(layout));
    EXPECT_EQ(std::memcmp(pieces.data(), words.data(), pieces.size()), 0) << "bits " << bits;
    EXPECT_EQ(residual, pieceResidual) << "bits " << bits;
  }
}

TEST(Quantizer, SmallTensorOfLargeValuesKeepsItsValueBesideALargeTensor) {
  // A 2-element bias of large values before a tensor of small ones: with buckets of its own it keeps its value.
  const std::vector<size_t> segments = {2, 7652};
  std::vector<float> values = RandomNormal(7654, 31, 0.001f);
  values[0] = 3.0f;
  values[1] = -5.0f;
  for (int bits : {4, 8}) {
    const Quantizer quantizer(QuantizerConfigFor(bits, 512, false));
    const BucketLayout layout(segments, 512);
    std::vector<uint32_t> words(quantizer.WireBytes(layout) / 4 + 1);
    quantizer.Encode(values.data(), nullptr, layout, words.data());
    std::vector<float> decoded(values.size());
    quantizer.Decode(words.data(), layout, decoded.data());
    EXPECT_GE(decoded[0] / values[0], 0.9f) << "bits " << bits;
    EXPECT_GE(decoded[1] / values[1], 0.9f) << "bits " << bits;
  }
}

TEST(BucketLayout, CutsEachSegmentFromItsOwnStart) {
  const BucketLayout layout({5, 0, 12, 3}, 4);  // buckets: [0,4) [4,5) | [5,9) [9,13) [13,17) | [17,20)
  EXPECT_EQ(layout.elements(), 20u);
  EXPECT_EQ(layout.buckets(), 6u);
  EXPECT_EQ(layout.segments().size(), 3u);
  const size_t begins[] = {0, 4, 5, 9, 13, 17, 20};
  for (size_t b = 0; b <= 6; ++b) EXPECT_EQ(layout.BucketBegin(b), begins[b]) << b;
  std::vector<std::pair<size_t, size_t>> buckets;
  layout.ForEachBucket([&](size_t begin, size_t length) { buckets.emplace_back(begin, length); });
  EXPECT_EQ(buckets, (std::vector<std::pair<size_t, size_t>>{{0, 4}, {4, 1}, {5, 4}, {9, 4}, {13, 4}, {17, 3}}));
  EXPECT_EQ(layout.Slice(4, 13), BucketLayout({1, 12}, 4));
  EXPECT_EQ(layout.Slice(9, 11), BucketLayout({8, 3}, 4));
  EXPECT_EQ(layout.Slice(20, 0).elements(), 0u);
  EXPECT_THROW(layout.Slice(2, 5), std::invalid_argument);   // starts inside a bucket
  EXPECT_THROW(layout.Slice(5, 6), std::invalid_argument);   // ends inside a bucket
  EXPECT_THROW(layout.Slice(17, 4), std::invalid_argument);  // past the end
  EXPECT_EQ(WireBytes(layout, 1), 6 * 12u);
}

TEST(Quantizer, RawBitsPassValuesThroughAndKeepTheResidualZero) {
  const Quantizer quantizer(QuantizerConfigFor(32, 512, false));
  const std::vector<float> values = {1.0f, -2.5f, std::numeric_limits<float>::infinity(), 3.0f};
  std::vector<float> residual = {0.5f, 0.0f, 0.0f, 0.0f};
  const std::vector<unsigned char> wire = EncodeBytes(quantizer, values, &residual);
  std::vector<float> decoded(4);
  quantizer.Decode(wire.data(), 4, decoded.data());
  EXPECT_EQ(decoded[0], 1.5f);
  EXPECT_EQ(decoded[1], -2.5f);
  EXPECT_TRUE(std::isinf(decoded[2]));
  EXPECT_EQ(residual, std::vector<float>(4, 0.0f));
}

TEST(Quantizer, ErrorFeedbackCarriesEveryInputIntoTheDecodedSum) {
  // Over many steps: sum of decoded values == sum of inputs - final residual, up to float32 rounding.
  for (int bits : {1, 2, 4, 8}) {
    for (bool mean : {false, true}) {
      const size_t count = 1000;
      const Quantizer quantizer(QuantizerConfigFor(bits, 128, mean));
      std::vector<float> residual(count, 0.0f);
      std::vector<double> inputSum(count, 0.0);
      std::vector<double> decodedSum(count, 0.0);
      std::vector<float> decoded(count);
      const int steps = 200;
      for (int step = 0; step < steps; ++step) {
        const std::vector<float> g = RandomNormal(count, static_cast<uint32_t>(step + 1000 * bits));
        for (size_t i = 0; i < count; ++i) inputSum[i] += g[i];
        const std::vector<unsigned char> wire = EncodeBytes(quantizer, g, &residual);
        quantizer.Decode(wire.data(), count, decoded.data());
        for (size_t i = 0; i < count; ++i) decodedSum[i] += decoded[i];
      }
      double worst = 0.0;
      double largestResidual = 0.0;
      for (size_t i = 0; i < count; ++i) {
        worst = std::max(worst, std::fabs(decodedSum[i] - (inputSum[i] - residual[i])));
        largestResidual = std::max(largestResidual, static_cast<double>(std::fabs(residual[i])));
      }
      EXPECT_LT(worst, 2e-4) << "bits " << bits << " mean " << mean;
      // The residual stays the size of one step's quantization error; it does not grow with the steps.
      EXPECT_LT(largestResidual, 10.0) << "bits " << bits << " mean " << mean;
    }
  }
}

TEST(QuantizerConfig, RejectsBadBitsAndBuckets) {
  EXPECT_THROW(Quantizer(QuantizerConfigFor(3, 512, false)), std::invalid_argument);
  EXPECT_THROW(Quantizer(QuantizerConfigFor(16, 512, false)), std::invalid_argument);
  EXPECT_THROW(Quantizer(QuantizerConfigFor(1, 0, false)), std::invalid_argument);
  EXPECT_THROW(Quantizer(QuantizerConfigFor(1, kMaxBucketSize + 1, false)), std::invalid_argument);
  EXPECT_NO_THROW(Quantizer(QuantizerConfigFor(1, kMaxBucketSize, false)));
}

TEST(WireFormat, SizesFollowFromElementsBucketAndBits) {
  EXPECT_EQ(WireBytes(0, 512, 1), 0u);
  EXPECT_EQ(WireBytes(1, 512, 1), 12u);     // 2 floats + 1 word
  EXPECT_EQ(WireBytes(512, 512, 1), 72u);   // 8 + 16 words
  EXPECT_EQ(WireBytes(513, 512, 1), 84u);   // + a bucket of 1
  EXPECT_EQ(WireBytes(512, 512, 2), 136u);  // 8 + 32 words
  EXPECT_EQ(WireBytes(512, 512, 8), 520u);  // 8 + 128 words
  EXPECT_EQ(WireBytes(33, 512, 1), 16u);    // 33 bits: 2 words
  EXPECT_EQ(WireBytes(1000, 512, 32), 4000u);
  EXPECT_EQ(BucketWireBytes(5, 4), 12u);
}

// The codec is compiled once per SIMD target (bucket_codec.h) and the CPU picks one; here every target this CPU can
// run is forced in turn and must give the reference's bits, including the one-lane tails of every vector width.
class QuantizerOnEveryTarget : public ::testing::TestWithParam<int64_t> {
 protected:
  void SetUp() override { hwy::SetSupportedTargetsForTest(GetParam()); }
  void TearDown() override { hwy::SetSupportedTargetsForTest(0); }
};

TEST_P(QuantizerOnEveryTarget, RunsTheForcedTarget) { EXPECT_STREQ(BucketCodecTarget(), hwy::TargetName(GetParam())); }

TEST_P(QuantizerOnEveryTarget, MatchesReferenceInEveryMode) {
  for (int bits : {1, 2, 4, 8}) {
    for (bool mean : {false, true}) {
      for (size_t bucket : {size_t{1}, size_t{3}, size_t{100}, size_t{512}, size_t{4096}}) {
        for (size_t count : {size_t{1}, size_t{31}, size_t{33}, size_t{511}, size_t{513}, size_t{2000}, size_t{5000}}) {
          SCOPED_TRACE(::testing::Message()
                       << "bits " << bits << " mean " << mean << " bucket " << bucket << " count " << count);
          ExpectMatchesReference(bits, mean, bucket, count);
          if (HasFatalFailure()) return;
        }
      }
    }
  }
}

TEST_P(QuantizerOnEveryTarget, HandlesNonFiniteBuckets) { ExpectNonFiniteBucketsHandled(); }

INSTANTIATE_TEST_SUITE_P(Targets, QuantizerOnEveryTarget, ::testing::ValuesIn(hwy::SupportedAndGeneratedTargets()),
                         [](const ::testing::TestParamInfo<int64_t>& info) { return hwy::TargetName(info.param); });

}  // namespace
}  // namespace gradagg
