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

// Terms that peers push into this GPU's memory while the reader runs (intra_node/cuda/peer_group.h LeaveToReader):
// term t's elements in chunk c (counted from the terms' first element plus `offset`, `chunk` elements each) may be
// read once flags[t * stride + c] >= epoch (acquire). Term `self` is never waited for. A wait longer than timeoutNs
// claims *failedClaim (device memory; later waits of the call give up at once), records the term and chunk in
// *failure (host-mapped, the term last) and goes on with whatever is there: the caller reports the failure after the
// call. flags == nullptr: every term is in place.
struct TermArrivalFailure {
  unsigned long long chunk;
  unsigned long long epoch;
  int term;  // written last, and only once: -1 while nothing failed
};

struct TermArrival {
  const unsigned long long* flags = nullptr;
  int stride = 0;
  int self = -1;
  unsigned long long epoch = 0;
  size_t chunk = 1;
  size_t offset = 0;
  unsigned long long timeoutNs = 0;
  int* failedClaim = nullptr;
  TermArrivalFailure* failure = nullptr;
};

// The terms of a sum, and when pushed ones may be read.
struct ValueTerms : ValueArrays<const float> {
  TermArrival arrival;

  ValueTerms Shifted(size_t offset) const {
    ValueTerms shifted = *this;
    for (int i = 0; i < count; ++i) shifted.at[i] += offset;
    shifted.arrival.offset += offset;
    return shifted;
  }
};
using ValueCopies = ValueArrays<float>;

// Throws std::invalid_argument unless 1 <= count <= 16; `what` names the call.
inline void CheckArrayCount(const char* what, int count) {
  if (count < 1 || count > ValueArrays<float>::kMax)
    throw std::invalid_argument(std::string(what) + ": " + std::to_string(count) + " arrays (1 to 16)");
}

}  // namespace gradagg
