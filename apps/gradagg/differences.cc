#include "apps/gradagg/differences.h"

#include <cstdint>
#include <cstdio>
#include <cstring>

namespace gradagg::cli {

Differences CompareBitwise(const std::vector<float>& result, const std::vector<float>& expected) {
  const auto bits = [](float value) {
    uint32_t word;
    std::memcpy(&word, &value, sizeof word);
    return word;
  };
  Differences found;
  for (size_t i = 0; i < expected.size(); ++i) {
    if (bits(expected[i]) == bits(result[i])) continue;
    if (found.count++ == 0) found.first = i;
    found.last = i;
  }
  if (found.count == 0) return found;
  char line[256];
  std::snprintf(line, sizeof line,
                "%zu of %zu elements differ; first at element %zu (got %.9g, expected %.9g), last at element %zu",
                found.count, expected.size(), found.first, static_cast<double>(result[found.first]),
                static_cast<double>(expected[found.first]), found.last);
  found.description = line;
  return found;
}

}  // namespace gradagg::cli
