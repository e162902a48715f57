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

ExchangePlan::ExchangePlan(size_t length, NodePosition where, const QuantizerConfig& quantizer)
    : position(where),
      subStripes(SplitIntoBucketRuns(length, quantizer.bucketSize, position.nodes)),
      wireOffsets(position.nodes),
      wireBytes(position.nodes),
      own(subStripes[position.node]) {
  for (size_t j = 0; j < position.nodes; ++j) {
    wireOffsets[j] = WireBytes(subStripes[j].begin, quantizer.bucketSize, quantizer.bits);
    wireBytes[j] = WireBytes(subStripes[j].count, quantizer.bucketSize, quantizer.bits);
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
