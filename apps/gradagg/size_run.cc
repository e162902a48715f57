#include "apps/gradagg/size_run.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "aggregator/serial_simulation.h"
#include "apps/gradagg/run_support.h"
#include "apps/gradagg/synthetic_gradient.h"
#include "mpi_glue/mpi_error.h"

namespace gradagg::cli {
namespace {

void Check(Aggregator& aggregator, const NodeTopology& topology, const CliOptions& cli, SizeResult& result) {
  MPI_Comm world = topology.world();
  const int rank = topology.rank();
  SerialSimulation simulation(topology.GatherPlacements(), aggregator.options());
  aggregator.ResetResiduals();
  uint64_t wrong = 0;
  int bad = 0;
  for (int step = 0; step < kCheckSteps; ++step) {
    std::vector<float> gradient(result.count);
    FillSyntheticGradient(gradient.data(), gradient.size(), cli.seed, rank, step);
    const std::vector<std::vector<float>> inputs = AllGatherInputs(world, gradient);
    GradientHeader header = CheckHeader(rank);
    aggregator.AggregateGradients(gradient.data(), gradient.size(), &header);
    JudgeStep(world, gradient, simulation.Run(inputs), header, wrong, bad);
    if (step == 0) result.relativeError = RelativeError(gradient, inputs);
  }
  SetVerdict(world, wrong, bad, result);
}

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
  if (cli.check) Check(aggregator, topology, cli, result);
  Time(aggregator, topology, cli, result);
  return result;
}

}  // namespace gradagg::cli
