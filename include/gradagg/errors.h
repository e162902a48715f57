// Errors gradagg reports. Bad input (bad options, ranks that disagree on sizes) throws UsageError on every rank
// involved, so a program never hangs on it; MPI failures throw gradagg::MpiError (a std::runtime_error) naming the
// call, the rank and the host.
#pragma once

#include <stdexcept>
#include <string>

namespace gradagg {

class UsageError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// A wait passed its deadline (AggregatorOptions::timeoutSeconds, GRADAGG_TIMEOUT): a peer rank stopped calling or is
// gone. Thrown on the ranks that waited, naming whom they waited for. The Aggregator is unusable afterwards: end the
// job (MPI_Abort), as with any error that only some ranks see.
class TimeoutError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace gradagg
