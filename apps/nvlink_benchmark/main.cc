// gradagg_nvlink_benchmark: the single-node allreduce of gradagg's NVLink phase next to ncclAllReduce, in one run,
// with the same method: -w warm-ups of each at the largest and the smallest size first (as nccl-tests), then per size
// out of place, CUDA events around -n calls after -w warm-ups, the time per call is the slowest rank's; with
// --repeats R, the median of R such timings (one slow call, a host thread descheduled while it launches, moves a mean
// of microsecond calls by tens of percent); every size of both is checked on every element
// (#wrong). nccl-tests' flags and table.
//   mpirun -np G gradagg_nvlink_benchmark -b 1K -e 1G -f 2 [-r 5] [-d float|bfloat16|half] [--host-fallback]
//     [--phases]
// A node of several NVLink groups (real, or forced with GRADAGG_NVLINK_GROUP_SIZE or GRADAGG_NVLINK_TOPOLOGY) runs
// its chain of groups; --host-fallback adds the same node reducing through host memory instead, in the same run.
#include <cuda_runtime_api.h>
#include <mpi.h>

#include <boost/program_options.hpp>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "apps/common/median.h"
#include "apps/common/nccl_library.h"
#include "apps/common/size_sweep.h"
#include "apps/nvlink_benchmark/launch_floor.h"
#include "apps/nvlink_benchmark/test_pattern.h"
#include "common/cuda/cuda_error.h"
#include "mpi/mpi_error.h"
#include "intra_node/gpu_node.h"

namespace gradagg {
namespace {

struct Settings {
  cli::SizeSweep sweep{1024, 64 << 20, 2, 50, 10};
  ElementType type = ElementType::kFloat32;
  int repeats = 1;  // timings of -n calls per size and library; the median is reported
  bool nccl = true, symmetric = true, check = true, help = false, hostFallback = false;
  bool phases = false;  // also time the reduce-scatter and the all-gather alone (float32, one group)
};

bool Parse(int argc, char** argv, Settings& settings, int rank) {
  namespace po = boost::program_options;
  std::string typeText = "float";
  po::options_description flags(
      "gradagg_nvlink_benchmark: intra-node allreduce, gradagg vs NCCL (mpirun, one rank "
      "per GPU)");
  flags.add_options()("help,h", "this text");
  cli::SweepFlags sweepFlags(settings.sweep, flags, "calls");
  flags.add_options()("datatype,d", po::value(&typeText), "float, bfloat16 or half (float)")(
      "check,c", po::value<int>()->default_value(1), "check every element (1) or not (0)")(
      "repeats,r", po::value(&settings.repeats), "time -n calls this many times and report the median (1)")(
      "no-nccl", "leave out the NCCL rows")("no-symmetric", "leave out NCCL on symmetric windows")(
      "host-fallback", "also time the node's groups reducing through host memory (float only)")(
      "phases",
      "also time the allreduce's two halves alone: the reduce-scatter into each rank's shard of the output, "
      "then the all-gather of it (float only)");
  po::variables_map values;
  std::string error = sweepFlags.Parse(argc, argv, flags, values, 2);
  if (typeText == "float" || typeText == "float32") {
    settings.type = ElementType::kFloat32;
  } else if (typeText == "bfloat16") {
    settings.type = ElementType::kBFloat16;
  } else if (typeText == "half" || typeText == "float16") {
    settings.type = ElementType::kFloat16;
  } else if (error.empty()) {
    error = "datatype must be float, bfloat16 or half, not " + typeText;
  }
  if (error.empty() && settings.repeats < 1)
    error = "--repeats must be at least 1, not " + std::to_string(settings.repeats);
  if (rank == 0 && (values.count("help") || !error.empty())) {
    if (!error.empty()) std::cerr << "gradagg_nvlink_benchmark: " << error << "\n";
    std::cout << flags;
  }
  settings.help = values.count("help") > 0;
  if (!error.empty() || settings.help) return false;
  settings.nccl = values.count("no-nccl") == 0;
  settings.symmetric = settings.nccl && values.count("no-symmetric") == 0;
  settings.check = values["check"].as<int>() != 0;
  settings.hostFallback = values.count("host-fallback") > 0;
  settings.phases = values.count("phases") > 0;
  if ((settings.hostFallback || settings.phases) && settings.type != ElementType::kFloat32) {
    if (rank == 0)
      std::cerr << "gradagg_nvlink_benchmark: --" << (settings.phases ? "phases" : "host-fallback")
                << " sums float only\n";
    return false;
  }
  return true;
}

// Mean time per call in microseconds over -n calls, the slowest rank's; with --repeats, the median of that many
// such means (the same on every rank).
template <typename Call>
double TimeCalls(const Settings& settings, cudaStream_t stream, Call call) {
  for (int i = 0; i < settings.sweep.warmups; ++i) call();
  cudaEvent_t start, stop;
  GRADAGG_CUDA_CHECK(cudaEventCreate(&start));
  GRADAGG_CUDA_CHECK(cudaEventCreate(&stop));
  std::vector<double> means;
  for (int r = 0; r < settings.repeats; ++r) {
    GRADAGG_CUDA_CHECK(cudaStreamSynchronize(stream));
    GRADAGG_MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
    GRADAGG_CUDA_CHECK(cudaEventRecord(start, stream));
    for (int i = 0; i < settings.sweep.iterations; ++i) call();
    GRADAGG_CUDA_CHECK(cudaEventRecord(stop, stream));
    GRADAGG_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    GRADAGG_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    double mine = 1000.0 * ms / settings.sweep.iterations, slowest = 0;
    GRADAGG_MPI_CHECK(MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
    means.push_back(slowest);
  }
  GRADAGG_CUDA_CHECK(cudaEventDestroy(start));
  GRADAGG_CUDA_CHECK(cudaEventDestroy(stop));
  return cli::Median(means);
}

size_t SumOverRanks(size_t mine) {
  unsigned long long value = mine, total = 0;
  GRADAGG_MPI_CHECK(MPI_Allreduce(&value, &total, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, MPI_COMM_WORLD));
  return static_cast<size_t>(total);
}

int Run(const Settings& settings) {
  int rank = 0, ranks = 1, devices = 0;
  GRADAGG_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  GRADAGG_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &ranks));
  GRADAGG_CUDA_CHECK(cudaGetDeviceCount(&devices));
  GRADAGG_CUDA_CHECK(cudaSetDevice(rank % devices));
  cudaStream_t stream;
  GRADAGG_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

