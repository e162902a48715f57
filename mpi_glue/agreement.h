// Collective error agreement: a problem that one rank finds is reported on every rank, never a hang.
#pragma once

#include <mpi.h>

#include <string>

namespace gradagg {

// Collective over `comm`. Every rank passes the problem it found ("" when none). Returns "" on every rank when no
// rank found one; otherwise, on every rank, the lowest such rank's text, prefixed with where it was found.
std::string AgreeOnProblem(MPI_Comm comm, const std::string& localProblem);

}  // namespace gradagg
