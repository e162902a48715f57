// Decode (or decode-and-accumulate), one warp per bucket: every lane reads the bucket's two header floats, then
// for each of its 4-element groups the 32-bit word that holds their codes, and writes 4 values. Values are computed
// exactly as the encoder's residual assumed: lower + (code + 0.5) * step (0 for a degenerate range), or the 1-bit
// pair; every element of a non-finite bucket decodes to first + second, and lane 0 counts the bucket.
#pragma once

#include <cstddef>
#include <cstdint>

#include "quantize/cuda/bucket_lanes.cuh"
#include "quantize/cuda/bucket_table.h"

namespace gradagg::cuda_detail {

template <typename TOut>
struct DecodeArgs {
  const unsigned char* wire;
  BucketTable table;
  TOut* out;  // decode: written; accumulate (float only): out[i] += value
  bool vector;
  unsigned long long* nonFinite;  // nullptr, or a counter of non-finite buckets
};

template <typename TOut, int kBits, bool kAccumulate>
__global__ void DecodeBucketsKernel(DecodeArgs<TOut> args) {
  const size_t bucket = (static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x) / kWarpSize;
  const int lane = static_cast<int>(threadIdx.x % kWarpSize);
  if (bucket >= args.table.buckets) return;
  const BucketPlace place = Locate(args.table, bucket);
  const int length = place.length;
  const unsigned char* in = args.wire + place.wire;
  const float first = reinterpret_cast<const float*>(in)[0];
  const float second = reinterpret_cast<const float*>(in)[1];
  const uint32_t* __restrict__ words = reinterpret_cast<const uint32_t*>(in + 2 * sizeof(float));
  TOut* __restrict__ out = args.out + place.start;

  constexpr uint32_t kMask = (1u << kBits) - 1;
  // Per bucket, not per element: a non-finite bucket decodes every code to first + second, which is the range rule
  // with lower end first + second and step 0 (or the 1-bit pair both set to it), so the element loop is the same for all.
  const bool finite = isfinite(first) && isfinite(second);
  const float nonFiniteValue = __fadd_rn(first, second);
  if (!finite && lane == 0 && args.nonFinite != nullptr) atomicAdd(args.nonFinite, 1ull);
  const float range = __fsub_rn(second, first);
  const bool degenerate = finite && range < 1e-36f;
  const float lower = finite ? first : nonFiniteValue;
  // range / 2^bits as a product with the exact reciprocal: the same rounding as the CPU's division, no divide.
  const float step = finite ? __fmul_rn(range, 1.0f / static_cast<float>(1u << kBits)) : 0.0f;
  const float low = finite ? first : nonFiniteValue;    // 1 bit: code 0
  const float high = finite ? second : nonFiniteValue;  // 1 bit: code 1
#pragma unroll 4
  for (int base = kGroup * lane; base < length; base += kGroupStride) {
    const Group group = GroupAt(base, length, args.vector);
    const uint32_t word = words[base * kBits / 32] >> ((base * kBits) % 32);
    float decoded[kGroup];
#pragma unroll
    for (int c = 0; c < kGroup; ++c) {
      const uint32_t code = (word >> (c * kBits)) & kMask;
      if constexpr (kBits == 1) {
        decoded[c] = code != 0 ? high : low;
      } else {
        decoded[c] = degenerate ? 0.0f : __fadd_rn(lower, __fmul_rn(__fadd_rn(static_cast<float>(code), 0.5f), step));
      }
    }
    if constexpr (kAccumulate) {
      float sum[kGroup];
      LoadGroup(out + base, group, sum);
#pragma unroll
      for (int c = 0; c < kGroup; ++c) sum[c] = __fadd_rn(sum[c], decoded[c]);
      StoreGroup(out + base, group, sum);
    } else {
      StoreGroup(out + base, group, decoded);
    }
  }
}

// Bits 32: raw floats.
template <typename TOut, bool kAccumulate>
__global__ void DecodeRawKernel(const float* __restrict__ wire, size_t count, TOut* __restrict__ out) {
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    if constexpr (kAccumulate) {
      out[i] = __fadd_rn(out[i], wire[i]);
    } else {
      out[i] = FromFloat<TOut>(wire[i]);
    }
  }
}

}  // namespace gradagg::cuda_detail
