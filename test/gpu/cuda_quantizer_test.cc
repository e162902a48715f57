// The CUDA quantizer against the CPU quantizer (the oracle), byte for byte: wire, residual, decode, accumulate,
// for every mode, element type, bucket shape and awkward input. Skipped where no GPU is visible.
#include "quantize/cuda/cuda_quantizer.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "quantize/bucket_layout.h"
#include "common/cuda/device_memory.h"
#include "quantize/quantizer.h"
#include "quantize/sum_term.h"
#include "quantize/wire_format.h"
#include "test/common/quantizer_inputs.h"

namespace gradagg {
namespace {

constexpr unsigned char kGuard = 0xab;
constexpr size_t kGuardBytes = 256;

// The largest size a run may use (GRADAGG_GPU_TEST_MAX_ELEMENTS; smaller under compute-sanitizer).
size_t MaxElements() {
  const char* text = std::getenv("GRADAGG_GPU_TEST_MAX_ELEMENTS");
  return text != nullptr ? std::strtoull(text, nullptr, 10) : size_t{100000000};
}

uint16_t Bits16(__nv_bfloat16 x) {
  uint16_t bits;
  std::memcpy(&bits, &x, 2);
  return bits;
}
uint16_t Bits16(__half x) {
  uint16_t bits;
  std::memcpy(&bits, &x, 2);
  return bits;
}
uint32_t Bits32(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  return bits;
}

// Host-side element conversions, the same roundings as the device's.
template <typename T>
T FromFloat(float x);
template <>
float FromFloat<float>(float x) {
  return x;
}
template <>
__nv_bfloat16 FromFloat<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}
template <>
__half FromFloat<__half>(float x) {
  return __float2half_rn(x);
}
float ToFloat(float x) { return x; }
float ToFloat(__nv_bfloat16 x) { return __bfloat162float(x); }
float ToFloat(__half x) { return __half2float(x); }

template <typename T>
ElementType TypeOf();
template <>
ElementType TypeOf<float>() {
  return ElementType::kFloat32;
}
template <>
ElementType TypeOf<__nv_bfloat16>() {
  return ElementType::kBFloat16;
}
template <>
ElementType TypeOf<__half>() {
  return ElementType::kFloat16;
}

// Same bits, or both NaN (the GPU writes the canonical NaN; the CPU keeps payloads).
bool SameOrBothNan(float a, float b) { return Bits32(a) == Bits32(b) || (std::isnan(a) && std::isnan(b)); }

using test::RandomNormal;

struct Mode {
  int bits;
  bool mean;
};

std::string Name(const Mode& mode, size_t bucket, size_t count, ElementType type) {
  return "bits " + std::to_string(mode.bits) + (mode.mean ? " mean" : "") + " bucket " + std::to_string(bucket) +
         " count " + std::to_string(count) + " " + ToString(type);
}

QuantizerConfig ConfigOf(const Mode& mode, size_t bucket) {
  return test::QuantizerConfigFor(mode.bits, bucket, mode.mean);
}

class CudaQuantizerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string reason = CudaUnavailableReason();
    if (!reason.empty()) GTEST_SKIP() << reason;
    GRADAGG_CUDA_CHECK(cudaStreamCreate(&stream_));
  }
  void TearDown() override {
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  // The GPU's wire image is the CPU's, byte for byte; with nanAware, floats (header floats; every word at 32 bits) may
  // be NaN with another payload, code words must be equal.
  void ExpectSameWire(const Mode& mode, const BucketLayout& layout, const unsigned char* gpuWire,
                      const unsigned char* cpuWire, bool nanAware, const std::string& what) {
    const size_t wireBytes = WireBytes(layout, mode.bits);
    if (!nanAware) {
      EXPECT_EQ(std::memcmp(gpuWire, cpuWire, wireBytes), 0) << what << ": wire differs";
      return;
    }
    size_t at = 0;
    layout.ForEachBucket([&](size_t, size_t length) {
      const size_t floats = mode.bits == 32 ? length : 2;
      for (size_t f = 0; f < floats; ++f, at += 4) {
        float a;
        float b;
        std::memcpy(&a, gpuWire + at, 4);
        std::memcpy(&b, cpuWire + at, 4);
        EXPECT_TRUE(SameOrBothNan(a, b)) << what << ": float at byte " << at;
      }
      const size_t codeBytes = mode.bits == 32 ? 0 : 4 * ((length * static_cast<size_t>(mode.bits) + 31) / 32);
      EXPECT_EQ(std::memcmp(gpuWire + at, cpuWire + at, codeBytes), 0) << what << ": codes at byte " << at;
      at += codeBytes;
    });
    EXPECT_EQ(at, wireBytes);
  }

  // `encode(residual, out)` (device pointers, the residual shifted by `offset` elements) against the CPU's Encode of
  // `cpuSum`, both from the same starting residual: the wire image bit for bit (nothing written past it) and the
  // residual left behind.
  template <typename Encode>
  void ExpectEncodedLikeTheCpu(const Mode& mode, const Quantizer& cpu, const BucketLayout& layout,
                               const std::vector<float>& cpuSum, size_t offset, bool nanAware, const std::string& which,
                               Encode encode) {
    const size_t count = layout.elements();
    const size_t wireBytes = WireBytes(layout, mode.bits);
    std::vector<float> cpuResidual = RandomNormal(count, 13, 0.1f);
    std::vector<float> gpuStart(count + offset, 0.0f);
    std::copy(cpuResidual.begin(), cpuResidual.end(), gpuStart.begin() + static_cast<std::ptrdiff_t>(offset));
    DeviceBuffer gpuResidual = DeviceBuffer::From(gpuStart);
    std::vector<uint32_t> cpuOut(wireBytes / 4 + 1);
    cpu.Encode(cpuSum.data(), cpuResidual.data(), layout, cpuOut.data());
    DeviceBuffer out(wireBytes + kGuardBytes);
    GRADAGG_CUDA_CHECK(cudaMemset(out.get(), kGuard, out.bytes()));
    encode(gpuResidual.as<float>() + offset, out.get());
    GRADAGG_CUDA_CHECK(cudaStreamSynchronize(stream_));
    const std::vector<unsigned char> gpuOut = out.ToHost<unsigned char>(out.bytes());
    for (size_t b = wireBytes; b < gpuOut.size(); ++b) {
      ASSERT_EQ(gpuOut[b], kGuard) << which << ": wrote past the wire";
    }
    ExpectSameWire(mode, layout, gpuOut.data(), reinterpret_cast<const unsigned char*>(cpuOut.data()), nanAware,
                   which);
    const std::vector<float> residual = gpuResidual.ToHost<float>(count + offset);
    for (size_t i = 0; i < count; ++i) {
      ASSERT_TRUE(SameOrBothNan(residual[offset + i], cpuResidual[i])) << which << ": residual " << i;
    }
  }

  // EncodeSum of (values + decode(addend)) and of (decode(wire) + decode(addend)) against the CPU's DecodeAccumulate
  // into the first term, then Encode: wire and residual, bit for bit (float32). The addend is another wire image than
  // the round's (finite: beside a non-finite round's buckets it pairs finite with non-finite terms); values and
  // residual are shifted by `offset` elements, as the round's arrays are.
  void ExpectSumsMatch(const Mode& mode, const Quantizer& cpu, const CudaQuantizer& gpu, const BucketLayout& layout,
                       const DeviceBucketLayout& deviceLayout, const DeviceBuffer& wire,
                       const std::vector<uint32_t>& cpuWireWords, size_t offset, bool nanAware,
                       const std::string& what) {
    const size_t count = layout.elements();
    const size_t wireBytes = WireBytes(layout, mode.bits);
    std::vector<float> addendSource = RandomNormal(count, 17);
    std::vector<uint32_t> cpuAddend(wireBytes / 4 + 1);
    cpu.Encode(addendSource.data(), nullptr, layout, cpuAddend.data());
    const DeviceBuffer addend = DeviceBuffer::From(cpuAddend);
    const std::vector<float> start = RandomNormal(count, 7);
    std::vector<float> shifted(count + offset, 0.0f);
    std::copy(start.begin(), start.end(), shifted.begin() + static_cast<std::ptrdiff_t>(offset));
    const DeviceBuffer values = DeviceBuffer::From(shifted);
    for (const bool twoWires : {false, true}) {
      const std::string which = what + (twoWires ? ", sum of two wires" : ", sum of values and a wire");
      std::vector<float> cpuSum = start;
      if (twoWires) cpu.Decode(cpuWireWords.data(), layout, cpuSum.data());
      cpu.DecodeAccumulate(cpuAddend.data(), layout, cpuSum.data());
      const SumTerm first =
          twoWires ? SumTerm{nullptr, wire.get()} : SumTerm{values.as<float>() + offset, nullptr};
      ExpectEncodedLikeTheCpu(mode, cpu, layout, cpuSum, offset, nanAware, which, [&](float* residual, void* out) {
        gpu.EncodeSum(first, addend.get(), residual, deviceLayout, out, stream_);
      });
      ASSERT_FALSE(HasFailure());
    }
  }

  // EncodeTerms of 2 and 3 arrays (the first `first`, widened from the round's input) against the CPU's sum of them,
  // added in order, encoded with a residual; every array shifted by `offset` elements, and then (mixed) array t by t
  // more: only later terms misaligned, which must take the scalar path.
  void ExpectTermsMatch(const Mode& mode, const Quantizer& cpu, const CudaQuantizer& gpu, const BucketLayout& layout,
                        const DeviceBucketLayout& deviceLayout, const std::vector<float>& first, size_t offset,
                        bool nanAware, const std::string& what) {
    const size_t count = layout.elements();
    const std::vector<std::vector<float>> sources = {first, RandomNormal(count, 23), RandomNormal(count, 29, 3.0f)};
    for (const bool mixed : {false, true}) {
      std::vector<DeviceBuffer> arrays;
      ValueTerms terms;
      for (size_t t = 0; t < sources.size(); ++t) {
        const size_t shift = offset + (mixed ? t : 0);
        std::vector<float> shifted(count + shift, 0.0f);
        std::copy(sources[t].begin(), sources[t].end(), shifted.begin() + static_cast<std::ptrdiff_t>(shift));
        arrays.push_back(DeviceBuffer::From(shifted));
        terms.at[t] = arrays.back().as<float>() + shift;
      }
      std::vector<float> cpuSum = sources[0];
      for (const int termCount : {2, 3}) {
        const std::string which =
            what + ", sum of " + std::to_string(termCount) + " arrays" + (mixed ? ", mixed alignment" : "");
        for (size_t i = 0; i < count; ++i) cpuSum[i] += sources[static_cast<size_t>(termCount - 1)][i];
        terms.count = termCount;
        ExpectEncodedLikeTheCpu(mode, cpu, layout, cpuSum, offset, nanAware, which, [&](float* residual, void* out) {
          gpu.EncodeTerms(terms, residual, deviceLayout, out, stream_);
        });
        ASSERT_FALSE(HasFailure());
      }
    }
  }

  // DecodeCopies into 3 arrays, copy c shifted by offset + c elements (only later copies misaligned where offset is
  // 0): each is the CPU's decode, nothing written before or past it, the non-finite buckets counted once.
  void ExpectCopiesMatch(const CudaQuantizer& gpu, const DeviceBucketLayout& deviceLayout, const DeviceBuffer& wire,
                         const std::vector<float>& cpuDecoded, size_t cpuNonFinite, size_t offset,
                         const std::string& what) {
    const size_t count = cpuDecoded.size();
    std::vector<DeviceBuffer> arrays;
    ValueCopies copies;
    copies.count = 3;
    for (int c = 0; c < copies.count; ++c) {
      const size_t shift = offset + static_cast<size_t>(c);
      arrays.emplace_back((count + shift) * sizeof(float) + kGuardBytes);
      GRADAGG_CUDA_CHECK(cudaMemset(arrays.back().get(), kGuard, arrays.back().bytes()));
      copies.at[c] = arrays.back().as<float>() + shift;
    }
    DeviceBuffer nonFinite = DeviceBuffer::From(std::vector<unsigned long long>(1, 0));
    gpu.DecodeCopies(wire.get(), deviceLayout, copies, stream_, nonFinite.as<unsigned long long>());
    GRADAGG_CUDA_CHECK(cudaStreamSynchronize(stream_));
    ASSERT_EQ(nonFinite.ToHost<unsigned long long>(1)[0], cpuNonFinite) << what << ": non-finite buckets (copies)";
    for (size_t c = 0; c < arrays.size(); ++c) {
      const size_t shift = offset + c;
      const std::vector<unsigned char> bytes = arrays[c].ToHost<unsigned char>(arrays[c].bytes());
      for (size_t b = 0; b < bytes.size(); ++b) {
        if (b < shift * sizeof(float) || b >= (count + shift) * sizeof(float)) {
          ASSERT_EQ(bytes[b], kGuard) << what << ": copy " << c << " wrote outside its array at byte " << b;
        }
      }
      const std::vector<float> values = arrays[c].ToHost<float>(count + shift);
      for (size_t i = 0; i < count; ++i) {
        ASSERT_TRUE(SameOrBothNan(values[shift + i], cpuDecoded[i])) << what << ": copy " << c << ", element " << i;
      }
    }
  }

  // One round on GPU and CPU: encode (with residual, carried in `cpuResidual` / `gpuResidual`), decode, accumulate,
  // and the count of non-finite buckets. `offset` shifts the device arrays by that many elements, to exercise
  // unaligned access; `segments` (lengths summing to the source's) cut the run as tensors do, empty for one segment.
  template <typename T>
  void ExpectRoundMatches(const Mode& mode, size_t bucket, const std::vector<float>& source, size_t offset,
                          std::vector<float>& cpuResidual, DeviceBuffer& gpuResidual, bool nanAware = false,
                          const std::vector<size_t>& segments = {}) {
    const size_t count = source.size();
    const std::string what = Name(mode, bucket, count, TypeOf<T>()) + " offset " + std::to_string(offset) +
                             " segments " + std::to_string(segments.size());
    const QuantizerConfig config = ConfigOf(mode, bucket);
    const Quantizer cpu(config);
    const CudaQuantizer gpu(config);
    const BucketLayout layout = segments.empty() ? cpu.Uniform(count) : BucketLayout(segments, bucket);
    ASSERT_EQ(layout.elements(), count);
    const DeviceBucketLayout deviceLayout = gpu.Upload(layout);
    DeviceBuffer nonFinite = DeviceBuffer::From(std::vector<unsigned long long>(2, 0));

    // Inputs in T; the CPU sees exactly their float values.
    std::vector<T> typed(count + offset, FromFloat<T>(0.0f));
    std::vector<float> widened(count);
    for (size_t i = 0; i < count; ++i) {
      typed[offset + i] = FromFloat<T>(source[i]);
      widened[i] = ToFloat(typed[offset + i]);
    }
    const DeviceBuffer values = DeviceBuffer::From(typed);
    const size_t wireBytes = gpu.WireBytes(layout);
    ASSERT_EQ(wireBytes, cpu.WireBytes(layout));
    DeviceBuffer wire(wireBytes + kGuardBytes);
    GRADAGG_CUDA_CHECK(cudaMemset(wire.get(), kGuard, wire.bytes()));

    std::vector<uint32_t> cpuWireWords(wireBytes / 4 + 1);
    cpu.Encode(widened.data(), cpuResidual.data(), layout, cpuWireWords.data());
    gpu.Encode(values.as<T>() + offset, TypeOf<T>(), gpuResidual.as<float>(), deviceLayout, wire.get(), stream_);
    GRADAGG_CUDA_CHECK(cudaStreamSynchronize(stream_));

    const std::vector<unsigned char> gpuWire = wire.ToHost<unsigned char>(wire.bytes());
    const auto* cpuWire = reinterpret_cast<const unsigned char*>(cpuWireWords.data());
    for (size_t b = wireBytes; b < gpuWire.size(); ++b)
      ASSERT_EQ(gpuWire[b], kGuard) << what << ": wrote past the wire";
    ExpectSameWire(mode, layout, gpuWire.data(), cpuWire, nanAware, what);
    ASSERT_FALSE(HasFailure());
    const std::vector<float> residual = gpuResidual.ToHost<float>(count);
    for (size_t i = 0; i < count; ++i) {
      ASSERT_TRUE(SameOrBothNan(residual[i], cpuResidual[i])) << what << ": residual " << i;
    }

    // Decode into T.
    std::vector<float> cpuDecoded(count);
    const size_t cpuNonFinite = cpu.Decode(cpuWireWords.data(), layout, cpuDecoded.data());
    DeviceBuffer decoded((count + offset) * sizeof(T) + kGuardBytes);
    GRADAGG_CUDA_CHECK(cudaMemset(decoded.get(), kGuard, decoded.bytes()));
    auto* counters = nonFinite.as<unsigned long long>();
    gpu.Decode(wire.get(), deviceLayout, decoded.as<T>() + offset, TypeOf<T>(), stream_, counters);
    // Accumulate into float32.
    const std::vector<float> start = RandomNormal(count + offset, 5);
    DeviceBuffer sums = DeviceBuffer::From(start);
    gpu.DecodeAccumulate(wire.get(), deviceLayout, sums.as<float>() + offset, stream_, counters + 1);
    GRADAGG_CUDA_CHECK(cudaStreamSynchronize(stream_));
    const std::vector<unsigned long long> gpuNonFinite = nonFinite.ToHost<unsigned long long>(2);
    ASSERT_EQ(gpuNonFinite[0], cpuNonFinite) << what << ": non-finite buckets (decode)";
    ASSERT_EQ(gpuNonFinite[1], cpuNonFinite) << what << ": non-finite buckets (accumulate)";

    const std::vector<unsigned char> decodedBytes = decoded.ToHost<unsigned char>(decoded.bytes());
    for (size_t b = (count + offset) * sizeof(T); b < decodedBytes.size(); ++b) {
      ASSERT_EQ(decodedBytes[b], kGuard) << what << ": decode wrote past the end";
    }
    const std::vector<T> gpuDecoded = decoded.ToHost<T>(count + offset);
    const std::vector<float> gpuSums = sums.ToHost<float>(count + offset);
    for (size_t i = 0; i < count; ++i) {
      const T expected = FromFloat<T>(cpuDecoded[i]);
      if constexpr (sizeof(T) == 4) {
        ASSERT_TRUE(SameOrBothNan(gpuDecoded[offset + i], expected)) << what << ": decode " << i;
      } else {
        const bool bothNan = std::isnan(ToFloat(expected)) && std::isnan(ToFloat(gpuDecoded[offset + i]));
        ASSERT_TRUE(bothNan || Bits16(gpuDecoded[offset + i]) == Bits16(expected)) << what << ": decode " << i;
      }
      ASSERT_TRUE(SameOrBothNan(gpuSums[offset + i], start[offset + i] + cpuDecoded[i])) << what << ": sum " << i;
    }
    if constexpr (std::is_same_v<T, float>) {
      if (mode.bits != kRawBits) ExpectCopiesMatch(gpu, deviceLayout, wire, cpuDecoded, cpuNonFinite, offset, what);
      ExpectSumsMatch(mode, cpu, gpu, layout, deviceLayout, wire, cpuWireWords, offset, nanAware, what);
      if (mode.bits != kRawBits)
        ExpectTermsMatch(mode, cpu, gpu, layout, deviceLayout, widened, offset, nanAware, what);
    }
  }

  template <typename T>
  void ExpectMatchesForSizes(const Mode& mode, size_t bucket, const std::vector<size_t>& counts) {
    for (size_t count : counts) {
      std::vector<float> cpuResidual = RandomNormal(count, 11, 0.1f);
      DeviceBuffer gpuResidual = DeviceBuffer::From(cpuResidual);
      ExpectRoundMatches<T>(mode, bucket, RandomNormal(count, static_cast<uint32_t>(count) + 3), 0, cpuResidual,
                            gpuResidual);
      if (HasFatalFailure()) return;
    }
  }

  cudaStream_t stream_ = nullptr;
};

