#include "aggregator/exchange_plan.h"

#include "aggregator/partition.h"
#include "mpi_glue/mpi_error.h"
#include "quantize/wire_format.h"

namespace gradagg {

NodePosition PositionIn(MPI_Comm cross) {
  int node = 0;
  int nodes = 1;
  GRADAGG_MPI_CHECK(MPI_Comm_rank(cross, &node));
  GRADAGG_MPI_CHECK(MPI_Comm_size(cross, &nodes));
  return {static_cast<size_t>(node), static_cast<size_t>(nodes)};
}

ExchangePlan::ExchangePlan(const BucketLayout& stripeLayout, NodePosition where, const QuantizerConfig& quantizer)
    : position(where),
      stripe(stripeLayout),
      subStripes(SplitIntoBucketRuns(stripeLayout, position.nodes)),
      wireOffsets(position.nodes),
      wireBytes(position.nodes),
      own(subStripes[position.node]) {
  for (size_t j = 0; j < position.nodes; ++j) {
    subLayouts.push_back(stripeLayout.Slice(subStripes[j].begin, subStripes[j].count));
    wireOffsets[j] = stripeWireBytes;
    wireBytes[j] = WireBytes(subLayouts[j], quantizer.bits);
    stripeWireBytes += wireBytes[j];
  }
  ownWireBytes = wireBytes[position.node];
  for (size_t j = 0; j < position.nodes; ++j) {
    if (j == position.node) continue;
    bytesSent += wireBytes[j] + ownWireBytes;
    floatBytes += (subStripes[j].count + own.count) * sizeof(float);
  }
}

ExchangeMessages ExchangePlan::Scatter(const unsigned char* stripeWire, unsigned char* received,
                                       size_t slotBytes) const {
  ExchangeMessages messages{std::vector<SendBuffer>(position.nodes), std::vector<ReceiveBuffer>(position.nodes)};
  for (size_t j = 0; j < position.nodes; ++j) {
    if (j == position.node) continue;
    messages.sends[j] = {stripeWire + wireOffsets[j], wireBytes[j]};
    messages.receives[j] = {received + j * slotBytes, ownWireBytes};
  }
  return messages;
}

ExchangeMessages ExchangePlan::Gather(const void* ownWire, unsigned char* stripeWire) const {
  ExchangeMessages messages{std::vector<SendBuffer>(position.nodes), std::vector<ReceiveBuffer>(position.nodes)};
  for (size_t j = 0; j < position.nodes; ++j) {
    if (j == position.node) continue;
    messages.sends[j] = {ownWire, ownWireBytes};
    messages.receives[j] = {stripeWire + wireOffsets[j], wireBytes[j]};
  }
  return messages;
}

}  // namespace gradagg
