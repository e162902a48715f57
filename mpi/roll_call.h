// Who never came: after a collective timed out, the ranks that did wait report to rank 0, which names the ranks that
// did not (or, if rank 0 itself does not answer, it is named). Costs nothing until a wait has timed out.
#pragma once

#include <mpi.h>

#include <vector>

namespace gradagg {

// Called by every rank of `comm` that gave up waiting; `seconds` bounds the roll call itself. Returns the ranks (of
// `comm`) that did not report in time, the same list on every rank that got rank 0's answer.
std::vector<int> AbsentRanks(MPI_Comm comm, double seconds);

}  // namespace gradagg
