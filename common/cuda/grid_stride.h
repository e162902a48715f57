// The launch shape of the element-wise kernels that walk their range with a grid-stride loop: 256 threads a block,
// one block per 256 elements up to 8192 blocks, the loop covering the rest.
#pragma once

#include <cstddef>

namespace gradagg::cuda_detail {

constexpr int kGridStrideThreads = 256;
constexpr unsigned kGridStrideMaxBlocks = 8192;

inline unsigned GridStrideBlocks(size_t count) {
  const size_t blocks = (count + kGridStrideThreads - 1) / kGridStrideThreads;
  return static_cast<unsigned>(blocks < kGridStrideMaxBlocks ? blocks : kGridStrideMaxBlocks);
}

}  // namespace gradagg::cuda_detail
