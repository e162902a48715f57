// What the host and device size runs share: the inputs every rank can see, the judgement of one checked step, and
// the timing loop (a barrier, then each rank's seconds; the mean over iterations of the slowest rank's).
#pragma once

#include <mpi.h>

#include <cstdint>
#include <vector>

#include "apps/gradagg/cli_options.h"
#include "apps/gradagg/size_run.h"
#include "gradagg/gradient_header.h"
#include "mpi_glue/mpi_error.h"

namespace gradagg::cli {

inline constexpr int kCheckSteps = 2;  // the second step checks that residuals carry over as in the simulation

// Every rank's input, gathered in pieces small enough for MPI's int counts.
std::vector<std::vector<float>> AllGatherInputs(MPI_Comm world, const std::vector<float>& mine);

// ||result - exact float64 sum|| / ||exact||.
double RelativeError(const std::vector<float>& result, const std::vector<std::vector<float>>& inputs);

// Rank r reports r + 1 samples and criterion r / 2, so the sums are known.
GradientHeader CheckHeader(int rank);

// Adds to `wrong` the elements of `result` whose bits differ from `expected`; sets bit 1 of `bad` when ranks hold
// different results and bit 2 when `header` is not the sum of every rank's CheckHeader. Collective.
void JudgeStep(MPI_Comm world, const std::vector<float>& result, const std::vector<float>& expected,
               const GradientHeader& header, uint64_t& wrong, int& bad);

// MPI_Allreduce (float32, sum) in place, in pieces that fit MPI's int counts. `data` may be device memory when the
// MPI is CUDA-aware.
void MpiAllreduce(MPI_Comm world, float* data, size_t count);

// Sums the per-iteration counts of the checked steps over ranks into `result` (wrong, identical, headerOk).
void SetVerdict(MPI_Comm world, uint64_t wrong, int bad, SizeResult& result);

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
