// The Aggregator options a CTest entry's layout asks for, and the serial simulation of the same layout: the oracle
// of the multi-rank tests.
#pragma once

#include <mpi.h>

#include "aggregator/serial_simulation.h"
#include "gradagg/options.h"
#include "mpi/node_topology.h"
#include "mpi_test_support.h"

namespace gradagg::test {

inline AggregatorOptions LayoutOptions(int bits = 1) {
  AggregatorOptions options;
  options.bits = bits;
  options.ranksPerNode = TestRanksPerNode();
  return options;
}

inline SerialSimulation Oracle(const AggregatorOptions& options) {
  const NodeTopology topology = NodeTopology::Discover(MPI_COMM_WORLD, options.ranksPerNode);
  return SerialSimulation(topology.GatherPlacements(), options);
}

}  // namespace gradagg::test
