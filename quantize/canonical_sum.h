// The one summation order of every bucket statistic, shared by the CPU codec (bucket_codec.cc, in SIMD) and the
// CUDA kernels so that both produce the same bits:
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

}  // namespace gradagg
