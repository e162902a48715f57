// Every MPI call is checked; a failure becomes an MpiError naming the call, MPI's error string, the rank and host.
#pragma once

#include <stdexcept>
#include <string>

namespace gradagg {

class MpiError : public std::runtime_error {
 public:
  MpiError(const std::string& call, int errorCode, const char* file, int line);
  int errorCode() const { return errorCode_; }

 private:
  int errorCode_;
};

// "rank 3 on node-a": this process's rank in MPI_COMM_WORLD and its host, for error messages.
std::string RankAndHost();

// MPI's own text for an error code.
std::string MpiErrorString(int errorCode);

}  // namespace gradagg

// Wraps an MPI call: throws gradagg::MpiError unless it returns MPI_SUCCESS.
#define GRADAGG_MPI_CHECK(call)                                               \
  do {                                                                        \
    const int gradaggMpiResult = (call);                                      \
    if (gradaggMpiResult != MPI_SUCCESS) {                                    \
      throw ::gradagg::MpiError(#call, gradaggMpiResult, __FILE__, __LINE__); \
    }                                                                         \
  } while (false)
