// Uses only the installed public headers: every rank contributes rank+1 to every element; one node, so the sum
// is exact. MPI_Init gives MPI_THREAD_SINGLE, so a background call must be refused with a clear UsageError.
#include <gradagg/aggregator.h>

#include <cstdio>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  int size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int status = 0;
  {
    gradagg::Aggregator aggregator(MPI_COMM_WORLD);
    std::vector<float> gradient(1000, static_cast<float>(rank + 1));
    gradagg::GradientHeader header;
    header.numSamples = 1;
    aggregator.AggregateGradients(gradient.data(), gradient.size(), &header);
    const float expected = static_cast<float>(size * (size + 1) / 2);
    for (float value : gradient) status |= value != expected ? 1 : 0;
    status |= header.numSamples != static_cast<uint64_t>(size) ? 1 : 0;
    try {
      aggregator.AggregateGradientsAsync({{gradient.data(), gradient.size()}}).Wait();
      status |= 2;
    } catch (const gradagg::UsageError& error) {
      status |= std::string(error.what()).find("MPI_THREAD_SERIALIZED") == std::string::npos ? 4 : 0;
    }
  }
  if (rank == 0) std::printf("consumer: %s (status %d)\n", status == 0 ? "ok" : "WRONG", status);
  MPI_Finalize();
  return status;
}
