// The gradagg table with gradients on GPUs (--device cuda): per size, gradagg's AggregateGradients on device
// memory, ncclAllReduce over all ranks (where NCCL loads) and MPI_Allreduce (device buffers with a CUDA-aware MPI,
// else staged through pinned host memory, copies included), all timed alike; --check as on the host, with the
// result read back from the GPU.
#pragma once

#include <memory>
#include <string>

#include "apps/gradagg/cli_options.h"
#include "apps/gradagg/size_run.h"
#include "gradagg/aggregator.h"
#include "mpi/node_topology.h"

namespace gradagg::cli {

class DeviceSizeRunner {
 public:
  // Collective. Picks this rank's GPU (host-local rank modulo the GPUs there), sets up the Aggregator's device path
  // and NCCL. Throws UsageError on every rank where a rank has no GPU or the build has no CUDA.
  DeviceSizeRunner(Aggregator& aggregator, const NodeTopology& topology, const CliOptions& cli);
  ~DeviceSizeRunner();

  // '#' lines for the preamble: the GPU path (transport and why), NCCL, the MPI baseline's transport.
  std::string Describe() const;
  SizeResult Run(size_t bytes);  // collective

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace gradagg::cli
