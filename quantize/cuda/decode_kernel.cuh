// Decode (or decode-and-accumulate, or decode into several arrays), one warp per bucket: every lane reads the
// bucket's two header floats, then for each of its 4-element groups the 32-bit word that holds their codes, and
// writes 4 values (bucket_decoder.cuh); lane 0 counts a non-finite bucket.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "common/value_arrays.h"
#include "quantize/cuda/bucket_decoder.cuh"
#include "quantize/cuda/bucket_lanes.cuh"
#include "quantize/cuda/bucket_table.h"

namespace gradagg::cuda_detail {

template <typename TOut>
struct DecodeArgs {
  const unsigned char* wire;
  BucketTable table;
  TOut* out;  // decode: written; accumulate (float only): out[i] += value; copies: unused
  bool vector;
  unsigned long long* nonFinite;  // nullptr, or a counter of non-finite buckets
  ValueCopies copies;             // kCopies (float only): every array written with the same values
};

template <typename TOut, int kBits, bool kAccumulate, bool kCopies = false>
__global__ void DecodeBucketsKernel(DecodeArgs<TOut> args) {
  static_assert(!kCopies || std::is_same_v<TOut, float>, "copies are float32 (ValueCopies)");
  const size_t bucket = (static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x) / kWarpSize;
  const int lane = static_cast<int>(threadIdx.x % kWarpSize);
  if (bucket >= args.table.buckets) return;
  const BucketPlace place = Locate(args.table, bucket);
  const int length = place.length;
  const BucketDecoder<kBits> decoder(args.wire + place.wire);
  TOut* __restrict__ out = kCopies ? nullptr : args.out + place.start;
  if (!decoder.finite() && lane == 0 && args.nonFinite != nullptr) atomicAdd(args.nonFinite, 1ull);
  // Copies may be peer GPUs' memory: their whole groups go as 16-byte stores (bucket_lanes.cuh, WideStore).
  constexpr WideStore kWide = kCopies ? WideStore::kVector : WideStore::kPlain;
#pragma unroll 4
  for (int base = kGroup * lane; base < length; base += kGroupStride) {
    const Group group = GroupAt(base, length, args.vector);
    float decoded[kGroup];
    decoder.Group(base, decoded);
    if constexpr (kCopies) {
      for (int c = 0; c < args.copies.count; ++c)
        StoreGroup<TOut, kWide>(args.copies.at[c] + place.start + base, group, decoded);
    } else if constexpr (kAccumulate) {
      float sum[kGroup];
      LoadGroup(out + base, group, sum);
#pragma unroll
      for (int c = 0; c < kGroup; ++c) sum[c] = __fadd_rn(sum[c], decoded[c]);
      StoreGroup<TOut, kWide>(out + base, group, sum);
    } else {
      StoreGroup<TOut, kWide>(out + base, group, decoded);
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
