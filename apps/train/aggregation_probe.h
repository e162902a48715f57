// --probe: how far each aggregation is from the exact one, measured beside the training (CPU model, host gradients).
//
// Per step it sums, in float64 over all ranks, this rank's gradient G (before the optimizer's carry) and what went
// into AggregateGradients, X; after the aggregation A it takes the step's error in gradient units
// e = (A - X) / s (s: the gradient's scale in the carry) and writes, every N steps, on rank 0:
//   cosine(G + e, G)      how well the gradient the optimizer effectively used points along the exact one;
//   |e| / |G|             the step's relative error;
//   |R| / |G|             R = -(e summed over all steps so far): what error feedback still owes, which is the sum of
//                         every rank's residuals (both stages) in gradient units.
#pragma once

#include <cstddef>
#include <fstream>
#include <string>
#include <vector>

#include "model.h"

namespace gradagg::train {

class AggregationProbe {
 public:
  // Rank 0 writes `path` (CSV); every rank must make the same calls.
  AggregationProbe(const std::string& path, size_t every, float gradientScale, int rank);

  void BeforeCarry(const GradientTensors& gradient);
  void BeforeAggregation(const GradientTensors& gradient);
  void AfterAggregation(size_t step, const GradientTensors& aggregate);

 private:
  size_t every_;
  float gradientScale_;
  int rank_;
  std::ofstream csv_;
  std::vector<double> gradient_;  // G, then summed
  std::vector<double> sent_;      // X, then summed
  std::vector<double> owed_;      // R
};

}  // namespace gradagg::train
