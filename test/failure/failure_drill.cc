// A failure drill under mpirun: every rank makes trainer-shaped calls of AggregateGradients, and one rank fails after
// three steps, in the way the first argument names:
//   failure_drill throw RANK   RANK throws (a data error, say) outside its calls; main catches it outside the
//                              Aggregator's scope, so the Aggregator is destroyed while the exception passes
//   failure_drill stall RANK   RANK stops calling for two minutes; the others must give up (GRADAGG_TIMEOUT) and
//                              name it
//   failure_drill die RANK     RANK's process ends without a word to MPI (_exit): what Open MPI does then
// Whatever a rank catches it prints, then it calls MPI_Abort, as a trainer should; drill_test.sh checks that the job
// ends within a time limit with a non-zero code and the expected words. Layout and timeout from GRADAGG_*.
#include <mpi.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "gradagg/aggregator.h"
#include "mpi_glue/mpi_environment.h"

int main(int argc, char** argv) {
  gradagg::MpiEnvironment mpi(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const std::string mode = argc > 1 ? argv[1] : "";
  const int culprit = argc > 2 ? std::atoi(argv[2]) : 0;
  if (mode != "throw" && mode != "stall" && mode != "die") {
    if (rank == 0) std::fprintf(stderr, "usage: failure_drill throw|stall|die RANK\n");
    return 2;
  }
  try {
    gradagg::Aggregator aggregator(MPI_COMM_WORLD, gradagg::ApplyEnvironment({}));
    std::vector<float> weights(10000);
    std::vector<float> bias(10);
    for (int step = 0; step < 1000; ++step) {
      if (rank == culprit && step == 3) {
        if (mode == "throw") throw std::runtime_error("a data error in step 3 (the drill's)");
        if (mode == "die") _exit(7);
        std::this_thread::sleep_for(std::chrono::minutes(2));
      }
      std::fill(weights.begin(), weights.end(), 0.5f);
      std::fill(bias.begin(), bias.end(), 1.0f);
      aggregator.AggregateGradients({{weights.data(), weights.size()}, {bias.data(), bias.size()}});
    }
    if (rank == 0) std::fprintf(stderr, "failure_drill: no failure happened\n");
    return 3;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "failure_drill: rank %d caught: %s\n", rank, error.what());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  return 1;
}
