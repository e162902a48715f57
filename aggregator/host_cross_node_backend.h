// Phase 2's backend in host memory: the CPU quantizer, MPI on host buffers (cross_node_backend.h).
#pragma once

#include <memory>

#include "aggregator/cross_node_backend.h"
#include "gradagg/options.h"

namespace gradagg {

std::unique_ptr<CrossNodeBackend> MakeHostCrossNodeBackend(const AggregatorOptions& options);

}  // namespace gradagg
