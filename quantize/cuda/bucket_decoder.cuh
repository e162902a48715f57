// One bucket of a wire image as values, for a lane's 4-element groups: the decode kernel writes them, the encoder of
// a sum adds them (encode_kernel.cuh). Values are exactly what the encoder's residual assumed: lower + (code + 0.5)
// * step (0 for a degenerate range), or the 1-bit pair; every element of a non-finite bucket decodes to
// first + second, which is the range rule with lower end first + second and step 0, so the loop is the same for all.
#pragma once

#include <cstddef>
#include <cstdint>

#include "quantize/cuda/bucket_lanes.cuh"

namespace gradagg::cuda_detail {

template <int kBits>
class BucketDecoder {
 public:
  // `bucketWire`: the bucket's two header floats, then its codes.
  __device__ explicit BucketDecoder(const unsigned char* bucketWire)
      : words_(reinterpret_cast<const uint32_t*>(bucketWire + 2 * sizeof(float))) {
    const float first = reinterpret_cast<const float*>(bucketWire)[0];
    const float second = reinterpret_cast<const float*>(bucketWire)[1];
    finite_ = isfinite(first) && isfinite(second);
    const float nonFiniteValue = __fadd_rn(first, second);
    const float range = __fsub_rn(second, first);
    degenerate_ = finite_ && range < 1e-36f;
    low_ = finite_ ? first : nonFiniteValue;    // 1 bit: code 0; more bits: the range's lower end
    high_ = finite_ ? second : nonFiniteValue;  // 1 bit: code 1
    // range / 2^bits as a product with the exact reciprocal: the same rounding as the CPU's division, no divide.
    step_ = finite_ ? __fmul_rn(range, 1.0f / static_cast<float>(1u << kBits)) : 0.0f;
  }

  __device__ bool finite() const { return finite_; }

  // The values of the group at bucket offset `base` (< the bucket's length; elements past it get some value).
  __device__ void Group(int base, float (&out)[kGroup]) const {
    constexpr uint32_t kMask = (1u << kBits) - 1;
    const uint32_t word = words_[base * kBits / 32] >> ((base * kBits) % 32);
#pragma unroll
    for (int c = 0; c < kGroup; ++c) {
      const uint32_t code = (word >> (c * kBits)) & kMask;
      if constexpr (kBits == 1) {
        out[c] = code != 0 ? high_ : low_;
      } else {
        out[c] = degenerate_ ? 0.0f : __fadd_rn(low_, __fmul_rn(__fadd_rn(static_cast<float>(code), 0.5f), step_));
      }
    }
  }

 private:
  const uint32_t* __restrict__ words_;
  float low_;
  float high_;
  float step_;
  bool finite_;
  bool degenerate_;
};

// The decoder of the bucket at byte `offset` of `wire` where kUsed, else a placeholder (0) that holds nothing; `wire`
// is not touched unless used (it may be null then).
template <int kBits, bool kUsed>
__device__ inline auto DecoderIf(const unsigned char* wire, size_t offset) {
  if constexpr (kUsed) {
    return BucketDecoder<kBits>(wire + offset);
  } else {
    return 0;
  }
}

}  // namespace gradagg::cuda_detail