  const GpuNodeConfig config = GpuNodeConfigFromEnvironment();
  GpuNode node(MPI_COMM_WORLD, config);
  // The same node reducing through host memory, as every multi-group node did before the chain.
  std::unique_ptr<GpuNode> host;
  if (settings.hostFallback && !node.fullyConnected()) {
    GpuNodeConfig hostConfig = config;
    hostConfig.hostBetweenGroups = true;
    host = std::make_unique<GpuNode>(MPI_COMM_WORLD, hostConfig);
  }
  std::string why;
  std::unique_ptr<NcclLibrary> nccl;
  if (settings.nccl) {
    setenv("NCCL_NVLS_ENABLE", "0", 1);  // NVLink SHARP stays off on these machines (DEVICE.md)
    nccl = NcclLibrary::Open(
        rank, ranks,
        [](void* data, int bytes) { GRADAGG_MPI_CHECK(MPI_Bcast(data, bytes, MPI_BYTE, 0, MPI_COMM_WORLD)); }, why);
  }

  const size_t elementBytes = ElementBytes(settings.type);
  const size_t maxCount = settings.sweep.maxBytes / elementBytes;
  void *input = nullptr, *output = nullptr;
  GRADAGG_CUDA_CHECK(cudaMalloc(&input, maxCount * elementBytes));
  GRADAGG_CUDA_CHECK(cudaMalloc(&output, maxCount * elementBytes));
  node.Register(input, maxCount * elementBytes);
  node.Register(output, maxCount * elementBytes);
  // NCCL on symmetric windows as well (its symmetric-memory kernels, NCCL 2.27+): gradagg is judged against the
  // faster of the two NCCL runs.
  std::string symmetricWhy = nccl ? (settings.symmetric ? "" : "left out (--no-symmetric)") : "no NCCL";
  const bool symmetric = nccl && settings.symmetric && nccl->AllocateSymmetric(maxCount * elementBytes, symmetricWhy);
  const bool phases = settings.phases && node.fullyConnected();
  if (settings.phases && !phases && rank == 0) std::printf("# phases: left out (the node is not one NVLink group)\n");

