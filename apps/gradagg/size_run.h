// One row of the gradagg table: time AggregateGradients at one size and, with --check, judge it.
#pragma once

#include <cstddef>
#include <string>

#include "apps/gradagg/cli_options.h"
#include "gradagg/aggregator.h"
#include "mpi/node_topology.h"

namespace gradagg::cli {

struct SizeResult {
  size_t bytes = 0;
  size_t count = 0;
  double seconds = 0.0;       // mean over iterations of the slowest rank's time
  PhaseTimes phases;          // mean per call, the slowest rank for each phase
  size_t wireBytes = 0;       // inter-node bytes sent per rank (the most any rank sent)
  size_t floatWireBytes = 0;  // the same exchange in float32
  bool checked = false;
  size_t wrong = 0;            // elements differing from the serial simulation, summed over ranks and steps
  bool identical = true;       // every rank held the same bytes
  bool headerOk = true;        // the header summed as expected
  double relativeError = 0.0;  // ||result - exact float64 sum|| / ||exact||, first step
  double mpiSeconds = 0.0;     // MPI_Allreduce of the same float32 gradient, timed the same way (0: not run)
  double ncclSeconds = 0.0;    // ncclAllReduce over all ranks, the same way (GPU runs with NCCL only; 0: not run)
};

// Collective over MPI_COMM_WORLD.
SizeResult RunSize(Aggregator& aggregator, const NodeTopology& topology, const CliOptions& cli, size_t bytes);

}  // namespace gradagg::cli
