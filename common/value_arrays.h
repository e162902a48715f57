// One float32 array per local rank of a node (at most 16), each at the same element: how phase 2 reads and writes
// the node's gradients itself when phases 1 and 3 are left to it (intra_node/, aggregator/three_phases.h), and how the
// quantizer takes them (quantize/).
//
// ValueTerms: values given as the sum of the arrays, added in order (the first assigned, each further one a rounding
// of its own), formed as they are read. ValueCopies: the same values stored to every array.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>

namespace gradagg {

template <typename T>
struct ValueArrays {
  static constexpr int kMax = 16;  // the local ranks of a node at most (intra_node/cuda/control_block.h)
  T* at[kMax] = {};
  int count = 0;

  // The same arrays from element `offset` on.
  ValueArrays Shifted(size_t offset) const {
    ValueArrays shifted = *this;
    for (int i = 0; i < count; ++i) shifted.at[i] += offset;
    return shifted;
  }
};

using ValueTerms = ValueArrays<const float>;
using ValueCopies = ValueArrays<float>;

// Throws std::invalid_argument unless 1 <= count <= 16; `what` names the call.
inline void CheckArrayCount(const char* what, int count) {
  if (count < 1 || count > ValueArrays<float>::kMax)
    throw std::invalid_argument(std::string(what) + ": " + std::to_string(count) + " arrays (1 to 16)");
}

}  // namespace gradagg