  if (rank == 0) {
    std::printf("# gradagg_nvlink_benchmark: %d ranks, %s, %d iterations, %d warm-ups", ranks, ToString(settings.type),
                settings.sweep.iterations, settings.sweep.warmups);
    if (settings.repeats > 1) std::printf(", the median of %d timings", settings.repeats);
    std::printf("\n");
    std::printf("# node: %s", node.Describe().c_str());
    if (node.fullyConnected())
      std::printf(
          ", one-shot up to %zu bytes (in lines above %zu), packet two-shot up to %zu, line two-shot up to %zu, "
          "launched dependent up to %zu",
          node.peers().config().oneShotMaxBytes, node.peers().config().oneShotLinesAbove,
          node.peers().config().packetMaxBytes, node.peers().config().lineMaxBytes,
          node.peers().config().dependentLaunchMaxBytes);
    std::printf("\n");
    if (host) std::printf("# host: the same node through host memory; vs_host = host time / gradagg time\n");
    if (phases)
      std::printf(
          "# phases: rs_us, the reduce-scatter alone into each rank's shard of the output (equal shards); "
          "ag_us, the all-gather of that shard; #wrong after one of each\n");
    std::printf("# NCCL: %s\n", nccl ? ("libnccl " + nccl->version() + ", NCCL_NVLS_ENABLE=0").c_str()
                                     : (settings.nccl ? why.c_str() : "left out (--no-nccl)"));
    std::printf("# NCCL on symmetric windows (sym_us): %s\n",
                symmetric ? "ncclMemAlloc + ncclCommWindowRegister(NCCL_WIN_COLL_SYMMETRIC)" : symmetricWhy.c_str());
    std::printf("# busbw = algbw * 2(n-1)/n; speedup = NCCL time / gradagg time; vs_best = the faster NCCL's\n");
    std::printf("#%11s %12s %9s  %10s %7s %7s %6s  %10s %7s %7s %6s  %7s", "size", "count", "type", "gradagg_us",
                "algbw", "busbw", "#wrong", "nccl_us", "algbw", "busbw", "#wrong", "speedup");
    if (symmetric) std::printf("  %10s %6s %7s", "sym_us", "#wrong", "vs_best");
    if (host) std::printf("  %10s %6s %7s", "host_us", "#wrong", "vs_host");
    std::printf(phases ? "  %10s %10s %6s\n" : "\n", "rs_us", "ag_us", "#wrong");
  }
  // As nccl-tests does before its sweep: every library's warm-up calls at the largest size and then at the smallest,
  // so that the first sizes timed find clocks, caches and each library's first-call setup as the later ones do.
  const size_t minCount = std::max<size_t>(1, settings.sweep.minBytes / elementBytes);
  for (const size_t count : {maxCount, minCount}) {
    for (int i = 0; i < settings.sweep.warmups; ++i) {
      node.AllReduce(input, output, count, settings.type, stream);
      if (nccl) nccl->AllReduce(input, output, count, settings.type, stream);
      if (symmetric) nccl->AllReduce(nccl->symmetricInput(), nccl->symmetricOutput(), count, settings.type, stream);
      if (host) host->AllReduce(input, output, count, settings.type, stream);
    }
    GRADAGG_CUDA_CHECK(cudaStreamSynchronize(stream));
    node.ThrowIfFailed();
    GRADAGG_MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
  }

