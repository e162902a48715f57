// The deterministic scenario that test_numpy.py replays through the Python package: tensors of awkward lengths,
// values that float32 holds exactly and both languages compute alike, three calls per bit width (so the carried
// quantization error matters).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace gradagg::test {

inline const std::vector<size_t> kScenarioLengths = {3, 5000, 1, 700};
inline const std::vector<int> kScenarioBits = {1, 8, 32};
inline constexpr int kScenarioSteps = 3;

// Element i of tensor t on `rank` at `step`: a multiple of 1/4096 in [-8, 8).
inline float ScenarioValue(uint64_t i, uint64_t t, uint64_t rank, uint64_t step) {
  const uint64_t hash = (i * 2654435761u + rank * 40503u + step * 977u + t * 131u) % 65536u;
  return static_cast<float>(static_cast<double>(hash) / 4096.0 - 8.0);
}

}  // namespace gradagg::test
