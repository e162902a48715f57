// The relative L2 error |result - exact| / |exact|, in double, as the quantization-quality tests state their bounds.
#pragma once

#include <cmath>
#include <vector>

namespace gradagg::test {

inline double RelativeL2Error(const std::vector<float>& result, const std::vector<float>& exact) {
  double error = 0.0;
  double norm = 0.0;
  for (size_t i = 0; i < exact.size(); ++i) {
    const double difference = static_cast<double>(result[i]) - exact[i];
    error += difference * difference;
    norm += static_cast<double>(exact[i]) * exact[i];
  }
  return std::sqrt(error / norm);
}

}  // namespace gradagg::test
