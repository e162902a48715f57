// Encode and decode throughput of the CPU quantizer, in GB/s of float32 input (Google Benchmark), on one core.
// The label names the SIMD target the codec chose on this CPU.
//   gradagg_quantize_benchmark [--benchmark_filter=Encode/bits:1/...]
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "quantize/bucket_codec.h"
#include "quantize/quantizer.h"

namespace {

std::vector<float> Gradient(size_t count) {
  std::mt19937 generator(1);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> values(count);
  for (float& v : values) v = normal(generator);
  return values;
}

gradagg::Quantizer MakeQuantizer(benchmark::State& state,
                                 gradagg::OneBitThreshold threshold = gradagg::OneBitThreshold::kZero) {
  gradagg::QuantizerConfig config;
  config.bits = static_cast<int>(state.range(0));
  config.threshold = threshold;
  state.SetLabel(gradagg::BucketCodecTarget());
  return gradagg::Quantizer(config);
}

void EncodeWith(benchmark::State& state, gradagg::OneBitThreshold threshold) {
  const gradagg::Quantizer quantizer = MakeQuantizer(state, threshold);
  const auto count = static_cast<size_t>(state.range(1));
  const std::vector<float> gradient = Gradient(count);
  std::vector<float> residual(count, 0.0f);
  std::vector<uint32_t> wire(quantizer.WireBytes(count) / 4 + 1);
  for (auto _ : state) {
    quantizer.Encode(gradient.data(), residual.data(), count, wire.data());
    benchmark::DoNotOptimize(wire.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(count * sizeof(float)));
}

void Encode(benchmark::State& state) { EncodeWith(state, gradagg::OneBitThreshold::kZero); }
// 1 bit with the bucket-mean threshold (two statistics passes instead of one).
void EncodeMeanThreshold(benchmark::State& state) { EncodeWith(state, gradagg::OneBitThreshold::kMean); }

void DecodeAccumulate(benchmark::State& state) {
  const gradagg::Quantizer quantizer = MakeQuantizer(state);
  const auto count = static_cast<size_t>(state.range(1));
  const std::vector<float> gradient = Gradient(count);
  std::vector<uint32_t> wire(quantizer.WireBytes(count) / 4 + 1);
  quantizer.Encode(gradient.data(), nullptr, count, wire.data());
  std::vector<float> sum(count, 0.0f);
  for (auto _ : state) {
    quantizer.DecodeAccumulate(wire.data(), count, sum.data());
    benchmark::DoNotOptimize(sum.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(count * sizeof(float)));
}

void Sizes(benchmark::internal::Benchmark* benchmark) {
  for (int64_t bits : {1, 2, 4, 8, 32}) {
    // 64 Ki elements stay in L1-L2; 4 Mi (16 MiB arrays) in this machine's large L3; 64 Mi (256 MiB arrays) in DRAM.
    for (int64_t count : {int64_t{1} << 16, int64_t{1} << 22, int64_t{1} << 26}) benchmark->Args({bits, count});
  }
  benchmark->ArgNames({"bits", "elements"});
}

BENCHMARK(Encode)->Apply(Sizes);
BENCHMARK(EncodeMeanThreshold)
    ->ArgsProduct({{1}, {int64_t{1} << 16, int64_t{1} << 22}})
    ->ArgNames({"bits", "elements"});
BENCHMARK(DecodeAccumulate)->Apply(Sizes);

}  // namespace

BENCHMARK_MAIN();
