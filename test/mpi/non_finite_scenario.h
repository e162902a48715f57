// The non-finite scenario, for host and device calls alike: a NaN, +Inf or -Inf at step 1 of 4, on the last rank or
// on every rank, in tensor 2 of [3, 1000, 2997] (its bucket [1003, 1515) with buckets of 512). Checked on every step:
// the result against the serial simulation and identical on every rank, the count of non-finite buckets the same on
// every rank and the simulation's; at step 1 the bucket alone non-finite (across nodes, quantized) or the element
// alone (one node, or bits 32); later steps finite and bitwise the simulation's; and, poisoned on every rank, the
// bucket at step 2 bitwise as if step 1 had never been (all its residuals kept their values).
#pragma once

#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "gradagg/aggregator.h"
#include "oracle_support.h"

namespace gradagg::test {

struct NonFiniteScenario {
  static constexpr size_t kCount = 4000;
  static constexpr size_t kBad = 1500;
  static constexpr size_t kBucketBegin = 1003;
  static constexpr size_t kBucketEnd = 1515;
  static std::vector<size_t> Tensors() { return {3, 1000, 2997}; }

  // One call of the given inputs (this rank's is inputs[rank]) on one Aggregator: the result and its
  // LastStats().nonFiniteBuckets.
  struct Outcome {
    std::vector<float> result;
    size_t nonFiniteBuckets = 0;
  };
  using Call = std::function<Outcome(const std::vector<std::vector<float>>& inputs)>;
  // Makes a fresh Aggregator of `options` (on every rank) and returns its Call.
  using MakeCall = std::function<Call(const AggregatorOptions& options)>;

  // True on every rank when every rank holds the same value.
  static bool SameOnAllRanks(size_t value) {
    unsigned long long mine = value;
    unsigned long long lowest = 0;
    unsigned long long highest = 0;
    MPI_Allreduce(&mine, &lowest, 1, MPI_UNSIGNED_LONG_LONG, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(&mine, &highest, 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
    return lowest == highest;
  }

  static std::vector<std::vector<float>> Inputs(uint32_t step, bool poisoned, float bad, bool everyRank) {
    std::vector<std::vector<float>> inputs = AllInputs(kCount, 90 + step);
    for (size_t r = everyRank ? 0 : inputs.size() - 1; poisoned && r < inputs.size(); ++r) inputs[r][kBad] = bad;
    return inputs;
  }

  // `quantized`: the layout has several nodes and bits < 32.
  static void Expect(const AggregatorOptions& options, bool quantized, const MakeCall& makeCall) {
    const float bads[] = {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity()};
    for (const bool everyRank : {false, true}) {
      for (const float bad : bads) {
        const std::string what = "bits " + std::to_string(options.bits) + " bad " + std::to_string(bad) +
                                 (everyRank ? " on every rank" : " on the last rank");
        const Call call = makeCall(options);
        const Call clean = makeCall(options);  // the same steps without step 1
        SerialSimulation oracle = Oracle(options);
        for (uint32_t step = 0; step < 4; ++step) {
          const bool poisoned = step == 1;
          const std::vector<std::vector<float>> inputs = Inputs(step, poisoned, bad, everyRank);
          const Outcome outcome = call(inputs);
          const std::vector<float>& result = outcome.result;
          const std::vector<float> expected = oracle.Run(inputs, {}, Tensors());
          EXPECT_TRUE(IdenticalOnAllRanks(result)) << what << " step " << step;
          EXPECT_TRUE(SameOnAllRanks(outcome.nonFiniteBuckets)) << what << " step " << step;
          EXPECT_EQ(outcome.nonFiniteBuckets, oracle.lastNonFiniteBuckets()) << what << " step " << step;
          if (!poisoned) {
            EXPECT_TRUE(SameBits(result, expected)) << what << " step " << step << ": differs from the simulation";
            EXPECT_EQ(outcome.nonFiniteBuckets, 0u) << what << " step " << step;
            for (size_t i = 0; i < kCount; ++i) ASSERT_TRUE(std::isfinite(result[i])) << what << " step " << step;
          } else {
            EXPECT_EQ(outcome.nonFiniteBuckets, quantized ? 1u : 0u) << what;
            for (size_t i = 0; i < kCount; ++i) {
              const bool inBucket = quantized ? i >= kBucketBegin && i < kBucketEnd : i == kBad;
              ASSERT_EQ(std::isfinite(result[i]), !inBucket) << what << " element " << i;
              ASSERT_EQ(std::isfinite(expected[i]), !inBucket) << what << " simulation, element " << i;
            }
            continue;
          }
          const std::vector<float> cleanResult = clean(inputs).result;
          if (step == 2 && quantized && everyRank) {
            // Poisoned on one rank only, the other nodes' finite inputs of the bucket were quantized as usual and
            // their residuals moved on; poisoned everywhere, every residual of the bucket kept its value.
            for (size_t i = kBucketBegin; i < kBucketEnd; ++i)
              ASSERT_EQ(std::memcmp(&result[i], &cleanResult[i], sizeof(float)), 0) << what << " element " << i;
          }
        }
      }
    }
  }
};

}  // namespace gradagg::test
