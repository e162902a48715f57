// The C++ API on the scenario of scenario.h, under mpirun: writes this rank's results, every bit width and step in
// order, as raw float32 to FILE.RANK, for test_numpy.py to compare with the Python package's, byte for byte.
//   mpirun -np N gradagg_python_reference FILE     (GRADAGG_RANKS_PER_NODE chooses the emulated nodes)
#include <mpi.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "gradagg/aggregator.h"
#include "scenario.h"

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (argc != 2) {
    if (rank == 0) std::fprintf(stderr, "usage: gradagg_python_reference FILE\n");
    MPI_Finalize();
    return 2;
  }
  std::ofstream out(std::string(argv[1]) + "." + std::to_string(rank), std::ios::binary);
  int status = 0;
  try {
    for (int bits : gradagg::test::kScenarioBits) {
      gradagg::AggregatorOptions options = gradagg::ApplyEnvironment(gradagg::AggregatorOptions());
      options.bits = bits;
      gradagg::Aggregator aggregator(MPI_COMM_WORLD, options);
      for (int step = 0; step < gradagg::test::kScenarioSteps; ++step) {
        std::vector<std::vector<float>> tensors;
        std::vector<gradagg::GradientBuffer> buffers;
        for (size_t t = 0; t < gradagg::test::kScenarioLengths.size(); ++t) {
          tensors.emplace_back(gradagg::test::kScenarioLengths[t]);
          for (size_t i = 0; i < tensors.back().size(); ++i)
            tensors.back()[i] = gradagg::test::ScenarioValue(i, t, static_cast<uint64_t>(rank), step);
        }
        for (auto& tensor : tensors) buffers.push_back({tensor.data(), tensor.size()});
        aggregator.AggregateGradients(buffers);
        for (const auto& tensor : tensors)
          out.write(reinterpret_cast<const char*>(tensor.data()), static_cast<std::streamsize>(tensor.size() * 4));
      }
    }
  } catch (const std::exception& error) {
    std::fprintf(stderr, "gradagg_python_reference: rank %d: %s\n", rank, error.what());
    status = 1;
  }
  out.close();
  status |= out.fail() ? 1 : 0;
  MPI_Finalize();
  return status;
}
