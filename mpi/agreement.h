// Collective agreement: a problem that one rank finds is reported on every rank, never a hang; a count that each
// rank holds a part of, summed so every rank reports the same.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <string>
#include <vector>

namespace gradagg {

// Collective over `comm`. Every rank passes the problem it found ("" when none). Returns "" on every rank when no
// rank found one; otherwise, on every rank, the lowest such rank's text, prefixed with where it was found.
std::string AgreeOnProblem(MPI_Comm comm, const std::string& localProblem);

// Collective over `comm`: every rank's text, in rank order, whatever their lengths.
std::vector<std::string> AllGatherText(MPI_Comm comm, const std::string& mine);

// A setting that must be the same on every rank, by name, its value as text.
struct NamedSetting {
  std::string name;
  std::string value;
};

// Collective over `comm`. Every rank passes its settings, in the same order. Returns "" on every rank when every
// rank's settings are rank 0's; otherwise, on every rank, the first setting of the lowest rank that differs from
// rank 0, with both values and where they were set: "GRADAGG_X is 1 on rank 2 on node-a but 2 on rank 0 on node-a".
std::string AgreeOnSettings(MPI_Comm comm, const std::vector<NamedSetting>& settings);

// Collective over `comm`: the sum of every rank's `count`, on every rank.
size_t SumOver(MPI_Comm comm, size_t count);

// Collective over `comm`: every rank's blob (all of one size), in rank order.
std::vector<char> AllGatherBytes(MPI_Comm comm, const std::vector<char>& mine);

// As AllGatherBytes, but waits at most `seconds` (<= 0: no limit). When that passes, the ranks that waited hold a
// roll call and this returns false, with `absent` the ranks of `comm` that never came (empty: they came too late);
// the gather's buffers are then left to MPI, which may still complete it (a leak on the way to ending the job).
bool AllGatherBytesBefore(MPI_Comm comm, const std::vector<char>& mine, double seconds, std::vector<char>& all,
                          std::vector<int>& absent);

// AllGatherBytesBefore that throws TimeoutError: "`what` waited N s for rank 3 (...), which never came (seen by
// rank 0 on node-a)".
std::vector<char> AllGatherBytesWithin(MPI_Comm comm, const std::vector<char>& mine, double seconds,
                                       const std::string& what);

}  // namespace gradagg
