// What the exchange tests share: a round that the last rank never joins, and the check that the others give up.
#pragma once

#include <gtest/gtest.h>
#include <mpi.h>

#include <string>

#include "gradagg/errors.h"

namespace gradagg::test {

// Runs body(comm, absent) on every rank but the last (absent), on a communicator of its own, so that an abandoned
// round cannot leak into other tests; the last rank joins the barrier after every other rank gave up.
template <typename Body>
void WithoutTheLastRank(Body body) {
  MPI_Comm comm = MPI_COMM_NULL;
  ASSERT_EQ(MPI_Comm_dup(MPI_COMM_WORLD, &comm), MPI_SUCCESS);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (rank != size - 1) body(comm, size - 1);
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Comm_free(&comm);
}

// Runs `round`, which must throw TimeoutError whose text holds `expected` and names rank `absent`, after at least
// `seconds` and less than `seconds + slack`.
template <typename Round>
void ExpectTimeoutNamingRank(Round round, const std::string& expected, int absent, double seconds, double slack) {
  const double start = MPI_Wtime();
  try {
    round();
    ADD_FAILURE() << "no timeout";
  } catch (const TimeoutError& error) {
    const std::string text = error.what();
    EXPECT_NE(text.find(expected), std::string::npos) << text;
    EXPECT_NE(text.find("rank " + std::to_string(absent)), std::string::npos) << text;
  }
  const double waited = MPI_Wtime() - start;
  EXPECT_GE(waited, seconds);
  EXPECT_LT(waited, seconds + slack);
}

}  // namespace gradagg::test
