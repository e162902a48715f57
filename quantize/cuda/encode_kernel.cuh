// Encode with error feedback, one warp per bucket, in one pass over values and residual.
//
//   0. find the bucket's place in the run (bucket_table.h);
//   1. load v = values (or a sum with decoded wire images, or of several arrays: EncodeInput) + residual for the
//      bucket into registers (512 elements: 4 groups of 4 per lane; larger buckets are swept in 512-element chunks,
//      reloaded per pass);
//   2. statistics in the canonical order: per-lane sums, then the warp butterfly (bucket_lanes.cuh);
//   3. codes and residuals from the header floats, exactly as a receiver decodes them; each lane packs its group's
//      4 codes and the lanes sharing a 32-bit word OR them together with shuffles;
//   4. lane 0 writes the two header floats.
// A bucket whose statistics are not finite (a NaN or Inf in v) writes codes 0 and leaves its residual alone.
// Every operation is one IEEE float32 rounding (__fadd_rn and friends), as on the CPU.
#pragma once

#include <cstddef>
#include <cstdint>

#include "quantize/cuda/bucket_decoder.cuh"
#include "quantize/cuda/bucket_lanes.cuh"
#include "quantize/cuda/bucket_table.h"
#include "quantize/sum_term.h"

namespace gradagg::cuda_detail {

enum class EncodeMode { kOneBitZero, kOneBitMean, kRange };
// What is encoded: the values, or a sum of two terms in this order, each addition one rounding (as DecodeAccumulate
// into the first term, then Encode): values + decode(addend), or decode(first) + decode(addend); or the sum of the
// arrays of `terms` in their order (float32).
enum class EncodeInput { kValues, kValuesPlusWire, kWirePlusWire, kTerms };

constexpr int kEncodeGroups = 4;                            // groups per lane held in registers
constexpr int kEncodeChunk = kGroupStride * kEncodeGroups;  // 512 elements
constexpr float kMinRange = 1e-36f;

template <typename T>
struct EncodeArgs {
  const T* values;              // kWirePlusWire, kTerms: unused
  const unsigned char* first;   // kWirePlusWire: a wire image of the same layout, the sum's first term
  const unsigned char* addend;  // kValuesPlusWire, kWirePlusWire: a wire image of the same layout, the second term
  float* residual;              // nullptr: no error feedback
  BucketTable table;
  unsigned char* wire;
  bool vector;  // 4-element loads and stores are aligned everywhere (arrays, bucket size, every segment's start)
  float clip;   // 2-8 bits: the range is +-clip * s
  ValueTerms terms;  // kTerms: the arrays summed, at the run's start
};

// Blocks per multiprocessor the compiler must fit. 1 bit, zero threshold: five (at most 51 registers; at 54 only four
// fit, and encoding 256 MiB ran at 0.93x its speed with 48 on an H100); the other modes, and any sum, fit four without
// spilling and spill with five.
template <EncodeMode kMode, EncodeInput kInput>
constexpr int kEncodeMinBlocks = kMode == EncodeMode::kOneBitZero && kInput == EncodeInput::kValues ? 5 : 4;

template <typename T, int kBits, EncodeMode kMode, EncodeInput kInput>
__global__ void __launch_bounds__(kBlockThreads, kEncodeMinBlocks<kMode, kInput>)
    EncodeBucketsKernel(EncodeArgs<T> args) {
  const size_t bucket = (static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x) / kWarpSize;
  const int lane = static_cast<int>(threadIdx.x % kWarpSize);
  if (bucket >= args.table.buckets) return;  // the whole warp leaves together
  const BucketPlace place = Locate(args.table, bucket);
  // Pointers at once, so no 64-bit offset stays live through the kernel (registers: 5 blocks per multiprocessor).
  const int length = place.length;
  const bool vector = args.vector;
  const T* __restrict__ values = args.values != nullptr ? args.values + place.start : nullptr;
  const size_t start = kInput == EncodeInput::kTerms ? place.start : 0;
  float* __restrict__ residual = args.residual != nullptr ? args.residual + place.start : nullptr;
  unsigned char* const bucketWire = args.wire + place.wire;
  const int chunks = (length + kEncodeChunk - 1) / kEncodeChunk;
  // The sum's terms in wire images: their bucket (its header read once), or nothing.
  constexpr bool kWireAddend = kInput == EncodeInput::kValuesPlusWire || kInput == EncodeInput::kWirePlusWire;
  const auto firstTerm = DecoderIf<kBits, kInput == EncodeInput::kWirePlusWire>(args.first, place.wire);
  const auto addend = DecoderIf<kBits, kWireAddend>(args.addend, place.wire);

  // 1. v = values (+ addend) + residual, one chunk at a time (once for buckets of up to 512 elements).
  float v[kEncodeGroups][kGroup];
  auto load = [&](int chunk) {
    if constexpr (kInput == EncodeInput::kTerms) {  // term by term, every group's loads of a term in flight at once
#pragma unroll
      for (int j = 0; j < kEncodeGroups; ++j) {
        const int base = chunk * kEncodeChunk + j * kGroupStride + kGroup * lane;
        LoadGroup(args.terms.at[0] + start + base, GroupAt(base, length, vector), v[j]);
      }
      for (int t = 1; t < args.terms.count; ++t) {
        float term[kEncodeGroups][kGroup];
#pragma unroll
        for (int j = 0; j < kEncodeGroups; ++j) {
          const int base = chunk * kEncodeChunk + j * kGroupStride + kGroup * lane;
          LoadGroup(args.terms.at[t] + start + base, GroupAt(base, length, vector), term[j]);
        }
#pragma unroll
        for (int j = 0; j < kEncodeGroups; ++j) {
#pragma unroll
          for (int c = 0; c < kGroup; ++c) v[j][c] = __fadd_rn(v[j][c], term[j][c]);
        }
      }
    }
#pragma unroll
    for (int j = 0; j < kEncodeGroups; ++j) {
      const int base = chunk * kEncodeChunk + j * kGroupStride + kGroup * lane;
      const Group group = GroupAt(base, length, vector);
      if constexpr (kInput == EncodeInput::kWirePlusWire) {
#pragma unroll
        for (int c = 0; c < kGroup; ++c) v[j][c] = 0.0f;
        if (base < length) firstTerm.Group(base, v[j]);  // a group past the bucket's end has no codes to read
      } else if constexpr (kInput != EncodeInput::kTerms) {
        LoadGroup(values + base, group, v[j]);
      }
      if constexpr (kWireAddend) {
        if (base < length) {
          float decoded[kGroup];
          addend.Group(base, decoded);
#pragma unroll
          for (int c = 0; c < kGroup; ++c) v[j][c] = __fadd_rn(v[j][c], decoded[c]);
        }
      }
      if (residual != nullptr) {
        float r[kGroup];
        LoadGroup(residual + base, group, r);
#pragma unroll
        for (int c = 0; c < kGroup; ++c) v[j][c] = __fadd_rn(v[j][c], r[c]);
      }
    }
  };
  // Calls term(x) for every element of the bucket this lane owns, in increasing index.
  auto forEachOwned = [&](auto term) {
    for (int chunk = 0; chunk < chunks; ++chunk) {
      if (chunks > 1) load(chunk);
#pragma unroll
      for (int j = 0; j < kEncodeGroups; ++j) {
        const int valid = GroupAt(chunk * kEncodeChunk + j * kGroupStride + kGroup * lane, length, false).valid;
#pragma unroll
        for (int c = 0; c < kGroup; ++c) {
          if (c < valid) term(v[j][c]);
        }
      }
    }
  };
  if (chunks == 1) load(0);

  // 2. Statistics.
  const float count = static_cast<float>(length);
  float first;
  float second;
  float threshold = 0.0f;
  if constexpr (kMode == EncodeMode::kOneBitZero) {
    float lowerSum = 0.0f;
    float upperSum = 0.0f;
    unsigned upperCount = 0;
    forEachOwned([&](float x) {
      lowerSum = __fadd_rn(lowerSum, x >= 0.0f ? 0.0f : x);
      upperSum = __fadd_rn(upperSum, x >= 0.0f ? x : 0.0f);
      upperCount += x >= 0.0f ? 1u : 0u;
    });
    lowerSum = WarpCanonicalSum(lowerSum);
    upperSum = WarpCanonicalSum(upperSum);
    upperCount = __reduce_add_sync(kFullMask, upperCount);
    const unsigned lowerCount = static_cast<unsigned>(length) - upperCount;
    first = lowerCount != 0 ? __fdiv_rn(lowerSum, static_cast<float>(lowerCount)) : 0.0f;
    second = upperCount != 0 ? __fdiv_rn(upperSum, static_cast<float>(upperCount)) : 0.0f;
  } else if constexpr (kMode == EncodeMode::kOneBitMean) {
    float sum = 0.0f;
    forEachOwned([&](float x) { sum = __fadd_rn(sum, x); });
    const float mean = __fdiv_rn(WarpCanonicalSum(sum), count);
    float deviationSum = 0.0f;
    forEachOwned([&](float x) { deviationSum = __fadd_rn(deviationSum, fabsf(__fsub_rn(x, mean))); });
    const float deviation = __fdiv_rn(WarpCanonicalSum(deviationSum), count);
    threshold = mean;
    first = __fsub_rn(mean, deviation);
    second = __fadd_rn(mean, deviation);
  } else {
    float squares = 0.0f;
    forEachOwned([&](float x) { squares = __fadd_rn(squares, __fmul_rn(x, x)); });
    const float stddev = __fsqrt_rn(__fdiv_rn(WarpCanonicalSum(squares), count));
    first = __fmul_rn(-args.clip, stddev);
    second = __fmul_rn(args.clip, stddev);
  }
  const bool finite = isfinite(first) && isfinite(second);  // the same in every lane

  // 3. Codes and residuals.
  constexpr uint32_t kMaxCode = (1u << kBits) - 1;
  constexpr int kLanesPerWord = 8 / kBits;  // lanes whose 4 codes share one 32-bit word
  const float cells = static_cast<float>(1u << kBits);
  const float range = __fsub_rn(second, first);
  const bool degenerate = range < kMinRange;
  const float step = __fmul_rn(range, 1.0f / cells);  // range / 2^bits: exact reciprocal, the CPU's rounding
  const float codeScale = __fdiv_rn(cells, range);
  auto* words = reinterpret_cast<uint32_t*>(bucketWire + 2 * sizeof(float));
  const int wordCount = (length * kBits + 31) / 32;
  for (int chunk = 0; chunk < chunks; ++chunk) {
    if (chunks > 1) load(chunk);
#pragma unroll
    for (int j = 0; j < kEncodeGroups; ++j) {
      const int base = chunk * kEncodeChunk + j * kGroupStride + kGroup * lane;
      const Group group = GroupAt(base, length, vector);
      uint32_t packed = 0;
      float left[kGroup];
#pragma unroll
      for (int c = 0; c < kGroup; ++c) {
        const float x = v[j][c];
        uint32_t code;
        float decoded;
        if constexpr (kBits == 1) {
          code = x >= threshold ? 1u : 0u;
          decoded = code != 0 ? second : first;
        } else {
          const float clipped = x < first ? first : (x > second ? second : x);
          const float scaled = __fmul_rn(__fsub_rn(clipped, first), codeScale);
          const uint32_t floored =
              static_cast<uint32_t>(__float2int_rz(scaled >= 0.0f && scaled < cells ? scaled : 0.0f));
          code = degenerate ? 0u : (scaled >= cells ? kMaxCode : floored);
          decoded = degenerate ? 0.0f : __fadd_rn(first, __fmul_rn(__fadd_rn(static_cast<float>(code), 0.5f), step));
        }
        if (c < group.valid && finite) packed |= code << (c * kBits);
        left[c] = __fsub_rn(x, decoded);
      }
      if (residual != nullptr && finite) StoreGroup(residual + base, group, left);
      // The lanes of one word sit next to each other: OR their 4*kBits-bit pieces together.
      packed <<= (lane % kLanesPerWord) * kGroup * kBits;
#pragma unroll
      for (int offset = 1; offset < kLanesPerWord; offset *= 2) packed |= __shfl_xor_sync(kFullMask, packed, offset);
      const int word = (chunk * kEncodeChunk + j * kGroupStride) * kBits / 32 + lane / kLanesPerWord;
      if (lane % kLanesPerWord == 0 && word < wordCount) words[word] = packed;
    }
  }

  // 4. The header.
  if (lane == 0) {
    auto* header = reinterpret_cast<float*>(bucketWire);
    header[0] = first;
    header[1] = second;
  }
}

// Bits 32: v = values (+ addend) + residual goes out as raw floats (wire images are raw floats: the first term may be
// one, passed as values); the residual becomes 0.
template <typename T>
__global__ void EncodeRawKernel(const T* __restrict__ values, const float* __restrict__ addend,
                                float* __restrict__ residual, size_t count, float* __restrict__ wire) {
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const float x = addend != nullptr ? __fadd_rn(ToFloat(values[i]), addend[i]) : ToFloat(values[i]);
    if (residual != nullptr) {
      wire[i] = __fadd_rn(x, residual[i]);
      residual[i] = 0.0f;
    } else {
      wire[i] = x;
    }
  }
}

}  // namespace gradagg::cuda_detail
