// The quantizer against the plain reference, bit for bit, for every mode, bucket shape and awkward input.
#include "quantize/quantizer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <tuple>
#include <vector>

#include "quantize/canonical_sum.h"
#include "quantize/wire_format.h"
#include "reference_quantizer.h"
#include "test/common/quantizer_inputs.h"

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

TEST_P(QuantizerModes, MatchesReferenceBitwiseWithResidual) {
  const auto [bits, mean, bucket, count] = GetParam();
  const Quantizer quantizer(QuantizerConfigFor(bits, bucket, mean));
  const std::vector<float> values = RandomNormal(count, static_cast<uint32_t>(count * 31 + bits));
  std::vector<float> residual = RandomNormal(count, 7, 0.1f);

  std::vector<float> v(count);
  for (size_t i = 0; i < count; ++i) v[i] = values[i] + residual[i];
  const test::ReferenceResult expected = ReferenceEncode(v, bits, bucket, mean);

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

TEST_P(QuantizerModes, WithoutResidualEncodesTheValues) {
  const auto [bits, mean, bucket, count] = GetParam();
  const Quantizer quantizer(QuantizerConfigFor(bits, bucket, mean));
  const std::vector<float> values = RandomNormal(count, 99);
  EXPECT_EQ(EncodeBytes(quantizer, values, nullptr), ReferenceEncode(values, bits, bucket, mean).wire);
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

TEST(Quantizer, MultiBitClipsToFourStandardDeviations) {
  const Quantizer quantizer(QuantizerConfigFor(8, 64, false));
  std::vector<float> values(64, 0.0f);
  values[0] = 1000.0f;  // s = 1000 / 8, range [-500, 500]
  std::vector<float> decoded(64);
  quantizer.Decode(EncodeBytes(quantizer, values, nullptr).data(), 64, decoded.data());
  EXPECT_GE(decoded[0], 500.0f);  // the top code, half a step above the range end
  EXPECT_LT(decoded[0], 503.0f);
  EXPECT_NEAR(decoded[1], 0.0f, 2.0f);
}

TEST(Quantizer, TinyRangeDecodesToTheLowerEnd) {
  const Quantizer quantizer(QuantizerConfigFor(4, 8, false));
  const std::vector<float> values(8, 1e-39f);  // s ~ 1e-39: range under 1e-36
  std::vector<float> residual(8, 0.0f);
  const std::vector<unsigned char> wire = EncodeBytes(quantizer, values, &residual);
  float header[2];
  std::memcpy(header, wire.data(), sizeof header);
  std::vector<float> decoded(8);
  quantizer.Decode(wire.data(), 8, decoded.data());
  for (float d : decoded) EXPECT_TRUE(SameBits(d, header[0]));
  for (size_t i = 0; i < 8; ++i) EXPECT_TRUE(SameBits(residual[i], values[i] - header[0]));
}

TEST(Quantizer, NanPoisonsOnlyItsOwnBucketAndWritesNothingPastTheWire) {
  for (int bits : {1, 2, 8}) {
    const Quantizer quantizer(QuantizerConfigFor(bits, 16, false));
    std::vector<float> values = RandomNormal(48, 3);
    values[20] = std::numeric_limits<float>::quiet_NaN();  // bucket 1 of 3
    std::vector<float> residual(48, 0.0f);
    const std::vector<unsigned char> first = EncodeBytes(quantizer, values, &residual);
    std::vector<float> residualAgain(48, 0.0f);
    EXPECT_EQ(first, EncodeBytes(quantizer, values, &residualAgain)) << "deterministic";
    std::vector<float> decoded(48);
    quantizer.Decode(first.data(), 48, decoded.data());
    for (size_t i = 0; i < 48; ++i) {
      const bool poisoned = i >= 16 && i < 32;
      if (!poisoned) EXPECT_TRUE(std::isfinite(decoded[i])) << "bits " << bits << " element " << i;
    }
    EXPECT_TRUE(std::isnan(decoded[20]) || bits == 1) << "bits " << bits;
  }
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

TEST(CanonicalSum, FollowsTheDocumentedOrder) {
  for (size_t length : {0, 1, 5, 127, 128, 129, 512, 1000}) {
    const std::vector<float> values = RandomNormal(length, static_cast<uint32_t>(length), 1e3f);
    const float sum = CanonicalSum(length, [&](size_t i) { return values[i]; });
    EXPECT_TRUE(SameBits(sum, test::ReferenceSum(values))) << length;
    double exact = 0.0;
    for (float v : values) exact += v;
    EXPECT_NEAR(sum, exact, 1e-3 * (1.0 + std::fabs(exact))) << length;
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

}  // namespace
}  // namespace gradagg
