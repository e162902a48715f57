// Gradients in host memory, for Aggregator::AggregateGradients. Usable without MPI's headers.
#pragma once

#include <cstddef>

namespace gradagg {

// One float32 tensor in host memory; a list of them forms one flat gradient, in order.
struct GradientBuffer {
  float* data = nullptr;
  size_t count = 0;
};

}  // namespace gradagg
