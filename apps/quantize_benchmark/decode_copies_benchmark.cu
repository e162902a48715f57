// Phase 2's decode into every GPU of a node (CudaQuantizer::DecodeCopies), on two GPUs of one process, both decoding
// at once into their own array and the peer's as a 2 x 2 job's node does, against the same bytes pushed by a plain
// copy kernel and by cudaMemcpyPeerAsync (the NVLink floor for this traffic), in the same run.
//   gradagg_decode_copies_benchmark [MIB] [REPEATS]      (defaults 128 MiB of float32 per GPU, median of 15)
// Prints one row per variant: microseconds per call (median, the slower GPU of each repetition) and the GB/s that
// crossed NVLink in each direction.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "apps/common/median.h"
#include "common/cuda/cuda_error.h"
#include "common/cuda/device_memory.h"
#include "quantize/cuda/cuda_quantizer.h"

namespace {

using gradagg::CudaQuantizer;
using gradagg::DeviceBucketLayout;
using gradagg::DeviceBuffer;
using gradagg::ValueCopies;

// The floor: `count` floats of `from` (local) written to `local` and `peer`, 8 vectors a thread at a time.
__global__ void CopyTwice(const float4* from, size_t vectors, float4* local, float4* peer) {
  constexpr int kUnroll = 8;
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t first = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; first < vectors;
       first += kUnroll * stride) {
    float4 data[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      if (first + u * stride < vectors) data[u] = from[first + u * stride];
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      if (first + u * stride < vectors) {
        peer[first + u * stride] = data[u];
        if (local != nullptr) local[first + u * stride] = data[u];
      }
    }
  }
}

struct Gpu {
  int device = 0;
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  DeviceBuffer wire, values, residual, out;
};

}  // namespace

