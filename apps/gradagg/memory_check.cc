#include "apps/gradagg/memory_check.h"

#include <fstream>
#include <sstream>

#include "mpi/agreement.h"
#include "mpi/communicator.h"
#include "mpi/mpi_error.h"

namespace gradagg::cli {
namespace {

// MemAvailable in bytes, or 0 when /proc/meminfo does not say.
uint64_t AvailableBytes() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  uint64_t kilobytes = 0;
  std::string unit;
  while (meminfo >> key >> kilobytes >> unit) {
    if (key == "MemAvailable:") return kilobytes * 1024;
  }
  return 0;
}

std::string GiB(uint64_t bytes) {
  std::ostringstream text;
  text.precision(3);
  text << static_cast<double>(bytes) / (1ull << 30) << " GiB";
  return text.str();
}

}  // namespace

uint64_t HostBytesPerRank(const CliOptions& cli, uint64_t bytes, int ranks, bool onGpu) {
  uint64_t need = onGpu ? 2 * bytes : 4 * bytes;
  if (cli.check) need += (2 * static_cast<uint64_t>(ranks) + 1) * bytes;
  return need;
}

std::string HostMemoryProblem(MPI_Comm world, const CliOptions& cli, bool onGpu) {
  int ranks = 1;
  GRADAGG_MPI_CHECK(MPI_Comm_size(world, &ranks));
  MPI_Comm host = MPI_COMM_NULL;
  GRADAGG_MPI_CHECK(MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &host));
  const Communicator owned(host);
  const uint64_t perRank = HostBytesPerRank(cli, cli.maxBytes, ranks, onGpu);
  const uint64_t onHost = perRank * static_cast<uint64_t>(owned.size());
  const uint64_t available = AvailableBytes();
  std::string problem;
  if (owned.rank() == 0 && available > 0 && onHost > available) {
    problem = "-e " + std::to_string(cli.maxBytes) + " bytes: the largest size needs about " + GiB(perRank) +
              " of host memory per rank (" + GiB(onHost) + " for the " + std::to_string(owned.size()) +
              " ranks on this host" + (cli.check ? ", with --check" : "") + "), and " + GiB(available) +
              " is available; choose a smaller -e";
  }
  return AgreeOnProblem(world, problem);
}

}  // namespace gradagg::cli
