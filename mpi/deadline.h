// Waits on MPI requests that end at a deadline, so that no rank waits for ever on a peer that stopped calling
// (GRADAGG_TIMEOUT). A deadline of 0 seconds or less never passes: the waits are MPI's own.
#pragma once

#include <mpi.h>

#include <string>
#include <vector>

namespace gradagg {

class Deadline {
 public:
  explicit Deadline(double seconds);
  bool Passed() const;
  bool Unlimited() const { return seconds_ <= 0.0; }

 private:
  double seconds_;
  double end_;
};

// MPI_Waitany until `deadline`: returns false if it passed first (nothing completed, *index untouched); otherwise
// true, with *result MPI_Waitany's return code.
bool WaitAnyBefore(const Deadline& deadline, std::vector<MPI_Request>& requests, int* index, MPI_Status* status,
                   int* result);

// MPI_Waitall until `deadline`: returns false if it passed first (some requests still pending); throws MpiError for a
// failed request.
bool WaitAllBefore(const Deadline& deadline, std::vector<MPI_Request>& requests);

// Gives up on pending requests without waiting: receives are cancelled, every handle is freed and set to
// MPI_REQUEST_NULL. For the way out of a timeout only: the peers are not coming.
void AbandonRequests(std::vector<MPI_Request>& requests) noexcept;

// "rank 3, rank 5": ranks of `comm` named by their rank in MPI_COMM_WORLD.
std::string DescribeWorldRanks(MPI_Comm comm, const std::vector<int>& ranks);

// The text of a TimeoutError for a round of point-to-point traffic: `what` waited `seconds` for the ranks of `comm`
// whose counts in `left` are not 0.
std::string ExchangeTimeoutMessage(MPI_Comm comm, const std::string& what, double seconds,
                                   const std::vector<size_t>& left);

}  // namespace gradagg
