#include "apps/gradagg/size_run.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "apps/gradagg/run_support.h"
#include "apps/gradagg/synthetic_gradient.h"
#include "mpi/mpi_error.h"

namespace gradagg::cli {
namespace {

// The gradient `values` as the call's tensors (--tensors).
std::vector<GradientBuffer> AsTensors(std::vector<float>& values, const CliOptions& cli) {
  std::vector<GradientBuffer> tensors;
  size_t offset = 0;
  for (size_t length : TensorLengths(cli.tensors, values.size())) {
    tensors.push_back({values.data() + offset, length});
    offset += length;
  }
  return tensors;
}

void Time(Aggregator& aggregator, const NodeTopology& topology, const CliOptions& cli, SizeResult& result) {
  MPI_Comm world = topology.world();
  std::vector<float> pristine(result.count);
  FillSyntheticGradient(pristine.data(), pristine.size(), cli.seed, topology.rank(), 0);

  std::vector<float> gradient(pristine);
  const std::vector<GradientBuffer> tensors = AsTensors(gradient, cli);
  auto restore = [&] { std::memcpy(gradient.data(), pristine.data(), pristine.size() * sizeof(float)); };
  PhaseStats stats(cli.iterations);
  result.seconds = TimeCalls(
      world, cli, restore, [&] { aggregator.AggregateGradients(tensors); }, [&] { stats.Add(aggregator.LastStats()); });
  stats.Finish(world, result);

  if (cli.mpiBaseline) {
    result.mpiSeconds = TimeCalls(
        world, cli, restore, [&] { MpiAllreduce(world, gradient.data(), gradient.size()); }, [] {});
  }
}

}  // namespace

SizeResult RunSize(Aggregator& aggregator, const NodeTopology& topology, const CliOptions& cli, size_t bytes) {
  SizeResult result;
  result.bytes = bytes;
  result.count = bytes / sizeof(float);
  if (cli.check) {
    CheckAgainstSimulation(aggregator, topology, cli, result,
                           [&](std::vector<float>& gradient, GradientHeader* header) {
                             aggregator.AggregateGradients(AsTensors(gradient, cli), header);
                           });
  }
  Time(aggregator, topology, cli, result);
  return result;
}

}  // namespace gradagg::cli
