// The first term of a sum that is encoded without being stored (EncodeSum): float32 values in the caller's kind of
// memory, or a wire image of the sum's layout, decoded on the fly. One of the two is set (either may be null for an
// empty layout).
#pragma once

namespace gradagg {

struct SumTerm {
  const float* values = nullptr;
  const void* wire = nullptr;
};

}  // namespace gradagg