  size_t totalWrong = 0;
  int faster = 0, compared = 0;
  const double busFactor = 2.0 * (ranks - 1) / ranks;
  uint32_t seed = 1;
  for (uint64_t bytes = settings.sweep.minBytes; bytes <= settings.sweep.maxBytes; bytes *= settings.sweep.factor) {
    const size_t count = bytes / elementBytes;
    if (count == 0) continue;
    FillPattern(input, count, settings.type, rank, ++seed, stream);
    // Once the calls timed before have passed the node's checks: `run` writes into a poisoned `out`, whose wrong
    // elements are counted on every rank (0 unchecked).
    const auto wrongAfter = [&](void* out, auto run) -> size_t {
      GRADAGG_CUDA_CHECK(cudaStreamSynchronize(stream));
      node.ThrowIfFailed();
      GRADAGG_CUDA_CHECK(cudaMemsetAsync(out, 0xff, count * elementBytes, stream));
      run();
      return settings.check ? SumOverRanks(CountWrong(out, count, settings.type, ranks, seed, stream)) : 0;
    };
    // One allreduce timed over the calls, then once more into a poisoned output and checked on every element.
    const auto timeAndCheckOn = [&](void* in, void* out, auto allReduce, size_t& wrong) {
      const double time = TimeCalls(settings, stream, [&] { allReduce(in, out, count, settings.type, stream); });
      wrong = wrongAfter(out, [&] { allReduce(in, out, count, settings.type, stream); });
      return time;
    };
    const auto timeAndCheck = [&](auto allReduce, size_t& wrong) {
      return timeAndCheckOn(input, output, allReduce, wrong);
    };
    const auto through = [](auto& reducer) {
      return [&reducer](const void* in, void* out, size_t n, ElementType type, cudaStream_t s) {
        reducer.AllReduce(in, out, n, type, s);
      };
    };
    size_t wrong = 0, ncclWrong = 0, hostWrong = 0;
    const double ours = timeAndCheck(through(node), wrong);
    node.ThrowIfFailed();
    const double theirs = nccl ? timeAndCheck(through(*nccl), ncclWrong) : 0.0;
    size_t symmetricWrong = 0;
    double symmetricTime = 0.0;
    if (symmetric) {
      GRADAGG_CUDA_CHECK(
          cudaMemcpyAsync(nccl->symmetricInput(), input, count * elementBytes, cudaMemcpyDeviceToDevice, stream));
      symmetricTime = timeAndCheckOn(nccl->symmetricInput(), nccl->symmetricOutput(), through(*nccl), symmetricWrong);
    }
    const double best = symmetric ? std::min(theirs, symmetricTime) : theirs;
    const double hostTime = host ? timeAndCheck(through(*host), hostWrong) : 0.0;
    if (host) host->ThrowIfFailed();
    size_t phaseWrong = 0;
    double scatterTime = 0.0, gatherTime = 0.0;
    if (phases) {
      // Equal shards of whole 16-byte vectors, the last one shorter or empty.
      const size_t per = ((count + ranks - 1) / ranks + 3) / 4 * 4;
      std::vector<ElementRange> shards;
      for (int p = 0; p < ranks; ++p) {
        const size_t begin = std::min(count, p * per);
        shards.push_back({begin, std::min(count, begin + per) - begin});
      }
      const float* in = static_cast<const float*>(input);
      float* const out = static_cast<float*>(output);
      float* const stripe = out + shards[rank].begin;
      scatterTime = TimeCalls(settings, stream, [&] { node.ReduceScatter(in, shards, stripe, stream); });
      gatherTime = TimeCalls(settings, stream, [&] { node.AllGather(stripe, shards, out, stream); });
      phaseWrong = wrongAfter(out, [&] {
        node.ReduceScatter(in, shards, stripe, stream);
        node.AllGather(stripe, shards, out, stream);
      });
      node.ThrowIfFailed();
    }
    totalWrong += wrong + hostWrong + phaseWrong;  // NCCL's own rows are shown, not judged
    const double actual = static_cast<double>(count * elementBytes);
    if (rank == 0) {
      std::printf("%12llu %12zu %9s  %10.2f %7.1f %7.1f %6zu", static_cast<unsigned long long>(count * elementBytes),
                  count, ToString(settings.type), ours, actual / ours / 1e3, actual / ours / 1e3 * busFactor, wrong);
      if (nccl) {
        std::printf("  %10.2f %7.1f %7.1f %6zu  %7.2f", theirs, actual / theirs / 1e3,
                    actual / theirs / 1e3 * busFactor, ncclWrong, theirs / ours);
      } else {
        std::printf("  %10s %7s %7s %6s  %7s", "-", "-", "-", "-", "-");
      }
      if (symmetric) std::printf("  %10.2f %6zu %7.2f", symmetricTime, symmetricWrong, best / ours);
      if (host) std::printf("  %10.2f %6zu %7.2f", hostTime, hostWrong, hostTime / ours);
      if (phases) std::printf("  %10.2f %10.2f %6zu", scatterTime, gatherTime, phaseWrong);
      std::printf("\n");
    }
    if (nccl) {
      ++compared;
      faster += best >= ours ? 1 : 0;
    }
  }
  // The floor under any one-kernel call, measured last, when clocks and the launch path are warm as for the sizes.
  const double launchFloor = TimeCalls(settings, stream, [&] { LaunchEmptyKernel(stream); });
  node.Deregister(output);
  node.Deregister(input);
  GRADAGG_CUDA_CHECK(cudaFree(input));
  GRADAGG_CUDA_CHECK(cudaFree(output));
  nccl.reset();
  host.reset();
  GRADAGG_CUDA_CHECK(cudaStreamDestroy(stream));
  if (rank == 0) {
    std::printf("# launch floor: %.2f us per call (an empty kernel, timed the same way)\n", launchFloor);
    std::printf("# wrong elements over all sizes: %zu\n", totalWrong);
    if (compared > 0)
      std::printf("# gradagg at least as fast as the faster NCCL at %d of %d sizes\n", faster, compared);
    std::printf("# check: %s\n", totalWrong == 0 ? "PASS" : "FAIL");
  }
  return totalWrong == 0 ? 0 : 1;
}

}  // namespace
}  // namespace gradagg

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  gradagg::Settings settings;
  int code = 2;
  if (gradagg::Parse(argc, argv, settings, rank)) {
    try {
      code = gradagg::Run(settings);
    } catch (const std::exception& error) {
      std::cerr << "gradagg_nvlink_benchmark: " << error.what() << "\n";
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
  } else {
    code = settings.help ? 0 : 2;
  }
  MPI_Finalize();
  return code;
}