const Mode kModes[] = {{1, false}, {1, true}, {2, false}, {4, false}, {8, false}, {32, false}};

TEST_F(CudaQuantizerTest, MatchesTheCpuForEveryModeTypeAndBucketShape) {
  for (const Mode& mode : kModes) {
    for (size_t bucket : {size_t{512}, size_t{100}, size_t{3}, size_t{4096}}) {
      const std::vector<size_t> counts = {0, 1, bucket - 1, bucket, bucket + 1, 3 * bucket + 5, 100003};
      ExpectMatchesForSizes<float>(mode, bucket, counts);
      ExpectMatchesForSizes<__nv_bfloat16>(mode, bucket, counts);
      ExpectMatchesForSizes<__half>(mode, bucket, counts);
      if (HasFatalFailure()) return;
    }
  }
}

TEST_F(CudaQuantizerTest, TermsAndCopiesOfNoArraysTooManyOrThirtyTwoBitsAreRefused) {
  const DeviceBuffer values = DeviceBuffer::From(std::vector<float>(16, 1.0f));
  const DeviceBuffer wire(16 * sizeof(float) + kGuardBytes);
  for (const Mode& mode : {Mode{1, false}, Mode{32, false}}) {
    const CudaQuantizer gpu(ConfigOf(mode, 16));
    const DeviceBucketLayout layout = gpu.Uniform(16);
    for (const int count : {0, 1, 17}) {
      ValueTerms terms;
      ValueCopies copies;
      terms.count = copies.count = count;
      for (int i = 0; i < std::min(count, ValueTerms::kMax); ++i) {
        terms.at[i] = values.as<float>();
        copies.at[i] = values.as<float>();
      }
      const std::string what = std::to_string(mode.bits) + " bits, " + std::to_string(count) + " arrays";
      if (mode.bits == 32 || count != 1) {
        EXPECT_THROW(gpu.EncodeTerms(terms, nullptr, layout, wire.get(), stream_), std::invalid_argument) << what;
        EXPECT_THROW(gpu.DecodeCopies(wire.get(), layout, copies, stream_), std::invalid_argument) << what;
      } else {
        EXPECT_NO_THROW(gpu.EncodeTerms(terms, nullptr, layout, wire.get(), stream_)) << what;
        EXPECT_NO_THROW(gpu.DecodeCopies(wire.get(), layout, copies, stream_)) << what;
      }
    }
  }
  GRADAGG_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

TEST_F(CudaQuantizerTest, MatchesTheCpuAtTenToTheEighthElements) {
  const size_t count = std::min<size_t>(100000000, MaxElements());
  for (const Mode& mode : {Mode{1, false}, Mode{8, false}}) {
    ExpectMatchesForSizes<float>(mode, 512, {count});
    if (HasFatalFailure()) return;
  }
}

TEST_F(CudaQuantizerTest, UnalignedArraysTakeTheScalarPathAndStillMatch) {
  for (const Mode& mode : kModes) {
    for (size_t offset : {1, 2, 3}) {
      std::vector<float> cpuResidual = RandomNormal(5000, 2, 0.1f);
      DeviceBuffer gpuResidual = DeviceBuffer::From(cpuResidual);
      ExpectRoundMatches<float>(mode, 512, RandomNormal(5000, 8), offset, cpuResidual, gpuResidual);
      std::vector<float> cpuResidual16 = RandomNormal(5000, 2, 0.1f);
      DeviceBuffer gpuResidual16 = DeviceBuffer::From(cpuResidual16);
      ExpectRoundMatches<__nv_bfloat16>(mode, 512, RandomNormal(5000, 8), offset, cpuResidual16, gpuResidual16);
      if (HasFatalFailure()) return;
    }
  }
}

TEST_F(CudaQuantizerTest, ResidualsPersistAcrossCallsLikeTheCpu) {
  for (const Mode& mode : kModes) {
    std::vector<float> cpuResidual(7000, 0.0f);
    DeviceBuffer gpuResidual = DeviceBuffer::From(cpuResidual);
    for (uint32_t step = 0; step < 4; ++step) {
      ExpectRoundMatches<float>(mode, 512, RandomNormal(7000, 100 + step), 0, cpuResidual, gpuResidual);
      if (HasFatalFailure()) return;
    }
  }
}

TEST_F(CudaQuantizerTest, NanAndInfPoisonTheirBucketAsOnTheCpuAndWriteNothingOutside) {
  for (const Mode& mode : kModes) {
    std::vector<float> values = RandomNormal(3000, 4);
    values[10] = std::numeric_limits<float>::quiet_NaN();
    values[700] = std::numeric_limits<float>::infinity();
    values[1500] = -std::numeric_limits<float>::infinity();
    std::vector<float> cpuResidual(3000, 0.0f);
    DeviceBuffer gpuResidual = DeviceBuffer::From(cpuResidual);
    ExpectRoundMatches<float>(mode, 512, values, 0, cpuResidual, gpuResidual, /*nanAware=*/true);
    if (HasFatalFailure()) return;
  }
}

TEST_F(CudaQuantizerTest, NonFiniteBucketsKeepTheirResidualAndAreCountedAsOnTheCpu) {
  for (const Mode& mode : kModes) {
    for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                      -std::numeric_limits<float>::infinity()}) {
      std::vector<float> values = RandomNormal(2100, 9);
      values[600] = bad;  // bucket 1 of 5
      const std::vector<float> residualBefore = RandomNormal(2100, 10, 0.1f);
      std::vector<float> cpuResidual = residualBefore;
      DeviceBuffer gpuResidual = DeviceBuffer::From(cpuResidual);
      ExpectRoundMatches<float>(mode, 512, values, 0, cpuResidual, gpuResidual, /*nanAware=*/true);
      if (HasFatalFailure()) return;
      if (mode.bits == 32) continue;
      const std::vector<float> after = gpuResidual.ToHost<float>(2100);
      for (size_t i = 512; i < 1024; ++i) ASSERT_EQ(Bits32(after[i]), Bits32(residualBefore[i])) << i;
      // A clean second call: the residual never absorbed the NaN or Inf.
      ExpectRoundMatches<float>(mode, 512, RandomNormal(2100, 12), 0, cpuResidual, gpuResidual);
      for (float r : gpuResidual.ToHost<float>(2100)) ASSERT_TRUE(std::isfinite(r)) << "bits " << mode.bits;
    }
  }
}

