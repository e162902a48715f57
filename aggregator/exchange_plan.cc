#include "aggregator/exchange_plan.h"

#include <algorithm>

#include "aggregator/partition.h"
#include "mpi/mpi_error.h"
#include "quantize/wire_format.h"

namespace gradagg {

NodePosition PositionIn(MPI_Comm cross) {
  int node = 0;
  int nodes = 1;
  GRADAGG_MPI_CHECK(MPI_Comm_rank(cross, &node));
  GRADAGG_MPI_CHECK(MPI_Comm_size(cross, &nodes));
  return {static_cast<size_t>(node), static_cast<size_t>(nodes)};
}

namespace {

// Pieces per sub-stripe: enough for the largest sub-stripe's pieces to stay within pieceBytes, at most one per
// bucket of the largest sub-stripe (the others may then have empty pieces) and kMaxMessagesPerExchange in all.
size_t PiecesFor(const std::vector<BucketLayout>& subLayouts, const std::vector<size_t>& wireBytes, size_t pieceBytes) {
  size_t largestWire = 0;
  size_t mostBuckets = 1;
  for (size_t j = 0; j < subLayouts.size(); ++j) {
    largestWire = std::max(largestWire, wireBytes[j]);
    mostBuckets = std::max(mostBuckets, subLayouts[j].buckets());
  }
  if (pieceBytes == 0 || subLayouts.size() < 2) return 1;
  const size_t most = std::max<size_t>(1, std::min(mostBuckets, kMaxMessagesPerExchange / (subLayouts.size() - 1)));
  return std::clamp<size_t>((largestWire + pieceBytes - 1) / pieceBytes, 1, most);
}

}  // namespace

ExchangePlan::ExchangePlan(const BucketLayout& stripeLayout, NodePosition where, const QuantizerConfig& quantizer,
                           size_t pieceBytes)
    : position(where),
      stripe(stripeLayout),
      subStripes(SplitIntoBucketRuns(stripeLayout, position.nodes)),
      wireOffsets(position.nodes),
      wireBytes(position.nodes),
      own(subStripes[position.node]) {
  std::vector<BucketLayout> subLayouts;
  for (size_t j = 0; j < position.nodes; ++j) {
    subLayouts.push_back(stripeLayout.Slice(subStripes[j].begin, subStripes[j].count));
    wireOffsets[j] = stripeWireBytes;
    wireBytes[j] = WireBytes(subLayouts[j], quantizer.bits);
    stripeWireBytes += wireBytes[j];
  }
  ownWireBytes = wireBytes[position.node];
  ownLayout = subLayouts[position.node];
  for (size_t j = 0; j < position.nodes; ++j) {
    if (j == position.node) continue;
    bytesSent += wireBytes[j] + ownWireBytes;
    floatBytes += (subStripes[j].count + own.count) * sizeof(float);
  }

  pieces = PiecesFor(subLayouts, wireBytes, pieceBytes);
  const size_t partCount = pieces * position.nodes;
  parts.resize(partCount);
  partLayouts.resize(partCount);
  partWireOffsets.resize(partCount);
  partWireBytes.resize(partCount);
  for (size_t j = 0; j < position.nodes; ++j) {
    const std::vector<ElementRange> runs = SplitIntoBucketRuns(subLayouts[j], pieces);
    size_t offset = 0;
    for (size_t piece = 0; piece < pieces; ++piece) {
      const size_t part = piece * position.nodes + j;
      parts[part] = {subStripes[j].begin + runs[piece].begin, runs[piece].count};
      partLayouts[part] = subLayouts[j].Slice(runs[piece].begin, runs[piece].count);
      partWireOffsets[part] = offset;
      partWireBytes[part] = WireBytes(partLayouts[part], quantizer.bits);
      offset += partWireBytes[part];
    }
  }
}

ExchangeMessages ExchangePlan::Scatter(const unsigned char* stripeWire, unsigned char* received,
                                       size_t slotBytes) const {
  ExchangeMessages messages{std::vector<SendBuffer>(parts.size()), std::vector<ReceiveBuffer>(parts.size())};
  for (size_t part = 0; part < parts.size(); ++part) {
    const size_t j = Owner(part);
    if (j == position.node) continue;
    const size_t ownPart = OwnPart(part);
    messages.sends[part] = {stripeWire + StripeWireOffset(part), partWireBytes[part]};
    messages.receives[part] = {received + j * slotBytes + partWireOffsets[ownPart], partWireBytes[ownPart]};
  }
  return messages;
}

ExchangeMessages ExchangePlan::Gather(const void* ownWire, unsigned char* stripeWire) const {
  ExchangeMessages messages{std::vector<SendBuffer>(parts.size()), std::vector<ReceiveBuffer>(parts.size())};
  for (size_t part = 0; part < parts.size(); ++part) {
    if (Owner(part) == position.node) continue;
    const size_t ownPart = OwnPart(part);
    messages.sends[part] = {static_cast<const unsigned char*>(ownWire) + partWireOffsets[ownPart],
                            partWireBytes[ownPart]};
    messages.receives[part] = {stripeWire + StripeWireOffset(part), partWireBytes[part]};
  }
  return messages;
}

}  // namespace gradagg
