#include "mpi/agreement.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <vector>

#include "gradagg/errors.h"
#include "mpi/deadline.h"
#include "mpi/mpi_error.h"
#include "mpi/roll_call.h"

namespace gradagg {

std::string AgreeOnProblem(MPI_Comm comm, const std::string& localProblem) {
  int rank = 0;
  GRADAGG_MPI_CHECK(MPI_Comm_rank(comm, &rank));
  const int candidate = localProblem.empty() ? INT_MAX : rank;
  int reporter = INT_MAX;
  GRADAGG_MPI_CHECK(MPI_Allreduce(&candidate, &reporter, 1, MPI_INT, MPI_MIN, comm));
  if (reporter == INT_MAX) return "";

  const std::string text = rank == reporter ? localProblem + " (reported by " + RankAndHost() + ")" : std::string();
  int length = static_cast<int>(text.size());
  GRADAGG_MPI_CHECK(MPI_Bcast(&length, 1, MPI_INT, reporter, comm));
  std::vector<char> buffer(text.begin(), text.end());
  buffer.resize(static_cast<size_t>(length));
  GRADAGG_MPI_CHECK(MPI_Bcast(buffer.data(), length, MPI_CHAR, reporter, comm));
  return std::string(buffer.begin(), buffer.end());
}

size_t SumOver(MPI_Comm comm, size_t count) {
  unsigned long long mine = count;
  unsigned long long sum = 0;
  GRADAGG_MPI_CHECK(MPI_Allreduce(&mine, &sum, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, comm));
  return static_cast<size_t>(sum);
}

std::vector<char> AllGatherBytes(MPI_Comm comm, const std::vector<char>& mine) {
  int size = 0;
  GRADAGG_MPI_CHECK(MPI_Comm_size(comm, &size));
  std::vector<char> all(mine.size() * size);
  GRADAGG_MPI_CHECK(MPI_Allgather(mine.data(), static_cast<int>(mine.size()), MPI_BYTE, all.data(),
                                  static_cast<int>(mine.size()), MPI_BYTE, comm));
  return all;
}

bool AllGatherBytesBefore(MPI_Comm comm, const std::vector<char>& mine, double seconds, std::vector<char>& all,
                          std::vector<int>& absent) {
  int size = 0;
  GRADAGG_MPI_CHECK(MPI_Comm_size(comm, &size));
  // On the heap: a gather that timed out may still complete when the missing rank comes, so its buffers are left
  // to it rather than freed under it.
  auto* buffers = new std::vector<char>(mine.size() * (static_cast<size_t>(size) + 1));
  std::copy(mine.begin(), mine.end(), buffers->begin());
  char* gathered = buffers->data() + mine.size();
  std::vector<MPI_Request> request(1, MPI_REQUEST_NULL);
  GRADAGG_MPI_CHECK(MPI_Iallgather(buffers->data(), static_cast<int>(mine.size()), MPI_BYTE, gathered,
                                   static_cast<int>(mine.size()), MPI_BYTE, comm, request.data()));
  if (!WaitAllBefore(Deadline(seconds), request)) {
    absent = AbsentRanks(comm, std::min(seconds / 2.0, 10.0));
    return false;
  }
  all.assign(gathered, gathered + mine.size() * static_cast<size_t>(size));
  delete buffers;
  return true;
}

std::vector<char> AllGatherBytesWithin(MPI_Comm comm, const std::vector<char>& mine, double seconds,
                                       const std::string& what) {
  std::vector<char> all;
  std::vector<int> absent;
  if (AllGatherBytesBefore(comm, mine, seconds, all, absent)) return all;
  throw TimeoutError(what + " waited " + std::to_string(static_cast<int>(seconds)) + " s for " +
                     (absent.empty() ? std::string("ranks that came too late") : DescribeWorldRanks(comm, absent)) +
                     ", which never came (seen by " + RankAndHost() + ")");
}

}  // namespace gradagg
