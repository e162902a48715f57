#include "apps/gradagg/size_run.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "apps/gradagg/run_support.h"
#include "apps/gradagg/synthetic_gradient.h"
#include "mpi_glue/mpi_error.h"

namespace gradagg::cli {
namespace {

void Time(Aggregator& aggregator, const NodeTopology& topology, const CliOptions& cli, SizeResult& result) {
  MPI_Comm world = topology.world();
  std::vector<float> pristine(result.count);
  FillSyntheticGradient(pristine.data(), pristine.size(), cli.seed, topology.rank(), 0);

  std::vector<float> gradient(pristine);
  auto restore = [&] { std::memcpy(gradient.data(), pristine.data(), pristine.size() * sizeof(float)); };
  PhaseStats stats(cli.iterations);
  result.seconds = TimeCalls(
      world, cli, restore, [&] { aggregator.AggregateGradients(gradient.data(), gradient.size()); },
      [&] { stats.Add(aggregator.LastStats()); });
  stats.Finish(world, result);

  if (cli.mpiBaseline) {
    result.mpiSeconds = TimeCalls(world, cli, restore, [&] { MpiAllreduce(world, gradient.data(), gradient.size()); }, [] {});
  }
}

}  // namespace

SizeResult RunSize(Aggregator& aggregator, const NodeTopology& topology, const CliOptions& cli, size_t bytes) {
  SizeResult result;
  result.bytes = bytes;
  result.count = bytes / sizeof(float);
  if (cli.check) {
    CheckAgainstSimulation(aggregator, topology, cli, result, [&](std::vector<float>& gradient, GradientHeader* header) {
      aggregator.AggregateGradients(gradient.data(), gradient.size(), header);
    });
  }
  Time(aggregator, topology, cli, result);
  return result;
}

}  // namespace gradagg::cli
