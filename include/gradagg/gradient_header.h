// The CNTK gradient header: per-rank training statistics summed over all ranks with every aggregation.
#pragma once

#include <cstdint>
#include <vector>

namespace gradagg {

struct EvalError {
  double errorSum = 0.0;
  uint64_t numSamples = 0;
};

struct GradientHeader {
  uint64_t numSamples = 0;  // 0: this rank contributes zero gradients
  uint64_t numSamplesWithLabel = 0;
  double criterion = 0.0;
  std::vector<EvalError> evalErrors;  // every rank passes the same number of entries
};

}  // namespace gradagg