int main(int argc, char** argv) {
  const size_t mib = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 128;
  const int repeats = argc > 2 ? std::atoi(argv[2]) : 15;
  if (mib == 0 || repeats < 1) {
    std::fprintf(stderr, "usage: gradagg_decode_copies_benchmark [MIB >= 1] [REPEATS >= 1]\n");
    return 2;
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices < 2) {
    std::printf("SKIP: needs two GPUs (found %d)\n", devices);
    return 0;
  }
  int canAccess[2] = {0, 0};
  GRADAGG_CUDA_CHECK(cudaDeviceCanAccessPeer(&canAccess[0], 0, 1));
  GRADAGG_CUDA_CHECK(cudaDeviceCanAccessPeer(&canAccess[1], 1, 0));
  if (canAccess[0] == 0 || canAccess[1] == 0) {
    std::printf("SKIP: GPUs 0 and 1 cannot reach each other's memory\n");
    return 0;
  }
  const size_t count = mib << 18;  // float32 elements
  gradagg::QuantizerConfig config;
  config.bits = 1;
  const CudaQuantizer quantizer(config);
  int sms = 0;
  GRADAGG_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));

  std::vector<float> host(count);
  std::mt19937 generator(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (float& v : host) v = normal(generator);

  Gpu gpus[2];
  DeviceBucketLayout layouts[2];
  for (int g = 0; g < 2; ++g) {
    Gpu& gpu = gpus[g];
    gpu.device = g;
    GRADAGG_CUDA_CHECK(cudaSetDevice(g));
    GRADAGG_CUDA_CHECK(cudaDeviceEnablePeerAccess(1 - g, 0));
    GRADAGG_CUDA_CHECK(cudaStreamCreateWithFlags(&gpu.stream, cudaStreamNonBlocking));
    GRADAGG_CUDA_CHECK(cudaEventCreate(&gpu.start));
    GRADAGG_CUDA_CHECK(cudaEventCreate(&gpu.stop));
    gpu.values = DeviceBuffer::From(host);
    gpu.residual = DeviceBuffer::From(std::vector<float>(count, 0.0f));
    gpu.out = DeviceBuffer(2 * count * sizeof(float));  // [0, count): copy of GPU 0's stripe, then GPU 1's
    gpu.wire = DeviceBuffer(quantizer.WireBytes(count));
    layouts[g] = quantizer.Uniform(count);
    quantizer.Encode(gpu.values.get(), gradagg::ElementType::kFloat32, gpu.residual.as<float>(), layouts[g],
                     gpu.wire.get(), gpu.stream);
    GRADAGG_CUDA_CHECK(cudaStreamSynchronize(gpu.stream));
  }
  // GPU g decodes stripe g: into its own out + g * count and the peer's out + g * count.
  const auto local = [&](int g) { return gpus[g].out.as<float>() + g * count; };
  const auto peer = [&](int g) { return gpus[1 - g].out.as<float>() + g * count; };

  using Launch = std::function<void(int g)>;
  const auto time = [&](const char* name, const Launch& launch) {
    std::vector<double> us;
    for (int r = 0; r < repeats + 2; ++r) {
      for (int g = 0; g < 2; ++g) {
        GRADAGG_CUDA_CHECK(cudaSetDevice(g));
        GRADAGG_CUDA_CHECK(cudaDeviceSynchronize());
      }
      for (int g = 0; g < 2; ++g) {
        GRADAGG_CUDA_CHECK(cudaSetDevice(g));
        GRADAGG_CUDA_CHECK(cudaEventRecord(gpus[g].start, gpus[g].stream));
        launch(g);
        GRADAGG_CUDA_CHECK(cudaGetLastError());
        GRADAGG_CUDA_CHECK(cudaEventRecord(gpus[g].stop, gpus[g].stream));
      }
      double slowest = 0.0;
      for (int g = 0; g < 2; ++g) {
        GRADAGG_CUDA_CHECK(cudaEventSynchronize(gpus[g].stop));
        float ms = 0.0f;
        GRADAGG_CUDA_CHECK(cudaEventElapsedTime(&ms, gpus[g].start, gpus[g].stop));
        slowest = std::max(slowest, 1e3 * ms);
      }
      if (r >= 2) us.push_back(slowest);  // two warm-ups
    }
    const double median = gradagg::cli::Median(us);
    std::printf("%-40s %9.1f us %7.1f GB/s\n", name, median, count * sizeof(float) / median / 1e3);
  };
  // Both copies of GPU g's stripe must hold what a decode into one array writes.
  const auto check = [&](const char* name) {
    std::vector<float> expected(count), got(count);
    for (int g = 0; g < 2; ++g) {
      GRADAGG_CUDA_CHECK(cudaSetDevice(g));
      float* const single = gpus[g].values.as<float>();  // scratch: the stripe decoded on its own
      quantizer.Decode(gpus[g].wire.get(), layouts[g], single, gradagg::ElementType::kFloat32, gpus[g].stream);
      GRADAGG_CUDA_CHECK(cudaStreamSynchronize(gpus[g].stream));  // the copies below run on the legacy stream
      GRADAGG_CUDA_CHECK(cudaMemcpy(expected.data(), single, count * sizeof(float), cudaMemcpyDeviceToHost));
      for (const float* from : {local(g), peer(g)}) {
        GRADAGG_CUDA_CHECK(cudaMemcpy(got.data(), from, count * sizeof(float), cudaMemcpyDefault));
        if (got != expected) {
          std::printf("FAIL: %s wrote other values than a decode into one array (GPU %d)\n", name, g);
          std::exit(1);
        }
      }
      GRADAGG_CUDA_CHECK(cudaMemsetAsync(local(g), 0, count * sizeof(float), gpus[g].stream));
      GRADAGG_CUDA_CHECK(cudaSetDevice(1 - g));
      GRADAGG_CUDA_CHECK(cudaMemset(peer(g), 0, count * sizeof(float)));
    }
  };

  std::printf("%zu MiB float32 per GPU, 1 bit, %d SMs, median of %d (slower GPU)\n", mib, sms, repeats);
  const size_t vectors = count / 4;
  for (int blocksPerSm : {1, 2}) {
    const std::string name = "copy to peer, " + std::to_string(blocksPerSm) + " blocks/SM";
    time(name.c_str(), [&](int g) {
      CopyTwice<<<sms * blocksPerSm, 256, 0, gpus[g].stream>>>(gpus[g].values.as<float4>(), vectors, nullptr,
                                                               reinterpret_cast<float4*>(peer(g)));
    });
    const std::string both = "copy to local + peer, " + std::to_string(blocksPerSm) + " blocks/SM";
    time(both.c_str(), [&](int g) {
      CopyTwice<<<sms * blocksPerSm, 256, 0, gpus[g].stream>>>(gpus[g].values.as<float4>(), vectors,
                                                               reinterpret_cast<float4*>(local(g)),
                                                               reinterpret_cast<float4*>(peer(g)));
    });
  }
  time("cudaMemcpyPeerAsync", [&](int g) {
    GRADAGG_CUDA_CHECK(cudaMemcpyPeerAsync(peer(g), 1 - g, gpus[g].values.get(), g, count * sizeof(float),
                                           gpus[g].stream));
  });
  for (bool peerFirst : {false, true}) {
    const std::string name = std::string("library DecodeCopies, ") + (peerFirst ? "peer first" : "local first");
    time(name.c_str(), [&](int g) {
      ValueCopies copies;
      copies.count = 2;
      copies.at[peerFirst ? 0 : 1] = peer(g);
      copies.at[peerFirst ? 1 : 0] = local(g);
      quantizer.DecodeCopies(gpus[g].wire.get(), layouts[g], copies, gpus[g].stream);
    });
    check(name.c_str());
  }
  return 0;
}
