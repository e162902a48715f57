// A range of element indices, the unit in which every phase names its part of a gradient (shards, stripes,
// sub-stripes).
#pragma once

#include <cstddef>

namespace gradagg {

// The elements [begin, begin + count).
struct ElementRange {
  size_t begin = 0;
  size_t count = 0;
  size_t end() const { return begin + count; }
};

}  // namespace gradagg
