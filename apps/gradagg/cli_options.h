// The gradagg command line: what to measure and check, parsed without MPI so every rank reaches the same verdict.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "apps/common/byte_size.h"
#include "gradagg/options.h"

namespace gradagg::cli {

enum class Device { kAuto, kCpu, kCuda };

struct CliOptions {
  Device device = Device::kAuto;
  uint64_t minBytes = 1 << 20;
  uint64_t maxBytes = 16 << 20;
  uint64_t stepFactor = 2;
  int iterations = 20;
  int warmups = 5;
  uint64_t seed = 42;
  // --tensors: tensor lengths in elements, repeated to cover each gradient (the last one cut short), so that buckets
  // restart at tensor boundaries as in a model; empty: the gradient is one tensor.
  std::vector<size_t> tensors;
  bool check = false;
  bool mpiBaseline = true;     // also time MPI_Allreduce of the same gradient
  bool ncclBaseline = true;    // GPU runs: also time ncclAllReduce
  bool registerBuffer = true;  // GPU runs: RegisterDeviceBuffer the gradient, so calls work on it in place
  std::string jsonPath;
  bool info = false;
  AggregatorOptions aggregator;  // defaults < GRADAGG_* environment < flags
};

struct ParseResult {
  CliOptions options;
  bool showHelp = false;
  std::string helpText;
  std::string error;  // non-empty: bad arguments, exit 2
};

ParseResult ParseCommandLine(int argc, const char* const* argv);

// "16M" -> 16777216. K, M, G are binary (1024); a trailing B is allowed. nullopt for anything else.
std::string FormatDevice(Device device);

// The lengths of the tensors that cover `count` elements: `pattern` repeated, the last one cut short; {count} for an
// empty pattern.
std::vector<size_t> TensorLengths(const std::vector<size_t>& pattern, size_t count);

}  // namespace gradagg::cli
