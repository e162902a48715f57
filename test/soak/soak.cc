// The soak run (not in CTest; scripts/soak.sh): many trainer-shaped calls, with the tensor list changing every 1,000
// steps through three lists, checked all the way:
//   - rank 0 runs the serial simulation in lockstep and compares its result bitwise at every step;
//   - every 100 steps, every rank's result hash is compared;
//   - resident memory (VmRSS) is recorded at the end of every 1,000 steps; each list's later readings must stay
//     within 1 MiB of its first, on every rank (lists of other sizes hold other buffers, so they are not compared).
// Prints one line per 1,000 steps and a verdict; exits 1 on any failure. Layout and options from GRADAGG_*.
//   mpirun -np 4 gradagg_soak [STEPS]   (GRADAGG_RANKS_PER_NODE=2 GRADAGG_BITS=1 for 2x2 at 1 bit)
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "aggregator/serial_simulation.h"
#include "gradagg/aggregator.h"
#include "mpi/mpi_environment.h"
#include "mpi/node_topology.h"
#include "test/mpi/mpi_test_support.h"

namespace {

using gradagg::test::RandomGradient;

// Resident memory of this process, in KiB (VmRSS).
long ResidentKiB() {
  std::ifstream status("/proc/self/status");
  std::string key;
  while (status >> key) {
    if (key == "VmRSS:") {
      long kib = 0;
      status >> kib;
      return kib;
    }
    status.ignore(1 << 12, '\n');
  }
  return 0;
}

uint64_t Hash(const std::vector<float>& values) {
  uint64_t hash = 0xcbf29ce484222325ULL;
  const auto* bytes = reinterpret_cast<const unsigned char*>(values.data());
  for (size_t i = 0; i < values.size() * sizeof(float); ++i) hash = (hash ^ bytes[i]) * 0x100000001b3ULL;
  return hash;
}

}  // namespace

int main(int argc, char** argv) {
  gradagg::MpiEnvironment mpi(&argc, &argv);
  int rank = 0;
  int size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int steps = argc > 1 ? std::atoi(argv[1]) : 10000;
  // A trainer's tensors: weights and biases of three models, one after another.
  const std::vector<std::vector<size_t>> lists = {
      {200704, 256, 32768, 128, 1280, 10}, {4096, 64, 4096, 64, 10}, {3, 100000, 7, 513, 9001}};

  const gradagg::AggregatorOptions options = gradagg::ApplyEnvironment({});
  gradagg::Aggregator aggregator(MPI_COMM_WORLD, options);
  const gradagg::NodeTopology topology = gradagg::NodeTopology::Discover(MPI_COMM_WORLD, options.ranksPerNode);
  gradagg::SerialSimulation oracle(topology.GatherPlacements(), options);
  long wrongSteps = 0;
  long unequalRanks = 0;
  std::vector<long> firstKiB(lists.size(), 0);  // each list's reading at the end of its first 1,000 steps
  long worstGrowthKiB = 0;
  const double start = MPI_Wtime();
  for (int step = 0; step < steps; ++step) {
    const std::vector<size_t>& tensors = lists[static_cast<size_t>(step / 1000) % lists.size()];
    size_t count = 0;
    for (size_t length : tensors) count += length;
    const auto seed = static_cast<uint32_t>(step);
    std::vector<float> gradient = RandomGradient(count, seed, rank);
    std::vector<gradagg::GradientBuffer> buffers;
    for (size_t offset = 0, i = 0; i < tensors.size(); offset += tensors[i++]) {
      buffers.push_back({gradient.data() + offset, tensors[i]});
    }
    aggregator.AggregateGradients(buffers);
    if (rank == 0) {
      std::vector<std::vector<float>> inputs;
      for (int r = 0; r < size; ++r) inputs.push_back(RandomGradient(count, seed, r));
      const std::vector<float> expected = oracle.Run(inputs, {}, tensors);
      if (std::memcmp(expected.data(), gradient.data(), count * sizeof(float)) != 0) ++wrongSteps;
    }
    if (step % 100 == 0) {
      uint64_t mine = Hash(gradient);
      uint64_t lowest = 0;
      uint64_t highest = 0;
      MPI_Allreduce(&mine, &lowest, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD);
      MPI_Allreduce(&mine, &highest, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
      if (lowest != highest) ++unequalRanks;
    }
    if ((step + 1) % 1000 == 0) {
      const long resident = ResidentKiB();
      long& first = firstKiB[static_cast<size_t>(step / 1000) % lists.size()];
      if (first == 0) {
        first = resident;
      } else {
        worstGrowthKiB = std::max(worstGrowthKiB, resident - first);
      }
      long largest = 0;
      MPI_Reduce(&resident, &largest, 1, MPI_LONG, MPI_MAX, 0, MPI_COMM_WORLD);
      if (rank == 0) {
        std::printf("step %6d  tensors %zu (%zu elements)  max VmRSS %ld KiB  wrong steps %ld  %.1f s\n", step + 1,
                    tensors.size(), count, largest, wrongSteps, MPI_Wtime() - start);
        std::fflush(stdout);
      }
    }
  }
  long growth = 0;
  MPI_Allreduce(&worstGrowthKiB, &growth, 1, MPI_LONG, MPI_MAX, MPI_COMM_WORLD);
  MPI_Bcast(&wrongSteps, 1, MPI_LONG, 0, MPI_COMM_WORLD);
  const bool pass = wrongSteps == 0 && unequalRanks == 0 && growth <= 1024;
  if (rank == 0) {
    std::printf(
        "# soak: %d steps, %s; %ld steps differ from the simulation, %ld samples differ between ranks, "
        "resident memory grew by at most %ld KiB over each list's first reading: %s\n",
        steps, gradagg::Describe(options).c_str(), wrongSteps, unequalRanks, growth, pass ? "PASS" : "FAIL");
  }
  return pass ? 0 : 1;
}
