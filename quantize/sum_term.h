// Inputs of an encode that are sums, formed while encoding instead of being stored first.
//
// SumTerm: the first term of EncodeSum, float32 values in the caller's kind of memory, or a wire image of the sum's
// layout, decoded on the fly. One of the two is set (either may be null for an empty layout).
//
// ValueTerms: the values to encode as the sum of `count` float32 arrays, added in order (the first assigned, each
// further one a rounding of its own), e.g. the node's reduce-scatter sum read from every local rank's gradient.
#pragma once

#include <cstddef>

namespace gradagg {

struct SumTerm {
  const float* values = nullptr;
  const void* wire = nullptr;
};

struct ValueTerms {
  static constexpr int kMax = 16;  // the local ranks of a node at most (intra_node/cuda/control_block.h)
  const float* at[kMax] = {};
  int count = 0;

  // The same sum from element `offset` on.
  ValueTerms Shifted(size_t offset) const {
    ValueTerms shifted = *this;
    for (int i = 0; i < count; ++i) shifted.at[i] += offset;
    return shifted;
  }
};

}  // namespace gradagg
