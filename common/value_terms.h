// Values given as the sum of `count` float32 arrays, added in order (the first assigned, each further one a rounding
// of its own), for a reader that forms the sum as it reads them: the node's reduce-scatter terms (one array per local
// rank, intra_node/) that phase 2's quantizer encodes without the sum being stored (quantize/).
#pragma once

#include <cstddef>

namespace gradagg {

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
