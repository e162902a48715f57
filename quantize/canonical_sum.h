// The one summation order of every bucket statistic, shared by the CPU quantizer and the CUDA kernels so that
// both produce the same bits:
//   1. 32 lanes; element i belongs to lane (i / 4) % 32, so lane k owns the 4-element groups k, k + 32, k + 64, ...
//      (what one warp gets when it reads the bucket as float4s, or as scalars in the same assignment);
//   2. each lane adds its elements' terms in increasing i, starting from +0.0f;
//   3. the 32 lane sums are folded by a butterfly: for step = 16, 8, 4, 2, 1: lane[k] = lane[k] + lane[k + step].
//      (A warp's xor-shuffle reduction computes exactly this in every lane, since a + b == b + a bitwise.)
// Every addition is one float32 rounding: no FMA contraction, no reassociation.
#pragma once

#include <cstddef>

namespace gradagg {

inline constexpr int kSumLanes = 32;
inline constexpr size_t kLaneGroup = 4;

template <typename Term>
float CanonicalSum(size_t length, Term term) {
  float lanes[kSumLanes] = {};
  for (size_t i = 0; i < length; ++i) lanes[(i / kLaneGroup) % kSumLanes] += term(i);
  for (int step = kSumLanes / 2; step > 0; step /= 2) {
    for (int k = 0; k < step; ++k) lanes[k] += lanes[k + step];
  }
  return lanes[0];
}

}  // namespace gradagg
