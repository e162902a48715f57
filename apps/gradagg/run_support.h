// What the host and device size runs share: the check against the serial simulation, the MPI baseline, the phase
// statistics and the timing loop (a barrier, then each rank's seconds; the mean over iterations of the slowest rank's).
#pragma once

#include <mpi.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "apps/gradagg/cli_options.h"
#include "apps/gradagg/size_run.h"
#include "gradagg/aggregator.h"
#include "mpi/mpi_error.h"
#include "mpi/node_topology.h"

namespace gradagg::cli {

// --check at one size: kCheckSteps calls, each on fresh synthetic gradients, compared bitwise with the serial
// simulation (residuals carried as there), ranks compared with each other, the header sum checked; the verdict goes
// into `result`. aggregateInPlace(gradient, header) runs one AggregateGradients on the host vector's values, wherever
// the run keeps them, and leaves the result in it. Collective.
void CheckAgainstSimulation(Aggregator& aggregator, const NodeTopology& topology, const CliOptions& cli,
                            SizeResult& result,
                            const std::function<void(std::vector<float>&, GradientHeader*)>& aggregateInPlace);

// MPI_Allreduce (float32, sum) in place, in pieces that fit MPI's int counts. `data` may be device memory when the
// MPI is CUDA-aware.
void MpiAllreduce(MPI_Comm world, float* data, size_t count);

// The per-phase times and wire bytes of the timed calls: Add after each, then Finish puts the mean per call of the
// slowest rank (each phase separately) into `result`. Collective in Finish.
class PhaseStats {
 public:
  explicit PhaseStats(int iterations) : iterations_(iterations) {}
  void Add(const AggregationStats& stats);
  void Finish(MPI_Comm world, SizeResult& result) const;

 private:
  static constexpr int kPhases = 6;
  int iterations_;
  double phases_[kPhases] = {};
  uint64_t wireBytes_ = 0;
  uint64_t floatWireBytes_ = 0;
};

// `warmups` untimed calls, then timed ones, each after restore() (outside the timing) and a barrier. Returns the
// mean over iterations of the slowest rank's seconds; afterEach() runs after every timed call.
template <typename Restore, typename Call, typename AfterEach>
double TimeCalls(MPI_Comm world, const CliOptions& cli, Restore restore, Call call, AfterEach afterEach) {
  for (int i = 0; i < cli.warmups; ++i) {
    restore();
    call();
  }
  std::vector<double> seconds(static_cast<size_t>(cli.iterations));
  for (int i = 0; i < cli.iterations; ++i) {
    restore();
    GRADAGG_MPI_CHECK(MPI_Barrier(world));
    const double start = MPI_Wtime();
    call();
    seconds[static_cast<size_t>(i)] = MPI_Wtime() - start;
    afterEach();
  }
  std::vector<double> slowest(seconds.size());
  GRADAGG_MPI_CHECK(MPI_Allreduce(seconds.data(), slowest.data(), cli.iterations, MPI_DOUBLE, MPI_MAX, world));
  double sum = 0.0;
  for (double s : slowest) sum += s;
  return sum / static_cast<double>(slowest.size());
}

}  // namespace gradagg::cli
