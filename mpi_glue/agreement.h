// Collective agreement: a problem that one rank finds is reported on every rank, never a hang; a count that each
// rank holds a part of, summed so every rank reports the same.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <string>

namespace gradagg {

// Collective over `comm`. Every rank passes the problem it found ("" when none). Returns "" on every rank when no
// rank found one; otherwise, on every rank, the lowest such rank's text, prefixed with where it was found.
std::string AgreeOnProblem(MPI_Comm comm, const std::string& localProblem);

// Collective over `comm`: the sum of every rank's `count`, on every rank.
size_t SumOver(MPI_Comm comm, size_t count);

}  // namespace gradagg
