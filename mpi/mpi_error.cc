#include "mpi/mpi_error.h"

#include <mpi.h>

#include <string>

namespace gradagg {
namespace {

std::string CallName(const std::string& call) {
  const auto paren = call.find('(');
  return paren == std::string::npos ? call : call.substr(0, paren);
}

}  // namespace

std::string MpiErrorString(int errorCode) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(errorCode, text, &length) != MPI_SUCCESS)
    return "unknown MPI error " + std::to_string(errorCode);
  return std::string(text, static_cast<size_t>(length));
}

std::string RankAndHost() {
  int initialized = 0;
  int finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized) return "MPI not running";
  int rank = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  char host[MPI_MAX_PROCESSOR_NAME];
  int length = 0;
  MPI_Get_processor_name(host, &length);
  return "rank " + std::to_string(rank) + " on " + std::string(host, static_cast<size_t>(length));
}

MpiError::MpiError(const std::string& call, int errorCode, const char* file, int line)
    : std::runtime_error(CallName(call) + " failed: " + MpiErrorString(errorCode) + " (" + RankAndHost() + ", " + file +
                         ":" + std::to_string(line) + ")"),
      errorCode_(errorCode) {}

}  // namespace gradagg
