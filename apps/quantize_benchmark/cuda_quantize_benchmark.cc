// The CUDA quantizer's throughput against the device's own copy bandwidth, measured in the same binary.
//
// GB/s counts the bytes that must move through device memory: encode reads the input and the residual and writes
// the residual and the wire; decode-accumulate reads and writes the sum and reads the wire; the copy reads and
// writes its bytes. of_copy = GB/s over the copy's GB/s at the same size (run the Copy rows first: they are
// registered first). Times come from CUDA events around a batch of launches, the median of repetitions being left
// to Google Benchmark's own options.
//   gradagg_cuda_quantize_benchmark --benchmark_min_time=0.1
#include <benchmark/benchmark.h>
#include <cuda_runtime_api.h>

#include <cstdio>
#include <map>
#include <random>
#include <vector>

#include "common/cuda/cuda_error.h"
#include "quantize/cuda/cuda_quantizer.h"
#include "common/cuda/device_memory.h"

namespace {

using gradagg::CudaQuantizer;
using gradagg::DeviceBucketLayout;
using gradagg::DeviceBuffer;
using gradagg::ElementType;

std::map<int64_t, double>& CopyBandwidth() {  // GB/s by input bytes
  static std::map<int64_t, double> bandwidth;
  return bandwidth;
}

// Launches per timed batch: enough that launch gaps do not dominate small sizes.
int BatchFor(int64_t bytes) { return bytes <= (int64_t{16} << 20) ? 20 : 3; }

struct Events {
  cudaEvent_t start = nullptr;
  cudaEvent_t stop = nullptr;
  Events() {
    GRADAGG_CUDA_CHECK(cudaEventCreate(&start));
    GRADAGG_CUDA_CHECK(cudaEventCreate(&stop));
  }
  ~Events() {
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
  }
};

// Times `launch` in batches with CUDA events; reports GB/s of `bytesMoved` per launch.
template <typename Launch>
void TimeLaunches(benchmark::State& state, int64_t inputBytes, double bytesMoved, Launch launch) {
  Events events;
  const int batch = BatchFor(inputBytes);
  launch();  // warm-up: module load, first touch
  GRADAGG_CUDA_CHECK(cudaDeviceSynchronize());
  double seconds = 0.0;
  for (auto _ : state) {
    GRADAGG_CUDA_CHECK(cudaEventRecord(events.start));
    for (int i = 0; i < batch; ++i) launch();
    GRADAGG_CUDA_CHECK(cudaEventRecord(events.stop));
    GRADAGG_CUDA_CHECK(cudaEventSynchronize(events.stop));
    float milliseconds = 0.0f;
    GRADAGG_CUDA_CHECK(cudaEventElapsedTime(&milliseconds, events.start, events.stop));
    state.SetIterationTime(milliseconds / 1e3 / batch);
    seconds += milliseconds / 1e3 / batch;
  }
  // A plain counter, final now, so that later rows can compare with it.
  state.counters["GB/s"] = bytesMoved * static_cast<double>(state.iterations()) / seconds / 1e9;
}

// Normal(0, 1) values: one random block of 16M elements (64 MB, more than the L2), repeated.
std::vector<float> RandomNormal(size_t count) {
  static const std::vector<float> block = [] {
    std::mt19937 generator(7);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> values(size_t{1} << 24);
    for (float& v : values) v = normal(generator);
    return values;
  }();
  std::vector<float> values(count);
  for (size_t i = 0; i < count; ++i) values[i] = block[i % block.size()];
  return values;
}

gradagg::QuantizerConfig Config(int64_t bits) {
  gradagg::QuantizerConfig config;
  config.bits = static_cast<int>(bits);
  return config;
}

void RecordRatio(benchmark::State& state, int64_t inputBytes) {
  const auto copy = CopyBandwidth().find(inputBytes);
  if (copy != CopyBandwidth().end() && copy->second > 0.0) {
    state.counters["of_copy"] = state.counters["GB/s"].value / copy->second;
  }
}

void Copy(benchmark::State& state) {
  const int64_t bytes = state.range(0);
  const DeviceBuffer from = DeviceBuffer::From(RandomNormal(static_cast<size_t>(bytes) / 4));
  DeviceBuffer to(static_cast<size_t>(bytes));
  TimeLaunches(state, bytes, 2.0 * static_cast<double>(bytes), [&] {
    GRADAGG_CUDA_CHECK(cudaMemcpyAsync(to.get(), from.get(), static_cast<size_t>(bytes), cudaMemcpyDeviceToDevice));
  });
  CopyBandwidth()[bytes] = state.counters["GB/s"].value;
}

// Args: input bytes (float32), bits, element type (0 float32, 1 bfloat16).
void Encode(benchmark::State& state) {
  const int64_t bytes = state.range(0);
  const size_t count = static_cast<size_t>(bytes) / 4;
  const ElementType type = state.range(2) == 0 ? ElementType::kFloat32 : ElementType::kBFloat16;
  const CudaQuantizer quantizer(Config(state.range(1)));
  const DeviceBucketLayout layout = quantizer.Uniform(count);
  const DeviceBuffer values = DeviceBuffer::From(RandomNormal(count));  // bfloat16 rows read half of it
  DeviceBuffer residual = DeviceBuffer::From(std::vector<float>(count, 0.0f));
  DeviceBuffer wire(quantizer.WireBytes(count));
  const double moved = static_cast<double>(count) * (static_cast<double>(gradagg::ElementBytes(type)) + 8.0) +
                       static_cast<double>(quantizer.WireBytes(count));
  TimeLaunches(state, bytes, moved,
               [&] { quantizer.Encode(values.get(), type, residual.as<float>(), layout, wire.get(), nullptr); });
  RecordRatio(state, bytes);
}

// Args: input bytes, bits.
void DecodeAccumulate(benchmark::State& state) {
  const int64_t bytes = state.range(0);
  const size_t count = static_cast<size_t>(bytes) / 4;
  const CudaQuantizer quantizer(Config(state.range(1)));
  const DeviceBucketLayout layout = quantizer.Uniform(count);
  const DeviceBuffer values = DeviceBuffer::From(RandomNormal(count));
  DeviceBuffer wire(quantizer.WireBytes(count));
  quantizer.Encode(values.get(), ElementType::kFloat32, nullptr, layout, wire.get(), nullptr);
  DeviceBuffer sum = DeviceBuffer::From(std::vector<float>(count, 0.0f));
  const double moved = 8.0 * static_cast<double>(count) + static_cast<double>(quantizer.WireBytes(count));
  TimeLaunches(state, bytes, moved, [&] { quantizer.DecodeAccumulate(wire.get(), layout, sum.as<float>(), nullptr); });
  RecordRatio(state, bytes);
}

constexpr int64_t kSizes[] = {int64_t{1} << 20,  int64_t{4} << 20,   int64_t{16} << 20,
                              int64_t{64} << 20, int64_t{256} << 20, int64_t{1} << 30};

void CopySizes(benchmark::internal::Benchmark* b) {
  for (int64_t size : kSizes) b->Args({size});
  b->ArgNames({"bytes"})->UseManualTime()->Unit(benchmark::kMicrosecond);
}

void EncodeSizes(benchmark::internal::Benchmark* b) {
  for (int64_t bits : {1, 2, 4, 8, 32}) {
    for (int64_t size : kSizes) b->Args({size, bits, 0});
  }
  for (int64_t size : kSizes) b->Args({size, 1, 1});
  b->ArgNames({"bytes", "bits", "bf16"})->UseManualTime()->Unit(benchmark::kMicrosecond);
}

void DecodeSizes(benchmark::internal::Benchmark* b) {
  for (int64_t bits : {1, 2, 4, 8, 32}) {
    for (int64_t size : kSizes) b->Args({size, bits});
  }
  b->ArgNames({"bytes", "bits"})->UseManualTime()->Unit(benchmark::kMicrosecond);
}

BENCHMARK(Copy)->Apply(CopySizes);
BENCHMARK(Encode)->Apply(EncodeSizes);
BENCHMARK(DecodeAccumulate)->Apply(DecodeSizes);

}  // namespace

int main(int argc, char** argv) {
  const std::string reason = gradagg::CudaUnavailableReason();
  if (!reason.empty()) {
    std::printf("gradagg_cuda_quantize_benchmark: skipped: %s\n", reason.c_str());
    return 0;
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
