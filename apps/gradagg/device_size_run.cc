#include "apps/gradagg/device_size_run.h"

#include <cuda_runtime_api.h>

#include <cstdlib>
#include <vector>

#include "apps/gradagg/run_support.h"
#include "apps/gradagg/synthetic_gradient.h"
#include "common/cuda/cuda_error.h"
#include "common/cuda/device_memory.h"
#include "mpi/agreement.h"
#include "mpi/communicator.h"
#include "mpi/cuda_support.h"
#if GRADAGG_WITH_NCCL
#include "apps/common/nccl_library.h"
#endif

namespace gradagg::cli {
namespace {

// This rank's GPU: its rank among the ranks of its host, modulo the GPUs there ("" or why there is none).
std::string SelectLocalGpu(MPI_Comm world) {
  const std::string none = CudaUnavailableReason();
  if (!none.empty()) return none;
  MPI_Comm host = MPI_COMM_NULL;
  GRADAGG_MPI_CHECK(MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &host));
  const Communicator owned(host);
  int devices = 0;
  GRADAGG_CUDA_CHECK(cudaGetDeviceCount(&devices));
  GRADAGG_CUDA_CHECK(cudaSetDevice(owned.rank() % devices));
  return "";
}

// Whether the largest size fits on this rank's GPU: the gradient and its pristine copy, and the Aggregator's flat
// buffer and stripe (about the gradient again), beside what the GPU has free now.
std::string GpuMemoryProblem(uint64_t largestBytes) {
  size_t free = 0;
  size_t total = 0;
  GRADAGG_CUDA_CHECK(cudaMemGetInfo(&free, &total));
  const uint64_t need = 4 * largestBytes;
  if (need <= free) return "";
  return "-e " + std::to_string(largestBytes) + " bytes: the largest size needs about " + std::to_string(need >> 20) +
         " MiB on the GPU, which has " + std::to_string(free >> 20) + " MiB free; choose a smaller -e";
}

}  // namespace

struct DeviceSizeRunner::State {
  Aggregator& aggregator;
  const NodeTopology& topology;
  const CliOptions& cli;
  cudaStream_t stream = nullptr;
  std::string path;
  bool mpiOnDevice = false;
  std::string ncclWhy;
#if GRADAGG_WITH_NCCL
  std::unique_ptr<NcclLibrary> nccl;
#endif
  DeviceBuffer gradient;
  DeviceBuffer pristine;
  std::unique_ptr<float, CudaFreeHost> staging;  // for the staged MPI baseline

  State(Aggregator& a, const NodeTopology& t, const CliOptions& c) : aggregator(a), topology(t), cli(c) {}
  ~State() {
    try {  // collective, as every rank ends its run alike; before the buffer is freed
      if (cli.registerBuffer && gradient.get() != nullptr) aggregator.DeregisterDeviceBuffer(gradient.get());
    } catch (...) {  // a destructor never throws; the Aggregator's own shutdown reports a broken node
    }
    if (stream != nullptr) cudaStreamDestroy(stream);
  }

  // Buffers for `count` floats; all ranks reserve alike, so (de)registering stays collective.
  void Reserve(size_t count) {
    const size_t bytes = std::max<size_t>(count, 1) * sizeof(float);
    if (gradient.bytes() >= bytes) return;
    if (cli.registerBuffer && gradient.get() != nullptr) aggregator.DeregisterDeviceBuffer(gradient.get());
    gradient = DeviceBuffer(bytes);
    if (cli.registerBuffer) aggregator.RegisterDeviceBuffer(gradient.get(), bytes);
    pristine = DeviceBuffer(bytes);
    float* host = nullptr;
    staging.reset();
    GRADAGG_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&host), bytes));
    staging.reset(host);
  }
  // On the calls' stream and waited for: a plain cudaMemcpy from pageable memory may return before a small copy
  // (up to 64 KiB) lands, and the non-blocking stream does not wait for the legacy one (seen as stale sums at 64 KiB).
  void Upload(const std::vector<float>& values, void* device) const {
    GRADAGG_CUDA_CHECK(
        cudaMemcpyAsync(device, values.data(), values.size() * sizeof(float), cudaMemcpyHostToDevice, stream));
    GRADAGG_CUDA_CHECK(cudaStreamSynchronize(stream));
  }
  // One call on the first `count` floats of the gradient buffer, cut into the tensors of --tensors.
  void Aggregate(size_t count, GradientHeader* header) {
    std::vector<DeviceGradient> tensors;
    size_t offset = 0;
    for (size_t length : TensorLengths(cli.tensors, count)) {
      tensors.push_back({gradient.as<float>() + offset, length, DataType::kFloat32});
      offset += length;
    }
    aggregator.AggregateGradients(tensors, stream, header);
  }

  void Check(SizeResult& result);
  void Time(SizeResult& result);
};

