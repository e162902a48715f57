// Phase 2 taking its stripe's values as a sum of terms (the node's reduce-scatter left to its quantizer), and
// decoding the aggregate into copies (the node's all-gather left to it), gives the bytes and residuals of the same
// phase on the stored sum. Every rank is a node here (cross = MPI_COMM_WORLD), on the
// host backend, whose EncodeTerms sums the terms the way the GPU's encode kernel does.
#include <gtest/gtest.h>
#include <mpi.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "aggregator/cross_node_phase.h"
#include "aggregator/host_cross_node_backend.h"
#include "mpi_test_support.h"

namespace gradagg {
namespace {

using test::IdenticalOnAllRanks;
using test::RandomGradient;
using test::SameBits;
using test::WorldRank;
using test::WorldSize;

AggregatorOptions PhaseOptions(int bits) {
  AggregatorOptions options;
  options.bits = bits;
  options.bucketSize = 100;
  options.pieceBytes = 512;  // many pieces per owner
  return options;
}

TEST(CrossNodePhaseTerms, ASumOfTermsGivesTheBytesAndResidualsOfTheStoredSum) {
  if (WorldSize() == 1) GTEST_SKIP() << "needs several nodes";
  const BucketLayout layout({1000, 3, 2500}, 100);
  const size_t count = layout.elements();
  for (int bits : {1, 2, 8}) {
    const AggregatorOptions options = PhaseOptions(bits);
    CrossNodePhase stored(MPI_COMM_WORLD, options, MakeHostCrossNodeBackend(options));
    CrossNodePhase summed(MPI_COMM_WORLD, options, MakeHostCrossNodeBackend(options));
    ASSERT_TRUE(summed.TakesValueTerms());
    for (uint32_t call = 0; call < 3; ++call) {  // residuals carried from call to call
      std::vector<std::vector<float>> terms;
      for (uint32_t t = 0; t < 3; ++t) terms.push_back(RandomGradient(count, 10 * call + t, WorldRank()));
      std::vector<float> sum = terms[0];
      for (size_t t = 1; t < terms.size(); ++t) {
        for (size_t i = 0; i < count; ++i) sum[i] += terms[t][i];
      }
      ValueTerms values;
      values.count = static_cast<int>(terms.size());
      for (size_t t = 0; t < terms.size(); ++t) values.at[t] = terms[t].data();
      std::vector<float> out(count, -7.0f);  // not read: the terms are the values
      // Odd calls decode into copies instead of the stripe (left as it was): the terms themselves, as on GPUs, where
      // every decode overwrites the places the quantizer read, so none may be read after the first decode.
      ValueCopies copies;
      copies.count = values.count;
      for (size_t t = 0; t < terms.size(); ++t) copies.at[t] = terms[t].data();
      stored.Aggregate(sum.data(), layout, nullptr);
      summed.Aggregate(out.data(), layout, nullptr, &values, call % 2 == 1 ? &copies : nullptr);
      const std::string what = std::to_string(bits) + " bits, call " + std::to_string(call);
      if (call % 2 == 1) {
        for (const std::vector<float>& copy : terms) EXPECT_TRUE(SameBits(copy, sum)) << what;
        EXPECT_TRUE(SameBits(out, std::vector<float>(count, -7.0f))) << what;
      } else {
        EXPECT_TRUE(SameBits(out, sum)) << what;
      }
      EXPECT_TRUE(IdenticalOnAllRanks(sum)) << what;
    }
    std::vector<float> storedStripe, storedOwn, summedStripe, summedOwn;
    stored.ExportResiduals(&storedStripe, &storedOwn);
    summed.ExportResiduals(&summedStripe, &summedOwn);
    EXPECT_TRUE(SameBits(storedStripe, summedStripe)) << bits << " bits: r1";
    EXPECT_TRUE(SameBits(storedOwn, summedOwn)) << bits << " bits: r2";
  }
}

TEST(CrossNodePhaseTerms, APhaseThatReadsItsStripeExactlyRefusesTermsAndCopiesNeedTerms) {
  if (WorldSize() == 1) GTEST_SKIP() << "needs several nodes";
  for (const bool raw : {false, true}) {
    AggregatorOptions options = PhaseOptions(raw ? 32 : 1);
    options.quantizeOwnStripe = raw;  // 32 bits, or our own part entering exactly
    CrossNodePhase phase(MPI_COMM_WORLD, options, MakeHostCrossNodeBackend(options));
    EXPECT_FALSE(phase.TakesValueTerms());
    std::vector<float> stripe(300, 1.0f);
    ValueTerms values;
    values.count = 1;
    values.at[0] = stripe.data();
    EXPECT_THROW(phase.Aggregate(stripe.data(), BucketLayout({300}, 100), nullptr, &values), std::logic_error);
  }
  const AggregatorOptions options = PhaseOptions(1);
  CrossNodePhase phase(MPI_COMM_WORLD, options, MakeHostCrossNodeBackend(options));
  std::vector<float> stripe(300, 1.0f);
  ValueCopies copies;
  copies.count = 1;
  copies.at[0] = stripe.data();
  EXPECT_THROW(phase.Aggregate(stripe.data(), BucketLayout({300}, 100), nullptr, nullptr, &copies), std::logic_error);
}

}  // namespace
}  // namespace gradagg
