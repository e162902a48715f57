// Phase 2's plan (cross_node_phase.h) for one stripe length, on either backend: which node owns which sub-stripe
// (whole buckets, CNTK's rule), where each sub-stripe's codes start in the stripe's wire image, and what one call
// sends.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <vector>

#include "ground/element_range.h"
#include "mpi_glue/ordered_exchange.h"
#include "quantize/bucket_layout.h"
#include "quantize/quantizer_config.h"

namespace gradagg {

// This rank's node index and the node count in `cross` (one rank per node, ordered by node index).
struct NodePosition {
  size_t node = 0;
  size_t nodes = 1;
};
NodePosition PositionIn(MPI_Comm cross);

// One exchange's messages, indexed by node (this node's own entries stay empty).
struct ExchangeMessages {
  std::vector<SendBuffer> sends;
  std::vector<ReceiveBuffer> receives;
};

struct ExchangePlan {
  ExchangePlan() = default;
  // `stripe`: the layout of the stripe this rank exchanges.
  ExchangePlan(const BucketLayout& stripe, NodePosition position, const QuantizerConfig& quantizer);

  // Step 2: every other owner gets its part of our stripe's wire image, and sends us its part of our sub-stripe,
  // which lands in slot j of `received` (slots `slotBytes` apart).
  ExchangeMessages Scatter(const unsigned char* stripeWire, unsigned char* received, size_t slotBytes) const;
  // Step 4: every other node gets our quantized sum, and each owner's lands at its place in the wire image.
  ExchangeMessages Gather(const void* ownWire, unsigned char* stripeWire) const;

  NodePosition position;

  BucketLayout stripe;
  std::vector<ElementRange> subStripes;  // relative to the stripe, one per node
  std::vector<BucketLayout> subLayouts;  // each sub-stripe's buckets
  std::vector<size_t> wireOffsets;       // byte offset of each sub-stripe in the stripe's wire image
  std::vector<size_t> wireBytes;         // each sub-stripe's encoded size
  ElementRange own;                      // the sub-stripe this node owns
  size_t ownWireBytes = 0;
  size_t stripeWireBytes = 0;
  size_t bytesSent = 0;   // per call: each other owner's part of our stripe, and our quantized sum to each other node
  size_t floatBytes = 0;  // what the same exchange would send as float32
};

}  // namespace gradagg
