// What `--check` says when a result is not bitwise the serial simulation's: how many elements differ, the first
// (with both values) and the last, so a rare failure leaves a trace to follow.
#pragma once

#include <string>
#include <vector>

namespace gradagg::cli {

struct Differences {
  size_t count = 0;  // elements whose bits differ
  size_t first = 0, last = 0;
  std::string description;  // "" when none; else "N of M elements differ; first at element I (got X, expected Y),
                            // last at element J"
};

// `result` against `expected` (of the same length), bit by bit.
Differences CompareBitwise(const std::vector<float>& result, const std::vector<float>& expected);

}  // namespace gradagg::cli
