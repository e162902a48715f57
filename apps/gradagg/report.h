// The nccl-tests-style table on rank 0, and the JSON file. Non-data lines start with '#'.
#pragma once

#include <string>
#include <vector>

#include "apps/gradagg/cli_options.h"
#include "apps/gradagg/size_run.h"

namespace gradagg::cli {

void PrintPreamble(const CliOptions& cli, const std::string& topology, int ranks, bool onGpu);
void PrintTableHeader();
void PrintRow(const SizeResult& row, int ranks);
// The summary lines; the last is "# check: PASS" or "# check: FAIL <what>" when checking. Returns the verdict
// ("" when not checking).
std::string PrintSummary(const CliOptions& cli, const std::vector<SizeResult>& rows, int ranks);
// Throws std::runtime_error when the file cannot be written.
void WriteJson(const std::string& path, const CliOptions& cli, const std::string& topology, int ranks,
               const std::vector<SizeResult>& rows, const std::string& verdict, bool onGpu);

// Bandwidths in GB/s (1e9): algbw = bytes / time; allreduce busbw = algbw * 2(n-1)/n.
double AlgorithmBandwidth(const SizeResult& row);
double BusBandwidth(const SizeResult& row, int ranks);

}  // namespace gradagg::cli