TEST_F(CudaQuantizerTest, SegmentedRunsMatchTheCpuForEveryModeAndType) {
  // Tensors of awkward lengths: buckets restart at each one, some segments start off a multiple of 4.
  const std::vector<std::vector<size_t>> layouts = {{2, 5010, 6}, {4, 7652}, {1, 1, 1, 600, 3, 1024, 77}, {2049}};
  for (const Mode& mode : kModes) {
    for (const std::vector<size_t>& segments : layouts) {
      size_t count = 0;
      for (size_t length : segments) count += length;
      for (size_t bucket : {size_t{512}, size_t{100}}) {
        std::vector<float> cpuResidual = RandomNormal(count, 21, 0.1f);
        DeviceBuffer gpuResidual = DeviceBuffer::From(cpuResidual);
        ExpectRoundMatches<float>(mode, bucket, RandomNormal(count, 22), 0, cpuResidual, gpuResidual, false, segments);
        std::vector<float> cpuResidual16 = RandomNormal(count, 23, 0.1f);
        DeviceBuffer gpuResidual16 = DeviceBuffer::From(cpuResidual16);
        ExpectRoundMatches<__nv_bfloat16>(mode, bucket, RandomNormal(count, 24), 0, cpuResidual16, gpuResidual16, false,
                                          segments);
        if (HasFatalFailure()) return;
      }
    }
  }
}