DeviceSizeRunner::DeviceSizeRunner(Aggregator& aggregator, const NodeTopology& topology, const CliOptions& cli)
    : state_(std::make_unique<State>(aggregator, topology, cli)) {
  MPI_Comm world = topology.world();
  std::string problem = SelectLocalGpu(world);
  if (problem.empty()) problem = GpuMemoryProblem(cli.maxBytes);
  problem = AgreeOnProblem(world, problem);
  if (!problem.empty()) throw UsageError("--device cuda: " + problem);
  GRADAGG_CUDA_CHECK(cudaStreamCreateWithFlags(&state_->stream, cudaStreamNonBlocking));
  state_->path = aggregator.InitializeDevice();
  state_->mpiOnDevice = ChooseTransport(cli.aggregator.transport).cudaAware;
#if GRADAGG_WITH_NCCL
  if (!cli.ncclBaseline) {
    state_->ncclWhy = "left out (--no-nccl)";
    return;
  }
  setenv("NCCL_NVLS_ENABLE", "0", 1);  // NVLink SHARP stays off on these machines (DEVICE.md)
  state_->nccl = NcclLibrary::Open(
      topology.rank(), topology.size(),
      [world](void* data, int bytes) { GRADAGG_MPI_CHECK(MPI_Bcast(data, bytes, MPI_BYTE, 0, world)); },
      state_->ncclWhy);
  if (state_->nccl)
    state_->ncclWhy = "ncclAllReduce over all ranks, libnccl " + state_->nccl->version() + ", NCCL_NVLS_ENABLE=0";
#else
  state_->ncclWhy = "not built (no nccl.h at build time)";
#endif
}

DeviceSizeRunner::~DeviceSizeRunner() = default;

std::string DeviceSizeRunner::Describe() const {
  return "# gpu path (rank 0): " + state_->path +
         (state_->cli.registerBuffer ? "; gradient buffer registered (RegisterDeviceBuffer)"
                                     : "; gradient buffer not registered (--no-register)") +
         "\n# nccl: " + state_->ncclWhy + "; vs_nccl = nccl / time\n# mpi baseline: " +
         (state_->mpiOnDevice ? "MPI_Allreduce on device buffers (CUDA-aware)"
                              : "MPI_Allreduce staged through pinned host memory (copies included)") +
         "\n";
}

void DeviceSizeRunner::State::Check(SizeResult& result) {
  CheckAgainstSimulation(aggregator, topology, cli, result, [&](std::vector<float>& values, GradientHeader* header) {
    Upload(values, gradient.get());
    Aggregate(values.size(), header);
    values = gradient.ToHost<float>(values.size());
  });
}

void DeviceSizeRunner::State::Time(SizeResult& result) {
  MPI_Comm world = topology.world();
  const size_t count = result.count;
  const size_t bytes = count * sizeof(float);
  std::vector<float> values(count);
  FillSyntheticGradient(values.data(), values.size(), cli.seed, topology.rank(), 0);
  Upload(values, pristine.get());
  auto restore = [&] {
    GRADAGG_CUDA_CHECK(cudaMemcpyAsync(gradient.get(), pristine.get(), bytes, cudaMemcpyDeviceToDevice, stream));
    GRADAGG_CUDA_CHECK(cudaStreamSynchronize(stream));
  };
  PhaseStats stats(cli.iterations);
  result.seconds = TimeCalls(
      world, cli, restore, [&] { Aggregate(count, nullptr); }, [&] { stats.Add(aggregator.LastStats()); });
  stats.Finish(world, result);

#if GRADAGG_WITH_NCCL
  if (nccl) {
    result.ncclSeconds = TimeCalls(
        world, cli, restore,
        [&] {
          nccl->AllReduce(gradient.get(), gradient.get(), count, ElementType::kFloat32, stream);
          GRADAGG_CUDA_CHECK(cudaStreamSynchronize(stream));
        },
        [] {});
  }
#endif
  if (!cli.mpiBaseline) return;
  float* device = gradient.as<float>();
  float* host = staging.get();
  result.mpiSeconds = TimeCalls(
      world, cli, restore,
      [&] {
        if (mpiOnDevice) return MpiAllreduce(world, device, count);
        GRADAGG_CUDA_CHECK(cudaMemcpyAsync(host, device, bytes, cudaMemcpyDeviceToHost, stream));
        GRADAGG_CUDA_CHECK(cudaStreamSynchronize(stream));
        MpiAllreduce(world, host, count);
        GRADAGG_CUDA_CHECK(cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, stream));
        GRADAGG_CUDA_CHECK(cudaStreamSynchronize(stream));
      },
      [] {});
}

SizeResult DeviceSizeRunner::Run(size_t bytes) {
  SizeResult result;
  result.bytes = bytes;
  result.count = bytes / sizeof(float);
  state_->Reserve(result.count);
  if (state_->cli.check) state_->Check(result);
  state_->Time(result);
  return result;
}

}  // namespace gradagg::cli
