// Aggregator::ExportResiduals and ImportResiduals (a checkpointed run resumed): a run stopped after k calls and
// resumed in a fresh Aggregator from the exported residuals is bitwise the uninterrupted run, on every layout; and
// residuals that cannot be this rank's, or a call of other sizes after an import, are refused.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gradagg/aggregator.h"
#include "oracle_support.h"

namespace gradagg {
namespace {

using test::IdenticalOnAllRanks;
using test::LayoutOptions;
using test::RandomGradient;
using test::SameBits;
using test::WorldRank;

const std::vector<size_t> kSizes = {3000, 17, 1201};  // three tensors, quantization buckets of their own

// One call of kSizes' tensors, the step's gradients on this rank; returns the result, tensors end to end.
std::vector<float> Step(Aggregator& aggregator, uint32_t step) {
  std::vector<std::vector<float>> tensors;
  std::vector<GradientBuffer> buffers;
  for (size_t i = 0; i < kSizes.size(); ++i) {
    tensors.push_back(RandomGradient(kSizes[i], 100 * step + static_cast<uint32_t>(i), WorldRank()));
  }
  for (std::vector<float>& tensor : tensors) buffers.push_back({tensor.data(), tensor.size()});
  aggregator.AggregateGradients(buffers);
  std::vector<float> result;
  for (const std::vector<float>& tensor : tensors) result.insert(result.end(), tensor.begin(), tensor.end());
  return result;
}

// Step with `shift` added to every element of this rank's gradients.
std::vector<float> ShiftedStep(Aggregator& aggregator, uint32_t step, float shift) {
  std::vector<std::vector<float>> tensors;
  std::vector<GradientBuffer> buffers;
  for (size_t i = 0; i < kSizes.size(); ++i) {
    tensors.push_back(RandomGradient(kSizes[i], 100 * step + static_cast<uint32_t>(i), WorldRank()));
    for (float& value : tensors.back()) value += shift;
  }
  for (std::vector<float>& tensor : tensors) buffers.push_back({tensor.data(), tensor.size()});
  aggregator.AggregateGradients(buffers);
  std::vector<float> result;
  for (const std::vector<float>& tensor : tensors) result.insert(result.end(), tensor.begin(), tensor.end());
  return result;
}

// Calls steps [first, last) and returns the last one's result.
std::vector<float> Steps(Aggregator& aggregator, uint32_t first, uint32_t last) {
  std::vector<float> result;
  for (uint32_t step = first; step < last; ++step) result = Step(aggregator, step);
  return result;
}

TEST(Residuals, AResumedRunIsBitwiseTheUninterruptedOne) {
  for (int bits : {1, 4}) {
    const AggregatorOptions options = LayoutOptions(bits);
    Aggregator uninterrupted(MPI_COMM_WORLD, options);
    const std::vector<float> expected = Steps(uninterrupted, 0, 6);

    Residuals saved;
    {
      Aggregator first(MPI_COMM_WORLD, options);
      Steps(first, 0, 3);
      saved = first.ExportResiduals();
    }
    EXPECT_EQ(saved.tensorSizes, kSizes);
    Aggregator resumed(MPI_COMM_WORLD, options);
    resumed.ImportResiduals(saved);
    const std::vector<float> result = Steps(resumed, 3, 6);
    EXPECT_TRUE(SameBits(result, expected)) << bits << " bits: the resumed run differs from the uninterrupted one";
    EXPECT_TRUE(IdenticalOnAllRanks(result));
    // What the import carries matters: a fresh start at step 3 differs wherever there is a quantized exchange.
    if (uninterrupted.nodeCount() > 1) {
      Aggregator fresh(MPI_COMM_WORLD, options);
      EXPECT_FALSE(SameBits(Steps(fresh, 3, 6), expected)) << bits << " bits: the check cannot fail";
      EXPECT_FALSE(saved.stripe.empty());
      EXPECT_FALSE(saved.own.empty());
    } else {
      EXPECT_TRUE(saved.stripe.empty() && saved.own.empty()) << "one node carries no quantization error";
    }
  }
}

// An imported r1 counts everywhere, also over the sub-stripe this node owns, whose residual phase 2 otherwise never
// writes (it is folded into the exact sum and stays zero, so the phase skips folding it until an import). With one
// rank per node the stripe is the rank's gradient: r1 = c everywhere is the same call on gradients shifted by c.
TEST(Residuals, AnImportedResidualCountsOverTheOwnSubStripeToo) {
  for (int bits : {1, 2}) {
    AggregatorOptions options = LayoutOptions(bits);
    options.quantizeOwnStripe = false;  // the own part enters exactly, its r1 folded in
    Aggregator first(MPI_COMM_WORLD, options);
    if (first.nodeCount() == 1 || first.ranksPerNode() != 1) GTEST_SKIP() << "needs several nodes of one rank";
    constexpr float kShift = 0.25f;
    Steps(first, 0, 1);
    Residuals shifted = first.ExportResiduals();
    shifted.stripe.assign(shifted.stripe.size(), kShift);
    shifted.own.assign(shifted.own.size(), 0.0f);
    Aggregator resumed(MPI_COMM_WORLD, options);
    resumed.ImportResiduals(shifted);
    Steps(resumed, 0, 1);  // and again after a call: every import counts, not only the first
    resumed.ImportResiduals(shifted);
    const std::vector<float> result = Step(resumed, 1);
    Aggregator reference(MPI_COMM_WORLD, options);
    EXPECT_TRUE(SameBits(result, ShiftedStep(reference, 1, kShift))) << bits << " bits";
    EXPECT_TRUE(IdenticalOnAllRanks(result));
  }
}

TEST(Residuals, ExportBeforeAnyCallIsEmpty) {
  Aggregator aggregator(MPI_COMM_WORLD, LayoutOptions(1));
  const Residuals residuals = aggregator.ExportResiduals();
  EXPECT_TRUE(residuals.tensorSizes.empty() && residuals.stripe.empty() && residuals.own.empty());
}

TEST(Residuals, ResidualsThatCannotBeThisRanksAreRefused) {
  Aggregator aggregator(MPI_COMM_WORLD, LayoutOptions(1));
  Steps(aggregator, 0, 2);
  Residuals wrong = aggregator.ExportResiduals();
  wrong.stripe.push_back(0.0f);
  try {
    aggregator.ImportResiduals(wrong);
    ADD_FAILURE() << "residuals one element too long were taken";
  } catch (const UsageError& error) {
    EXPECT_NE(std::string(error.what()).find("rank " + std::to_string(WorldRank())), std::string::npos) << error.what();
  }
  // Refused, nothing changed: the run goes on as if the import had not been tried.
  Aggregator reference(MPI_COMM_WORLD, LayoutOptions(1));
  Steps(reference, 0, 2);
  EXPECT_TRUE(SameBits(Step(aggregator, 2), Step(reference, 2)));
}

TEST(Residuals, ACallOfOtherSizesAfterAnImportFailsOnEveryRank) {
  const AggregatorOptions options = LayoutOptions(1);
  Aggregator aggregator(MPI_COMM_WORLD, options);
  Steps(aggregator, 0, 2);
  const Residuals saved = aggregator.ExportResiduals();
  Aggregator resumed(MPI_COMM_WORLD, options);
  resumed.ImportResiduals(saved);
  std::vector<float> other = RandomGradient(500, 9, WorldRank());
  try {
    resumed.AggregateGradients(other.data(), other.size());
    ADD_FAILURE() << "a call of other sizes ran after the import";
  } catch (const UsageError& error) {
    EXPECT_NE(std::string(error.what()).find("residuals imported"), std::string::npos) << error.what();
  }
  // The import still waits for a call of its sizes, which then goes on from it.
  EXPECT_TRUE(SameBits(Step(resumed, 2), Step(aggregator, 2)));
}

}  // namespace
}  // namespace gradagg
