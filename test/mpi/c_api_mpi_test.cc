// The C API (gradagg_c.h) against the C++ API on the same inputs: the same bits, call after call (the carried
// quantization error included), the same header sums, and errors as statuses with the C++ API's messages.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "gradagg/aggregator.h"
#include "gradagg/gradagg_c.h"
#include "mpi_test_support.h"

namespace gradagg {
namespace {

using test::RandomGradient;
using test::TestRanksPerNode;
using test::WorldRank;

// Owns a C aggregator.
struct CAggregator {
  explicit CAggregator(const gradagg_options& options) {
    EXPECT_EQ(gradagg_create(GRADAGG_COMM_WORLD, &options, &handle), GRADAGG_OK) << gradagg_last_error();
  }
  ~CAggregator() { EXPECT_EQ(gradagg_destroy(handle), GRADAGG_OK); }
  gradagg_aggregator* handle = nullptr;
};

gradagg_options COptions(int bits) {
  gradagg_options options;
  EXPECT_EQ(gradagg_options_init(&options), GRADAGG_OK);
  options.bits = bits;
  options.ranks_per_node = TestRanksPerNode();
  return options;
}

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(CApi, MatchesTheCppApiBitwiseCallAfterCall) {
  const int rank = WorldRank();
  const std::vector<size_t> lengths = {3, 5000, 1, 700};
  for (int bits : {1, 4, 32}) {
    AggregatorOptions options;
    options.bits = bits;
    options.ranksPerNode = TestRanksPerNode();
    Aggregator cpp(MPI_COMM_WORLD, options);
    CAggregator c(COptions(bits));
    for (uint32_t step = 0; step < 3; ++step) {
      std::vector<std::vector<float>> viaCpp, viaC;
      std::vector<GradientBuffer> buffers;
      std::vector<gradagg_tensor> tensors;
      for (size_t t = 0; t < lengths.size(); ++t) {
        viaCpp.push_back(RandomGradient(lengths[t], 100 * step + static_cast<uint32_t>(t), rank));
        viaC.push_back(viaCpp.back());
      }
      for (size_t t = 0; t < lengths.size(); ++t) {
        buffers.push_back({viaCpp[t].data(), viaCpp[t].size()});
        tensors.push_back({viaC[t].data(), viaC[t].size(), GRADAGG_FLOAT32});
      }
      GradientHeader header;
      header.numSamples = static_cast<uint64_t>(rank + 1);
      header.criterion = 0.5 * rank;
      header.evalErrors = {{1.0 * rank, 2}};
      double errorSum = 1.0 * rank;
      uint64_t errorSamples = 2;
      gradagg_header cHeader{static_cast<uint64_t>(rank + 1), 0, 0.5 * rank, 1, &errorSum, &errorSamples};
      cpp.AggregateGradients(buffers, &header);
      ASSERT_EQ(gradagg_aggregate(c.handle, tensors.data(), tensors.size(), &cHeader), GRADAGG_OK)
          << gradagg_last_error();
      for (size_t t = 0; t < lengths.size(); ++t) {
        ASSERT_TRUE(SameBits(viaCpp[t], viaC[t])) << "bits " << bits << " step " << step << " tensor " << t;
      }
      EXPECT_EQ(cHeader.num_samples, header.numSamples);
      EXPECT_EQ(cHeader.criterion, header.criterion);
      EXPECT_EQ(errorSum, header.evalErrors[0].errorSum);
      EXPECT_EQ(errorSamples, header.evalErrors[0].numSamples);
    }
    gradagg_stats stats{};
    ASSERT_EQ(gradagg_last_stats(c.handle, &stats), GRADAGG_OK);
    EXPECT_EQ(stats.inter_node_bytes_sent, cpp.LastStats().interNodeBytesSent);
    EXPECT_EQ(stats.non_finite_buckets, 0u);
  }
}

TEST(CApi, AsyncCallsMatchTheBlockingOnes) {
  const int rank = WorldRank();
  CAggregator blocking(COptions(1));
  CAggregator background(COptions(1));
  for (uint32_t step = 0; step < 2; ++step) {
    std::vector<float> a = RandomGradient(3000, 7 + step, rank);
    std::vector<float> b = a;
    gradagg_tensor tensorA{a.data(), a.size(), GRADAGG_FLOAT32};
    gradagg_tensor tensorB{b.data(), b.size(), GRADAGG_FLOAT32};
    gradagg_header header{1, 0, 0.0, 0, nullptr, nullptr};
    gradagg_pending* pending = nullptr;
    ASSERT_EQ(gradagg_aggregate_async(background.handle, &tensorB, 1, &header, &pending), GRADAGG_OK)
        << gradagg_last_error();
    ASSERT_EQ(gradagg_wait(pending), GRADAGG_OK) << gradagg_last_error();
    ASSERT_EQ(gradagg_aggregate(blocking.handle, &tensorA, 1, nullptr), GRADAGG_OK);
    EXPECT_TRUE(SameBits(a, b)) << "step " << step;
    int size = 0;
    ASSERT_EQ(gradagg_topology(background.handle, nullptr, &size, nullptr, nullptr), GRADAGG_OK);
    EXPECT_EQ(header.num_samples, static_cast<uint64_t>(size));
  }
}

// Consecutive runs of ranks_per_node ranks are the nodes (the tests' placement): the placement says which run and
// where in it, and every rank of a node names the same node.
TEST(CApi, PlacementNamesTheNodeAndTheIndexInIt) {
  CAggregator aggregator(COptions(1));
  int rank = 0;
  int perNode = 0;
  ASSERT_EQ(gradagg_topology(aggregator.handle, &rank, nullptr, nullptr, &perNode), GRADAGG_OK);
  int node = -1;
  int local = -1;
  ASSERT_EQ(gradagg_placement(aggregator.handle, &node, &local), GRADAGG_OK) << gradagg_last_error();
  EXPECT_EQ(node, rank / perNode);
  EXPECT_EQ(local, rank % perNode);
  EXPECT_EQ(gradagg_placement(aggregator.handle, nullptr, nullptr), GRADAGG_OK);
  EXPECT_EQ(gradagg_placement(nullptr, &node, &local), GRADAGG_ERROR_USAGE);
}

TEST(CApi, ErrorsAreStatusesWithMessagesOnEveryRank) {
  gradagg_options options = COptions(3);  // not a bit width
  gradagg_aggregator* aggregator = nullptr;
  EXPECT_EQ(gradagg_create(GRADAGG_COMM_WORLD, &options, &aggregator), GRADAGG_ERROR_USAGE);
  EXPECT_EQ(aggregator, nullptr);
  EXPECT_NE(std::string(gradagg_last_error()).find("bits"), std::string::npos) << gradagg_last_error();

  options = COptions(1);
  options.error_feedback = 2;
  EXPECT_EQ(gradagg_create(GRADAGG_COMM_WORLD, &options, &aggregator), GRADAGG_ERROR_USAGE);
  EXPECT_NE(std::string(gradagg_last_error()).find("error_feedback"), std::string::npos) << gradagg_last_error();

  // Sizes that differ between ranks: the C++ API's agreement reports it on every rank.
  CAggregator c(COptions(1));
  std::vector<float> values(static_cast<size_t>(10 + WorldRank()), 1.0f);
  gradagg_tensor tensor{values.data(), values.size(), GRADAGG_FLOAT32};
  if (test::WorldSize() > 1) {
    EXPECT_EQ(gradagg_aggregate(c.handle, &tensor, 1, nullptr), GRADAGG_ERROR_USAGE);
    EXPECT_STRNE(gradagg_last_error(), "");
  }
  // A host tensor must be float32.
  tensor.type = GRADAGG_BFLOAT16;
  EXPECT_EQ(gradagg_aggregate(c.handle, &tensor, 1, nullptr), GRADAGG_ERROR_USAGE);
  EXPECT_NE(std::string(gradagg_last_error()).find("float32"), std::string::npos) << gradagg_last_error();
  EXPECT_EQ(gradagg_aggregate(nullptr, &tensor, 1, nullptr), GRADAGG_ERROR_USAGE);
  EXPECT_EQ(gradagg_wait(nullptr), GRADAGG_ERROR_USAGE);
  // A success clears the message.
  tensor.type = GRADAGG_FLOAT32;
  values.assign(10, 1.0f);
  tensor.count = 10;
  EXPECT_EQ(gradagg_aggregate(c.handle, &tensor, 1, nullptr), GRADAGG_OK) << gradagg_last_error();
  EXPECT_STREQ(gradagg_last_error(), "");
}

}  // namespace
}  // namespace gradagg
