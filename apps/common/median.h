// The median of a benchmark's repeated timings (the mean of the middle two for an even count).
#pragma once

#include <algorithm>
#include <vector>

namespace gradagg::cli {

inline double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

}  // namespace gradagg::cli
