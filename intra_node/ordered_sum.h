// The node's float32 sum in local-rank order, on Highway's vectors: the one arithmetic step of the host phases 1
// and 3 (docs/DESIGN.md: the first term assigned, each further term added in order, one rounding per addition).
#pragma once

#include <cstddef>

namespace gradagg {

// How SumInOrder stores to `out`: through the cache, or streamed past it to memory (for a destination far larger than
// the cache that nothing reads soon: it saves reading each line in before writing it).
enum class Stores { kCached, kStreamed };

// out[i] = (...((terms[0][i] + terms[1][i]) + terms[2][i]) ...) + terms[count - 1][i] for i < length, stored to
// `out` and, unless null, also to `alsoOut` (cached). One term is a copy to one or two places. Element-wise: `out`
// may be one of the terms (in place); no other overlap is allowed.
void SumInOrder(const float* const* terms, size_t count, size_t length, float* out, float* alsoOut,
                Stores stores = Stores::kCached);

// The instruction set the sum runs on here (Highway's name for it).
const char* OrderedSumTarget();

}  // namespace gradagg
