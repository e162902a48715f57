// The size sweep of the benchmarks beside the CLI, with nccl-tests' flags (-b, -e, -f, -n, -w) and their checks,
// written once.
#pragma once

#include <boost/program_options.hpp>
#include <cstdint>
#include <string>

namespace gradagg::cli {

struct SizeSweep {
  uint64_t minBytes = 1 << 20;
  uint64_t maxBytes = 64 << 20;
  uint64_t factor = 2;
  int iterations = 20;
  int warmups = 5;
};

class SweepFlags {
 public:
  // Adds the five flags to `flags`, `sweep`'s values shown as their defaults; `unit` names what -n and -w count
  // ("calls", "repetitions").
  SweepFlags(SizeSweep& sweep, boost::program_options::options_description& flags, const std::string& unit);

  // Parses argv against `flags` into `values` and checks the sweep (sizes at least `smallestBytes`); returns the
  // error, empty when there is none.
  std::string Parse(int argc, char** argv, const boost::program_options::options_description& flags,
                    boost::program_options::variables_map& values, uint64_t smallestBytes);

 private:
  SizeSweep& sweep_;
  std::string minText_;
  std::string maxText_;
};

}  // namespace gradagg::cli
