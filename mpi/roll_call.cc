#include "mpi/roll_call.h"

#include <algorithm>

#include "mpi/deadline.h"
#include "mpi/mpi_error.h"

namespace gradagg {
namespace {

// Tags of their own: these messages only ever travel after a timeout, when the communicator is out of step anyway.
constexpr int kPresentTag = 0x7e11;
constexpr int kAbsentTag = 0x7e12;

}  // namespace

std::vector<int> AbsentRanks(MPI_Comm comm, double seconds) {
  int rank = 0;
  int size = 1;
  GRADAGG_MPI_CHECK(MPI_Comm_rank(comm, &rank));
  GRADAGG_MPI_CHECK(MPI_Comm_size(comm, &size));
  const Deadline deadline(seconds > 0.0 ? seconds : 1.0);
  if (rank != 0) {
    // Report, then wait for rank 0's list; no answer names rank 0.
    int present = 1;
    std::vector<MPI_Request> report(1, MPI_REQUEST_NULL);
    GRADAGG_MPI_CHECK(MPI_Isend(&present, 1, MPI_INT, 0, kPresentTag, comm, report.data()));
    std::vector<int> absent(static_cast<size_t>(size) + 1, 0);  // count, then the ranks
    std::vector<MPI_Request> answer(1, MPI_REQUEST_NULL);
    GRADAGG_MPI_CHECK(MPI_Irecv(absent.data(), size + 1, MPI_INT, 0, kAbsentTag, comm, answer.data()));
    if (!WaitAllBefore(deadline, answer)) {
      AbandonRequests(answer);
      AbandonRequests(report);
      return {0};
    }
    AbandonRequests(report);
    return std::vector<int>(absent.begin() + 1, absent.begin() + 1 + std::clamp(absent[0], 0, size));
  }
  // Rank 0: collect the reports until everyone else came or the deadline passed; answer those that came.
  std::vector<bool> came(static_cast<size_t>(size), false);
  came[0] = true;
  int waiting = size - 1;
  while (waiting > 0 && !deadline.Passed()) {
    int found = 0;
    MPI_Status status;
    GRADAGG_MPI_CHECK(MPI_Iprobe(MPI_ANY_SOURCE, kPresentTag, comm, &found, &status));
    if (found == 0) continue;
    int present = 0;
    GRADAGG_MPI_CHECK(MPI_Recv(&present, 1, MPI_INT, status.MPI_SOURCE, kPresentTag, comm, MPI_STATUS_IGNORE));
    if (!came[static_cast<size_t>(status.MPI_SOURCE)]) --waiting;
    came[static_cast<size_t>(status.MPI_SOURCE)] = true;
  }
  std::vector<int> answer(1, 0);
  for (int peer = 0; peer < size; ++peer) {
    if (!came[static_cast<size_t>(peer)]) answer.push_back(peer);
  }
  answer[0] = static_cast<int>(answer.size()) - 1;
  std::vector<MPI_Request> sends;
  for (int peer = 1; peer < size; ++peer) {
    if (!came[static_cast<size_t>(peer)]) continue;
    sends.emplace_back();
    GRADAGG_MPI_CHECK(
        MPI_Isend(answer.data(), static_cast<int>(answer.size()), MPI_INT, peer, kAbsentTag, comm, &sends.back()));
  }
  if (!WaitAllBefore(Deadline(1.0), sends)) AbandonRequests(sends);
  return std::vector<int>(answer.begin() + 1, answer.end());
}

}  // namespace gradagg
