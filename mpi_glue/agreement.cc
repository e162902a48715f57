#include "mpi_glue/agreement.h"

#include <climits>
#include <vector>

#include "mpi_glue/mpi_error.h"

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

}  // namespace gradagg
