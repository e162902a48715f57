// The node topology an Aggregator discovered, for the project's own tools (the gradagg CLI), which describe and check
// the run by it instead of discovering it a second time. Internal: not installed.
#pragma once

#include "mpi/node_topology.h"

namespace gradagg {

class Aggregator;

const NodeTopology& TopologyOf(const Aggregator& aggregator);

}  // namespace gradagg
