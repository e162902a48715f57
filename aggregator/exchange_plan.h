// Phase 2's plan (cross_node_phase.h) for one stripe length, on either backend: which node owns which sub-stripe
// (whole buckets, CNTK's rule), how each sub-stripe is cut into pieces (runs of whole buckets, by the same rule) that
// are quantized, sent, summed and sent on one at a time, where each piece's codes lie in the stripe's wire image, and
// what one call sends.
//
// Parts are indexed as the exchange's entries are (ordered_exchange.h): part piece * nodes + j is that piece of
// sub-stripe j.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <vector>

#include "common/element_range.h"
#include "mpi/ordered_exchange.h"
#include "quantize/bucket_layout.h"
#include "quantize/quantizer_config.h"

namespace gradagg {

// This rank's node index and the node count in `cross` (one rank per node, ordered by node index).
struct NodePosition {
  size_t node = 0;
  size_t nodes = 1;
};
NodePosition PositionIn(MPI_Comm cross);

// One exchange's messages, indexed by part (this node's own entries stay empty).
struct ExchangeMessages {
  std::vector<SendBuffer> sends;
  std::vector<ReceiveBuffer> receives;
};

// At most this many messages per exchange and rank: pieces are capped at this over the other nodes. A CUDA-aware
// Open MPI holds a CUDA event per message in flight from device memory (mpi_common_cuda_event_max, 400 by default)
// and crawls once they run out (measured: 4 MiB at 32 bits on 4 nodes took 1.2 s in 1536 pieces).
inline constexpr size_t kMaxMessagesPerExchange = 256;

struct ExchangePlan {
  ExchangePlan() = default;
  // `stripe`: the layout of the stripe this rank exchanges. Sub-stripes are cut into as many pieces as it takes to
  // keep the largest piece's codes within `pieceBytes` (0: one piece), at most one piece per bucket and at most
  // kMaxMessagesPerExchange messages to the other nodes.
  ExchangePlan(const BucketLayout& stripe, NodePosition position, const QuantizerConfig& quantizer, size_t pieceBytes);

  // Step 2: every other owner gets its parts of our stripe's wire image, and sends us its parts of our sub-stripe,
  // which land in slot j of `received` (slots `slotBytes` apart), each at its place in our sub-stripe's wire image.
  ExchangeMessages Scatter(const unsigned char* stripeWire, unsigned char* received, size_t slotBytes) const;
  // Step 4: every other node gets our quantized sum, piece by piece, and each owner's lands at its place in the wire
  // image.
  ExchangeMessages Gather(const void* ownWire, unsigned char* stripeWire) const;

  size_t Owner(size_t part) const { return part % position.nodes; }
  // The part of our own sub-stripe in the same piece as `part`.
  size_t OwnPart(size_t part) const { return part - Owner(part) + position.node; }
  // Where `part`'s codes start in the stripe's wire image.
  size_t StripeWireOffset(size_t part) const { return wireOffsets[Owner(part)] + partWireOffsets[part]; }

  NodePosition position;

  BucketLayout stripe;
  std::vector<ElementRange> subStripes;  // relative to the stripe, one per node
  std::vector<size_t> wireOffsets;       // byte offset of each sub-stripe in the stripe's wire image
  std::vector<size_t> wireBytes;         // each sub-stripe's encoded size
  ElementRange own;                      // the sub-stripe this node owns
  BucketLayout ownLayout;                // its buckets: its parts' layouts end to end
  size_t pieces = 1;
  std::vector<ElementRange> parts;        // per part, relative to the stripe
  std::vector<BucketLayout> partLayouts;  // each part's buckets
  std::vector<size_t> partWireOffsets;    // byte offset of each part in its sub-stripe's wire image
  std::vector<size_t> partWireBytes;      // each part's encoded size
  size_t ownWireBytes = 0;
  size_t stripeWireBytes = 0;
  size_t bytesSent = 0;   // per call: each other owner's part of our stripe, and our quantized sum to each other node
  size_t floatBytes = 0;  // what the same exchange would send as float32
};

}  // namespace gradagg
