#include "aggregator/option_agreement.h"

#include <string>

#include "gradagg/errors.h"
#include "mpi/agreement.h"
#include "mpi/mpi_error.h"

namespace gradagg {
namespace {

std::string LocalOptionProblem(const AggregatorOptions& options) {
  try {
    Validate(options);
  } catch (const UsageError& error) {
    return error.what();
  }
  return "";
}

// Throws UsageError on every rank unless every rank passes the options that shape the algorithm identically.
void RequireSameOptions(MPI_Comm comm, const AggregatorOptions& options, const char* who) {
  const long long mine[] = {options.bits,
                            static_cast<long long>(options.bucketSize),
                            options.errorFeedback,
                            options.meanThreshold,
                            options.quantizeOwnStripe,
                            options.ranksPerNode,
                            static_cast<long long>(options.pieceBytes)};
  constexpr int kFields = sizeof mine / sizeof mine[0];
  const char* const names[kFields] = {"bits",           "bucket size",         "error feedback",
                                      "mean threshold", "quantize own stripe", "ranks per node",
                                      "piece bytes"};
  long long lowest[kFields];
  long long highest[kFields];
  GRADAGG_MPI_CHECK(MPI_Allreduce(mine, lowest, kFields, MPI_LONG_LONG, MPI_MIN, comm));
  GRADAGG_MPI_CHECK(MPI_Allreduce(mine, highest, kFields, MPI_LONG_LONG, MPI_MAX, comm));
  for (int i = 0; i < kFields; ++i) {
    if (lowest[i] != highest[i]) {
      throw UsageError(std::string(who) + ": ranks disagree on the option '" + std::string(names[i]) +
                       "' (values from " + std::to_string(lowest[i]) + " to " + std::to_string(highest[i]) +
                       "); every rank must pass the same options (" + RankAndHost() + ")");
    }
  }
}

}  // namespace

void AgreeOnOptions(MPI_Comm comm, const AggregatorOptions& options, const char* who) {
  const std::string problem = AgreeOnProblem(comm, LocalOptionProblem(options));
  if (!problem.empty()) throw UsageError(std::string(who) + ": " + problem);
  RequireSameOptions(comm, options, who);
}

}  // namespace gradagg
