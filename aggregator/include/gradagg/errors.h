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

}  // namespace gradagg
