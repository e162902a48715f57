// gradagg: run under mpirun to benchmark AggregateGradients and check it against the serial simulation.
//
//   1. parse the command line (the same verdict on every rank, so bad arguments exit 2 with no MPI traffic);
//   2. build the Aggregator and the node topology (bad options or layouts: UsageError on every rank, exit 2);
//   3. for each size: check (with --check), then time; rank 0 prints a row;
//   4. summary, JSON, exit 0 or 1 (a failed check).
#include <mpi.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "aggregator/aggregator_topology.h"
#include "apps/gradagg/cli_options.h"
#include "apps/gradagg/device_size_run.h"
#include "apps/gradagg/memory_check.h"
#include "apps/gradagg/report.h"
#include "apps/gradagg/size_run.h"
#include "gradagg/aggregator.h"
#include "mpi/agreement.h"
#include "mpi/mpi_environment.h"
#include "mpi/mpi_error.h"
#include "intra_node/cuda_devices.h"

namespace gradagg::cli {
namespace {

constexpr int kExitFailedCheck = 1;
constexpr int kExitUsage = 2;

void PrintInfo(int rank, int size) {
  char library[MPI_MAX_LIBRARY_VERSION_STRING];
  int length = 0;
  GRADAGG_MPI_CHECK(MPI_Get_library_version(library, &length));
  if (rank != 0) return;
  std::string mpiVersion(library, static_cast<size_t>(length));
  if (const size_t newline = mpiVersion.find('\n'); newline != std::string::npos) mpiVersion.resize(newline);
  std::printf("gradagg %s\n", GRADAGG_VERSION);
  std::printf("built with CUDA: %s\n", BuiltWithCuda() ? "yes" : "no");
  std::printf("MPI: %s; %d ranks\n", mpiVersion.c_str(), size);
  std::printf("%s", DescribeCudaDevices().c_str());
}

// --device auto: the GPU path when the build has CUDA and every rank sees a GPU.
bool EveryRankHasAGpu() {
  int mine = BuiltWithCuda() && CudaDeviceCount() > 0 ? 1 : 0;
  int all = 0;
  GRADAGG_MPI_CHECK(MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
  return all != 0;
}

// --json: rank 0 writes the file at the end; find out now, on every rank alike, whether it can (UsageError if not),
// rather than after every size has run.
void RequireWritableJson(const std::string& path, int rank) {
  if (path.empty()) return;
  std::string problem;
  if (rank == 0) {
    const bool existed = static_cast<bool>(std::ifstream(path));
    if (!std::ofstream(path, std::ios::app)) {
      problem = "--json " + path + ": cannot write there (" + std::strerror(errno) + ")";
    } else if (!existed) {
      std::remove(path.c_str());
    }
  }
  problem = AgreeOnProblem(MPI_COMM_WORLD, problem);
  if (!problem.empty()) throw UsageError(problem);
}

int Run(const CliOptions& cli) {
  int rank = 0;
  int size = 1;
  GRADAGG_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  GRADAGG_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size));
  if (cli.info) {
    PrintInfo(rank, size);
    return 0;
  }
  RequireWritableJson(cli.jsonPath, rank);
  const bool onGpu = cli.device == Device::kCuda || (cli.device == Device::kAuto && EveryRankHasAGpu());
  if (const std::string problem = HostMemoryProblem(MPI_COMM_WORLD, cli, onGpu); !problem.empty())
    throw UsageError(problem);

  Aggregator aggregator(MPI_COMM_WORLD, cli.aggregator);
  const NodeTopology& topology = TopologyOf(aggregator);  // the Aggregator's own view of the nodes
  std::unique_ptr<DeviceSizeRunner> gpu;
  if (onGpu) gpu = std::make_unique<DeviceSizeRunner>(aggregator, topology, cli);
  if (rank == 0) {
    PrintPreamble(cli, topology.Describe(), size, onGpu);
    if (gpu) std::printf("%s", gpu->Describe().c_str());
    PrintTableHeader();
  }
  std::vector<SizeResult> rows;
  for (uint64_t bytes = cli.minBytes; bytes <= cli.maxBytes; bytes *= cli.stepFactor) {
    rows.push_back(gpu ? gpu->Run(bytes) : RunSize(aggregator, topology, cli, bytes));
    if (rank == 0) PrintRow(rows.back(), size);
    if (bytes == 0 || bytes > cli.maxBytes / cli.stepFactor) break;
  }
  std::string verdict;
  if (rank == 0) {
    verdict = PrintSummary(cli, rows, size);
    if (!cli.jsonPath.empty()) WriteJson(cli.jsonPath, cli, topology.Describe(), size, rows, verdict, onGpu);
  }
  int failed = rank == 0 && !verdict.empty() && verdict != "PASS" ? 1 : 0;
  GRADAGG_MPI_CHECK(MPI_Bcast(&failed, 1, MPI_INT, 0, MPI_COMM_WORLD));
  return failed != 0 ? kExitFailedCheck : 0;
}

}  // namespace
}  // namespace gradagg::cli

int main(int argc, char** argv) {
  using namespace gradagg;
  using namespace gradagg::cli;
  try {
    MpiEnvironment mpi(&argc, &argv);
    int rank = 0;
    GRADAGG_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    const ParseResult parsed = ParseCommandLine(argc, argv);
    if (!parsed.error.empty()) {
      if (rank == 0) std::fprintf(stderr, "gradagg: error: %s (try --help)\n", parsed.error.c_str());
      return kExitUsage;
    }
    if (parsed.showHelp) {
      if (rank == 0) std::printf("%s", parsed.helpText.c_str());
      return 0;
    }
    try {
      return Run(parsed.options);
    } catch (const UsageError& error) {  // thrown alike on every rank
      if (rank == 0) std::fprintf(stderr, "gradagg: error: %s\n", error.what());
      return kExitUsage;
    } catch (const std::exception& error) {  // may be one rank only: abort, never hang
      std::fprintf(stderr, "gradagg: rank %d: %s\n", rank, error.what());
      MPI_Abort(MPI_COMM_WORLD, 1);
      return 1;
    }
  } catch (const std::exception& error) {
    std::fprintf(stderr, "gradagg: %s\n", error.what());
    return 1;
  }
}
