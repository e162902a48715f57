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

ExchangePlan::ExchangePlan(size_t length, NodePosition position, const QuantizerConfig& quantizer)
    : subStripes(SplitIntoBucketRuns(length, quantizer.bucketSize, position.nodes)),
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

}  // namespace gradagg
