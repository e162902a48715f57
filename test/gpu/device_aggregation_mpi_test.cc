// AggregateGradients on GPUs under mpirun, one rank per GPU, on the layout the run asks for
// (GRADAGG_TEST_RANKS_PER_NODE) and the transport it forces (GRADAGG_CUDA_AWARE_MPI): bitwise against the serial
// simulation, identical on every rank, residuals across calls, mixed tensor lists, a rank with no samples, and the
// ways a caller can get it wrong. Skips itself (on every rank alike) without one GPU per rank.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstring>
#include <string>
#include <vector>

#include "test/gpu/device_aggregation_fixture.h"

namespace gradagg {
namespace {

using test::AllInputs;
using test::DeviceAggregation;
using test::IdenticalOnAllRanks;
using test::Oracle;
using test::RandomGradient;
using test::SameBits;
using test::WorldRank;
using test::WorldSize;

TEST_F(DeviceAggregation, MatchesTheSimulationForEveryBitWidthAndAwkwardSize) {
  const size_t ranks = static_cast<size_t>(WorldSize());
  for (int bits : {1, 2, 4, 8, 32}) {
    const AggregatorOptions options = Options(bits);
    Aggregator aggregator(MPI_COMM_WORLD, options);
    SerialSimulation oracle = Oracle(options);
    const size_t bucket = options.bucketSize;
    for (size_t count : {size_t{0}, size_t{1}, size_t{5}, bucket - 1, bucket + 1, ranks * bucket - 3,
                         3 * ranks * bucket + 7, size_t{100003}, size_t{1} << 20}) {
      aggregator.ResetResiduals();
      oracle.ResetResiduals();
      ExpectMatchesOracle(aggregator, oracle, count, static_cast<uint32_t>(count + bits),
                          "bits " + std::to_string(bits) + " count " + std::to_string(count));
    }
  }
}

// As the CLI does it: small buffers allocated first, then a first call of one bucket, so all ranks but one hold an
// empty stripe, whose registration may sit right after the flat buffer's (an empty range at one's start is also at
// the other's end; once taken for a stale registration, on those ranks only).
TEST_F(DeviceAggregation, ASmallFirstCallWithEmptyStripesAfterOtherSmallAllocations) {
  const AggregatorOptions options = Options(1);
  Aggregator aggregator(MPI_COMM_WORLD, options);
  SerialSimulation oracle = Oracle(options);
  DeviceBuffer first(1024), second(1024);
  for (size_t count : {size_t{256}, size_t{1024}, size_t{256}})
    ExpectMatchesOracle(aggregator, oracle, count, 3, "count " + std::to_string(count));
}

TEST_F(DeviceAggregation, ResidualsPersistAcrossCallsAndReset) {
  const AggregatorOptions options = Options(1);
  Aggregator aggregator(MPI_COMM_WORLD, options);
  SerialSimulation oracle = Oracle(options);
  std::vector<float> first;
  for (uint32_t step = 0; step < 4; ++step) {
    const std::vector<float> result = ExpectMatchesOracle(aggregator, oracle, 70001, 40 + step, "step");
    if (step == 0) first = result;
  }
  aggregator.ResetResiduals();
  oracle.ResetResiduals();
  EXPECT_TRUE(SameBits(ExpectMatchesOracle(aggregator, oracle, 70001, 40, "after reset"), first));
}

TEST_F(DeviceAggregation, OtherQuantizerModesAndSmallStagingChunks) {
  AggregatorOptions options = Options(1);
  options.meanThreshold = true;
  options.errorFeedback = false;
  options.quantizeOwnStripe = false;
  options.bucketSize = 100;
  options.stagingChunkBytes = 4096;  // many chunks per message on the staged transport
  Aggregator aggregator(MPI_COMM_WORLD, options);
  SerialSimulation oracle = Oracle(options);
  for (uint32_t step = 0; step < 2; ++step) ExpectMatchesOracle(aggregator, oracle, 300007, 9 + step, "modes");
  options.meanThreshold = false;
  options.errorFeedback = true;
  options.bits = 4;
  Aggregator withFeedback(MPI_COMM_WORLD, options);
  SerialSimulation oracleWithFeedback = Oracle(options);
  for (uint32_t step = 0; step < 2; ++step)
    ExpectMatchesOracle(withFeedback, oracleWithFeedback, 300007, 19 + step, "no own quantization");
}

// Phase 2 in pieces (AggregatorOptions::pieceBytes): many small pieces, on the mapped transport (small stripes) and
// on the configured one (large), leave every bit as the simulation, which knows no pieces, has it.
TEST_F(DeviceAggregation, PiecesLeaveEveryBitAsItWas) {
  struct Case {
    size_t count;
    size_t pieceBytes;
  };
  // A piece per bucket on a small stripe; some tens of pieces on a large one.
  for (const Case& run : {Case{30011, 100}, Case{3000017, 64 << 10}}) {
    for (int bits : {1, 2, 32}) {
      AggregatorOptions options = Options(bits);
      options.pieceBytes = run.pieceBytes;
      options.bucketSize = 96;
      Aggregator aggregator(MPI_COMM_WORLD, options);
      SerialSimulation oracle = Oracle(options);
      for (uint32_t step = 0; step < 2; ++step) {
        ExpectMatchesOracle(aggregator, oracle, run.count, 5 + step,
                            "bits " + std::to_string(bits) + " piece " + std::to_string(run.pieceBytes) + " count " +
                                std::to_string(run.count) + " step " + std::to_string(step));
      }
    }
  }
}

TEST_F(DeviceAggregation, ChangingSizesGrowAndShrinkTheBuffers) {
  const AggregatorOptions options = Options(2);
  Aggregator aggregator(MPI_COMM_WORLD, options);
  SerialSimulation oracle = Oracle(options);
  for (size_t count : {3000, 700, 700, 900001, 3000}) ExpectMatchesOracle(aggregator, oracle, count, 7, "resized");
}

// A tensor's values as its type holds them, and the rounding of a float32 result to that type.
struct Typed {
  DataType type;
  size_t count;
};

float RoundTo(DataType type, float value) {
  if (type == DataType::kBFloat16) return __bfloat162float(__float2bfloat16_rn(value));
  if (type == DataType::kFloat16) return __half2float(__float2half_rn(value));
  return value;
}

std::vector<uint8_t> Encode(DataType type, const float* values, size_t count) {
  const size_t width = type == DataType::kFloat32 ? 4 : 2;
  std::vector<uint8_t> bytes(count * width);
  for (size_t i = 0; i < count; ++i) {
    if (type == DataType::kFloat32) {
      std::memcpy(&bytes[i * 4], &values[i], 4);
    } else if (type == DataType::kBFloat16) {
      const __nv_bfloat16 h = __float2bfloat16_rn(values[i]);
      std::memcpy(&bytes[i * 2], &h, 2);
    } else {
      const __half h = __float2half_rn(values[i]);
      std::memcpy(&bytes[i * 2], &h, 2);
    }
  }
  return bytes;
}

TEST_F(DeviceAggregation, MixedTensorListsRoundEachResultToItsType) {
  const std::vector<Typed> tensors = {{DataType::kFloat32, 1000}, {DataType::kBFloat16, 777},
                                      {DataType::kFloat16, 5003}, {DataType::kFloat32, 0},
                                      {DataType::kBFloat16, 1},   {DataType::kFloat32, 40000}};
  size_t total = 0;
  std::vector<size_t> lengths;
  for (const Typed& t : tensors) {
    total += t.count;
    lengths.push_back(t.count);
  }
  for (int bits : {1, 2, 4, 8, 32}) {
    const AggregatorOptions options = Options(bits);
    Aggregator aggregator(MPI_COMM_WORLD, options);
    SerialSimulation oracle = Oracle(options);
    // Every rank's inputs, as the tensors hold them (rounded to their types).
    std::vector<std::vector<float>> inputs = AllInputs(total, 77);
    for (std::vector<float>& input : inputs) {
      size_t offset = 0;
      for (const Typed& t : tensors)
        for (size_t i = 0; i < t.count; ++i, ++offset) input[offset] = RoundTo(t.type, input[offset] * 8.0f);
    }
    std::vector<DeviceBuffer> buffers;
    std::vector<DeviceGradient> gradients;
    size_t offset = 0;
    for (const Typed& t : tensors) {
      buffers.push_back(DeviceBuffer::From(Encode(t.type, inputs[WorldRank()].data() + offset, t.count)));
      gradients.push_back({buffers.back().get(), t.count, t.type});
      offset += t.count;
    }
    aggregator.AggregateGradients(gradients, stream_);
    const std::vector<float> sum = oracle.Run(inputs, {}, lengths);  // buckets restart at every tensor
    offset = 0;
    for (size_t k = 0; k < tensors.size(); ++k) {
      const Typed& t = tensors[k];
      const std::vector<uint8_t> expected = Encode(t.type, sum.data() + offset, t.count);
      EXPECT_EQ(buffers[k].ToHost<uint8_t>(expected.size()), expected) << "bits " << bits << ", tensor " << k;
      offset += t.count;
    }
  }
}

TEST_F(DeviceAggregation, ARankWithNoSamplesContributesZerosAndTheHeaderIsSummed) {
  const AggregatorOptions options = Options(1);
  Aggregator aggregator(MPI_COMM_WORLD, options);
  SerialSimulation oracle = Oracle(options);
  const size_t count = 12345;
  const int silent = WorldSize() - 1;
  DeviceBuffer gradient = DeviceBuffer::From(RandomGradient(count, 5, WorldRank()));
  GradientHeader header;
  header.numSamples = WorldRank() == silent ? 0 : 10;
  header.criterion = 1.5;
  header.evalErrors = {{2.0, 3}};
  aggregator.AggregateGradients({{gradient.get(), count, DataType::kFloat32}}, stream_, &header);
  std::vector<bool> contributes(static_cast<size_t>(WorldSize()), true);
  contributes[static_cast<size_t>(silent)] = false;
  const std::vector<float> expected = oracle.Run(AllInputs(count, 5), contributes);
  EXPECT_TRUE(SameBits(gradient.ToHost<float>(count), expected));
  EXPECT_EQ(header.numSamples, 10u * static_cast<uint64_t>(WorldSize() - 1));
  EXPECT_EQ(header.criterion, 1.5 * WorldSize());
  ASSERT_EQ(header.evalErrors.size(), 1u);
  EXPECT_EQ(header.evalErrors[0].numSamples, 3u * static_cast<uint64_t>(WorldSize()));
}

TEST_F(DeviceAggregation, WorksOnTheDefaultStreamAndAfterQueuedWork) {
  const AggregatorOptions options = Options(8);
  Aggregator aggregator(MPI_COMM_WORLD, options);
  SerialSimulation oracle = Oracle(options);
  const size_t count = 200000;
  DeviceBuffer gradient(count * sizeof(float));
  // Queued, not yet run, when the call starts: the call must order itself after it.
  const std::vector<float> input = RandomGradient(count, 3, WorldRank());
  std::vector<float> pinnedCopy(input);
  ASSERT_EQ(cudaMemcpyAsync(gradient.get(), pinnedCopy.data(), count * sizeof(float), cudaMemcpyHostToDevice, nullptr),
            cudaSuccess);
  aggregator.AggregateGradients({{gradient.get(), count, DataType::kFloat32}}, nullptr);
  EXPECT_TRUE(SameBits(gradient.ToHost<float>(count), oracle.Run(AllInputs(count, 3))));
}

TEST_F(DeviceAggregation, BadTensorsThrowOnEveryRankNamingTheReporter) {
  Aggregator aggregator(MPI_COMM_WORLD, Options(1));
  DeviceBuffer gradient(1000 * sizeof(float));
  std::vector<float> host(1000);
  const bool culprit = WorldRank() == WorldSize() - 1;
  const std::string reporter = "rank " + std::to_string(WorldSize() - 1);
  auto expectUsageError = [&](const std::vector<DeviceGradient>& tensors, const std::string& words) {
    try {
      aggregator.AggregateGradients(tensors, stream_);
      ADD_FAILURE() << "no error for: " << words;
    } catch (const UsageError& error) {
      const std::string text = error.what();
      EXPECT_NE(text.find(words), std::string::npos) << text;
      EXPECT_NE(text.find(reporter), std::string::npos) << text;
    }
  };
  DeviceGradient good{gradient.get(), 1000, DataType::kFloat32};
  expectUsageError({culprit ? DeviceGradient{host.data(), 1000, DataType::kFloat32} : good}, "is not device memory");
  expectUsageError({culprit ? DeviceGradient{gradient.get(), 1001, DataType::kFloat32} : good},
                   "bytes past the end of its allocation");
  expectUsageError({culprit ? DeviceGradient{nullptr, 1000, DataType::kFloat32} : good}, "is null");
  expectUsageError({culprit ? DeviceGradient{gradient.as<char>() + 2, 10, DataType::kFloat32} : good}, "not aligned");
  // A size mismatch is caught too (it takes two ranks), and the Aggregator still works afterwards.
  if (WorldSize() > 1) {
    try {
      aggregator.AggregateGradients({{gradient.get(), culprit ? size_t{999} : size_t{1000}, DataType::kFloat32}},
                                    stream_);
      ADD_FAILURE() << "no error for mismatched sizes";
    } catch (const UsageError& error) {
      EXPECT_NE(std::string(error.what()).find("number of gradient elements"), std::string::npos) << error.what();
    }
  }
  SerialSimulation oracle = Oracle(Options(1));
  ExpectMatchesOracle(aggregator, oracle, 1000, 1, "after errors");
}

TEST_F(DeviceAggregation, HostAndDeviceCallsOnDifferentRanksAreRefused) {
  if (WorldSize() < 2) GTEST_SKIP() << "needs two ranks";
  Aggregator aggregator(MPI_COMM_WORLD, Options(1));
  DeviceBuffer gradient(64 * sizeof(float));
  std::vector<float> host(64);
  try {
    if (WorldRank() == 0) {
      aggregator.AggregateGradients(host.data(), host.size());
    } else {
      aggregator.AggregateGradients({{gradient.get(), 64, DataType::kFloat32}}, stream_);
    }
    ADD_FAILURE() << "no error";
  } catch (const UsageError& error) {
    EXPECT_NE(std::string(error.what()).find("where the gradients live"), std::string::npos) << error.what();
  }
}

TEST_F(DeviceAggregation, InitializeDeviceNamesTheTransport) {
  Aggregator aggregator(MPI_COMM_WORLD, Options(1));
  const std::string description = aggregator.InitializeDevice();
  int device = -1;
  ASSERT_EQ(cudaGetDevice(&device), cudaSuccess);  // the rank's own, or rank mod GPUs where ranks share them
  EXPECT_NE(description.find("GPU " + std::to_string(device)), std::string::npos) << description;
  if (aggregator.nodeCount() > 1) {
    EXPECT_NE(description.find("inter-node transport"), std::string::npos) << description;
  } else {
    EXPECT_NE(description.find("one node"), std::string::npos) << description;
  }
  if (WorldRank() == 0) std::printf("# %s\n", description.c_str());
}

}  // namespace
}  // namespace gradagg
