// GoogleTest under mpiexec: MPI for the whole run, a barrier after every test so ranks stay in step, full output
// on rank 0 and failures only elsewhere, and a failure on any rank fails every rank's exit code.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>

#include "mpi/mpi_environment.h"

namespace {

class BarrierAfterEachTest : public ::testing::EmptyTestEventListener {
  void OnTestEnd(const ::testing::TestInfo&) override { MPI_Barrier(MPI_COMM_WORLD); }
};

class FailuresOnly : public ::testing::EmptyTestEventListener {
 public:
  explicit FailuresOnly(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& result) override {
    if (!result.failed()) return;
    std::fprintf(stderr, "[rank %d] %s:%d: %s\n", rank_, result.file_name() ? result.file_name() : "?",
                 result.line_number(), result.summary());
  }

 private:
  int rank_;
};

}  // namespace

int main(int argc, char** argv) {
  gradagg::MpiEnvironment mpi(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  ::testing::TestEventListeners& listeners = ::testing::UnitTest::GetInstance()->listeners();
  if (rank != 0) {
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new FailuresOnly(rank));
  }
  listeners.Append(new BarrierAfterEachTest);
  const int failed = RUN_ALL_TESTS() != 0 ? 1 : 0;
  int anyFailed = failed;
  MPI_Allreduce(&failed, &anyFailed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  return anyFailed;
}
