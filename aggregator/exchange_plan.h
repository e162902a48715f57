// Phase 2's plan for one stripe length, the same for the CPU phase (cross_node_phase.h) and the GPU one
// (cuda/device_cross_node_phase.h): which node owns which sub-stripe (whole buckets, CNTK's rule), where each
// sub-stripe's codes start in the stripe's wire image, and what one call sends.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <vector>

#include "nvlink/flat_buffers.h"
#include "quantize/quantizer_config.h"

namespace gradagg {

// This rank's node index and the node count in `cross` (one rank per node, ordered by node index).
struct NodePosition {
  size_t node = 0;
  size_t nodes = 1;
};
NodePosition PositionIn(MPI_Comm cross);

struct ExchangePlan {
  ExchangePlan() = default;
  ExchangePlan(size_t length, NodePosition position, const QuantizerConfig& quantizer);

  std::vector<ElementRange> subStripes;  // relative to the stripe, one per node
  std::vector<size_t> wireOffsets;       // byte offset of each sub-stripe in the stripe's wire image
  std::vector<size_t> wireBytes;         // each sub-stripe's encoded size
  ElementRange own;                      // the sub-stripe this node owns
  size_t ownWireBytes = 0;
  size_t bytesSent = 0;   // per call: each other owner's part of our stripe, and our quantized sum to each other node
  size_t floatBytes = 0;  // what the same exchange would send as float32
};

}  // namespace gradagg
