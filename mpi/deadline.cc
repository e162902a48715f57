#include "mpi/deadline.h"

#include <chrono>
#include <thread>

#include "mpi/mpi_error.h"

namespace gradagg {
namespace {

// Spin on MPI_Test* for this long (the common case: the peer is a moment away), then sleep between tests so that a
// long wait does not burn a core that the rank's other threads may want.
constexpr double kSpinSeconds = 0.01;
constexpr auto kNap = std::chrono::microseconds(200);

template <typename Test>
bool PollUntil(const Deadline& deadline, Test test) {
  const double start = MPI_Wtime();
  while (!test()) {
    if (deadline.Passed()) return false;
    if (MPI_Wtime() - start > kSpinSeconds) std::this_thread::sleep_for(kNap);
  }
  return true;
}

}  // namespace

Deadline::Deadline(double seconds) : seconds_(seconds), end_(MPI_Wtime() + seconds) {}

bool Deadline::Passed() const { return seconds_ > 0.0 && MPI_Wtime() > end_; }

bool WaitAnyBefore(const Deadline& deadline, std::vector<MPI_Request>& requests, int* index, MPI_Status* status,
                   int* result) {
  const int count = static_cast<int>(requests.size());
  if (deadline.Unlimited()) {
    *result = MPI_Waitany(count, requests.data(), index, status);
    return true;
  }
  return PollUntil(deadline, [&] {
    int done = 0;
    *result = MPI_Testany(count, requests.data(), index, &done, status);
    return *result != MPI_SUCCESS || done != 0;
  });
}

bool WaitAllBefore(const Deadline& deadline, std::vector<MPI_Request>& requests) {
  const int count = static_cast<int>(requests.size());
  if (deadline.Unlimited()) {
    GRADAGG_MPI_CHECK(MPI_Waitall(count, requests.data(), MPI_STATUSES_IGNORE));
    return true;
  }
  return PollUntil(deadline, [&] {
    int done = 0;
    GRADAGG_MPI_CHECK(MPI_Testall(count, requests.data(), &done, MPI_STATUSES_IGNORE));
    return done != 0;
  });
}

void AbandonRequests(std::vector<MPI_Request>& requests) noexcept {
  for (MPI_Request& request : requests) {
    if (request == MPI_REQUEST_NULL) continue;
    MPI_Cancel(&request);  // receives: withdrawn; sends: MPI may ignore it, the handle is freed all the same
    MPI_Request_free(&request);
    request = MPI_REQUEST_NULL;
  }
}

std::string DescribeWorldRanks(MPI_Comm comm, const std::vector<int>& ranks) {
  MPI_Group group = MPI_GROUP_NULL;
  MPI_Group world = MPI_GROUP_NULL;
  std::vector<int> worldRanks(ranks.size(), MPI_UNDEFINED);
  if (MPI_Comm_group(comm, &group) == MPI_SUCCESS && MPI_Comm_group(MPI_COMM_WORLD, &world) == MPI_SUCCESS) {
    MPI_Group_translate_ranks(group, static_cast<int>(ranks.size()), ranks.data(), world, worldRanks.data());
  }
  if (group != MPI_GROUP_NULL) MPI_Group_free(&group);
  if (world != MPI_GROUP_NULL) MPI_Group_free(&world);
  std::string text;
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (!text.empty()) text += ", ";
    text += worldRanks[i] == MPI_UNDEFINED ? "rank " + std::to_string(ranks[i]) + " of its communicator"
                                           : "rank " + std::to_string(worldRanks[i]);
  }
  return text;
}

std::string ExchangeTimeoutMessage(MPI_Comm comm, const std::string& what, double seconds,
                                   const std::vector<size_t>& left) {
  std::vector<int> missing;
  for (size_t peer = 0; peer < left.size(); ++peer) {
    if (left[peer] > 0) missing.push_back(static_cast<int>(peer));
  }
  return what + ": waited " + std::to_string(static_cast<int>(seconds)) + " s (GRADAGG_TIMEOUT) for " +
         (missing.empty() ? std::string("its sends to be taken")
                          : "the messages of " + DescribeWorldRanks(comm, missing)) +
         "; that rank stopped calling, or its node is gone (" + RankAndHost() + ")";
}

}  // namespace gradagg
