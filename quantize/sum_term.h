// Inputs of an encode that are sums, formed while encoding instead of being stored first.
//
// SumTerm: the first term of EncodeSum, float32 values in the caller's kind of memory, or a wire image of the sum's
// layout, decoded on the fly. One of the two is set (either may be null for an empty layout).
// ValueTerms (common/value_arrays.h): the values as a sum of arrays, for EncodeTerms.
#pragma once

#include "common/value_arrays.h"

namespace gradagg {

struct SumTerm {
  const float* values = nullptr;
  const void* wire = nullptr;
};

}  // namespace gradagg