TEST_F(CudaQuantizerTest, AllZeroBucketsDecodeToZero) {
  for (const Mode& mode : kModes) {
    const QuantizerConfig config = ConfigOf(mode, 512);
    const CudaQuantizer gpu(config);
    const DeviceBuffer zeros = DeviceBuffer::From(std::vector<float>(1500, 0.0f));
    DeviceBuffer residual = DeviceBuffer::From(std::vector<float>(1500, 0.0f));
    DeviceBuffer wire(gpu.WireBytes(1500));
    DeviceBuffer decoded = DeviceBuffer::From(std::vector<float>(1500, 7.0f));
    gpu.Encode(zeros.get(), ElementType::kFloat32, residual.as<float>(), gpu.Uniform(1500), wire.get(), stream_);
    gpu.Decode(wire.get(), gpu.Uniform(1500), decoded.get(), ElementType::kFloat32, stream_);
    GRADAGG_CUDA_CHECK(cudaStreamSynchronize(stream_));
    for (float x : decoded.ToHost<float>(1500)) ASSERT_EQ(x, 0.0f) << "bits " << mode.bits;
    for (float r : residual.ToHost<float>(1500)) ASSERT_EQ(r, 0.0f) << "bits " << mode.bits;
  }
}

TEST_F(CudaQuantizerTest, WithoutResidualEncodesTheValues) {
  for (const Mode& mode : kModes) {
    const QuantizerConfig config = ConfigOf(mode, 512);
    const std::vector<float> values = RandomNormal(2049, 6);
    std::vector<uint32_t> cpuWire(Quantizer(config).WireBytes(2049) / 4);
    Quantizer(config).Encode(values.data(), nullptr, values.size(), cpuWire.data());
    const CudaQuantizer gpu(config);
    const DeviceBuffer input = DeviceBuffer::From(values);
    DeviceBuffer wire(gpu.WireBytes(2049));
    gpu.Encode(input.get(), ElementType::kFloat32, nullptr, gpu.Uniform(values.size()), wire.get(), stream_);
    GRADAGG_CUDA_CHECK(cudaStreamSynchronize(stream_));
    EXPECT_EQ(wire.ToHost<uint32_t>(cpuWire.size()), cpuWire) << "bits " << mode.bits;
  }
}

}  // namespace
}  // namespace gradagg
