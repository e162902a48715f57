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

// Sum of term(i) for i in [0, length), in the canonical order. Written block by block (128 elements: every lane's
// 4-element group once) so that the compiler keeps the lanes in registers and vectorizes across them; within a
// lane the terms still come in increasing i.
template <typename Term>
float CanonicalSum(size_t length, Term term) {
  constexpr size_t kBlock = kSumLanes * kLaneGroup;
  float lanes[kSumLanes] = {};
  size_t base = 0;
  for (; base + kBlock <= length; base += kBlock) {
    for (size_t c = 0; c < kLaneGroup; ++c) {
      for (size_t k = 0; k < kSumLanes; ++k) lanes[k] += term(base + kLaneGroup * k + c);
    }
  }
  for (size_t i = base; i < length; ++i) lanes[(i - base) / kLaneGroup] += term(i);
  for (int step = kSumLanes / 2; step > 0; step /= 2) {
    for (int k = 0; k < step; ++k) lanes[k] += lanes[k + step];
  }
  return lanes[0];
}

}  // namespace gradagg
