// A failure drill under mpirun: every rank makes trainer-shaped calls of AggregateGradients, and one rank fails after
// three steps, in the way the first argument names:
//   failure_drill throw RANK   RANK throws (a data error, say) outside its calls; main catches it outside the
//                              Aggregator's scope, so the Aggregator is destroyed while the exception passes
//   failure_drill stall RANK   RANK stops calling for two minutes; the others must give up (GRADAGG_TIMEOUT) and
//                              name it
//   failure_drill die RANK     RANK's process ends without a word to MPI (_exit): what Open MPI does then
// A third argument `device` makes the calls on device tensors (GPU local rank % GPUs; ranks may share one with
// GRADAGG_NVLINK_SHARE_GPUS=1): the same drills on the GPU path. Without CUDA it exits 77 (skipped).
// GRADAGG_DRILL_ELEMENTS sets the first tensor's size (default 10000): a large one takes phase 2's other transport.
// Whatever a rank catches it prints, then it calls MPI_Abort, as a trainer should; drill_test.sh checks that the job
// ends within a time limit with a non-zero code and the expected words. Layout and timeout from GRADAGG_*.
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "gradagg/aggregator.h"
#include "mpi/mpi_environment.h"

#if GRADAGG_DRILL_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace {

// The drill's two tensors, in host memory or on this rank's GPU; Aggregate sets them and makes one call.
size_t Elements() {
  const char* text = std::getenv("GRADAGG_DRILL_ELEMENTS");
  return text != nullptr ? std::strtoull(text, nullptr, 10) : 10000;
}

class DrillTensors {
 public:
  explicit DrillTensors(bool onDevice) : onDevice_(onDevice) {
    if (!onDevice_) return;
#if GRADAGG_DRILL_WITH_CUDA
    int devices = 0;
    Check(cudaGetDeviceCount(&devices), "cudaGetDeviceCount");
    const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK");
    Check(cudaSetDevice((local != nullptr ? std::atoi(local) : 0) % devices), "cudaSetDevice");
    Check(cudaMalloc(&device_[0], weights_.size() * sizeof(float)), "cudaMalloc");
    Check(cudaMalloc(&device_[1], bias_.size() * sizeof(float)), "cudaMalloc");
#endif
  }
  ~DrillTensors() {
#if GRADAGG_DRILL_WITH_CUDA
    for (void* memory : device_) cudaFree(memory);
#endif
  }

  void Aggregate(gradagg::Aggregator& aggregator) {
    std::fill(weights_.begin(), weights_.end(), 0.5f);
    std::fill(bias_.begin(), bias_.end(), 1.0f);
    if (!onDevice_) {
      aggregator.AggregateGradients({{weights_.data(), weights_.size()}, {bias_.data(), bias_.size()}});
      return;
    }
#if GRADAGG_DRILL_WITH_CUDA
    Check(cudaMemcpy(device_[0], weights_.data(), weights_.size() * sizeof(float), cudaMemcpyHostToDevice), "copy");
    Check(cudaMemcpy(device_[1], bias_.data(), bias_.size() * sizeof(float), cudaMemcpyHostToDevice), "copy");
    aggregator.AggregateGradients(
        std::vector<gradagg::DeviceGradient>{{device_[0], weights_.size()}, {device_[1], bias_.size()}}, nullptr);
#endif
  }

 private:
#if GRADAGG_DRILL_WITH_CUDA
  static void Check(cudaError_t status, const char* what) {
    if (status != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(status));
  }
  void* device_[2] = {nullptr, nullptr};
#endif
  bool onDevice_;
  std::vector<float> weights_ = std::vector<float>(Elements());
  std::vector<float> bias_ = std::vector<float>(10);
};

}  // namespace

int main(int argc, char** argv) {
  gradagg::MpiEnvironment mpi(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const std::string mode = argc > 1 ? argv[1] : "";
  const int culprit = argc > 2 ? std::atoi(argv[2]) : 0;
  const bool onDevice = argc > 3 && std::string(argv[3]) == "device";
  if ((mode != "throw" && mode != "stall" && mode != "die") || (argc > 3 && !onDevice)) {
    if (rank == 0) std::fprintf(stderr, "usage: failure_drill throw|stall|die RANK [device]\n");
    return 2;
  }
#if !GRADAGG_DRILL_WITH_CUDA
  if (onDevice) {
    if (rank == 0) std::fprintf(stderr, "failure_drill: SKIPPED: built without CUDA\n");
    return 77;
  }
#endif
  try {
    DrillTensors tensors(onDevice);
    gradagg::Aggregator aggregator(MPI_COMM_WORLD, gradagg::ApplyEnvironment({}));
    for (int step = 0; step < 1000; ++step) {
      if (rank == culprit && step == 3) {
        if (mode == "throw") throw std::runtime_error("a data error in step 3 (the drill's)");
        if (mode == "die") _exit(7);
        std::this_thread::sleep_for(std::chrono::minutes(2));
      }
      tensors.Aggregate(aggregator);
    }
    if (rank == 0) std::fprintf(stderr, "failure_drill: no failure happened\n");
    return 3;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "failure_drill: rank %d caught: %s\n", rank, error.what());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  return 1;
}
