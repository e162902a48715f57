// The trainer's outer step (--local-steps, apps/train/outer_step.h) against torch.optim.SGD(nesterov=True)'s
// arithmetic written out here. CTest train_local_steps runs this same code in the trainer and its reference, so it
// cannot see a mistake in it; this test can.
#include "outer_step.h"

#include <gtest/gtest.h>

#include <cstring>
#include <stdexcept>
#include <vector>

namespace gradagg::train {
namespace {

LocalStepSettings Settings(int localSteps, float lr = 0.7f, float momentum = 0.9f) {
  LocalStepSettings settings;
  settings.localSteps = localSteps;
  settings.outerLearningRate = lr;
  settings.outerMomentum = momentum;
  return settings;
}

TEST(OuterStep, AfterEveryHthStepAndTheLast) {
  std::vector<size_t> outer;
  for (size_t step = 0; step < 10; ++step) {
    if (IsOuterStep(Settings(3), step, 10)) outer.push_back(step);
  }
  EXPECT_EQ(outer, (std::vector<size_t>{2, 5, 8, 9}));
  for (size_t step = 0; step < 10; ++step) EXPECT_FALSE(IsOuterStep(Settings(0), step, 10));
}

TEST(OuterStep, ValidateNamesTheFlag) {
  EXPECT_THROW(Validate(Settings(-1)), std::invalid_argument);
  EXPECT_THROW(Validate(Settings(4, 0.0f)), std::invalid_argument);
  EXPECT_THROW(Validate(Settings(4, 0.7f, 1.0f)), std::invalid_argument);
  EXPECT_THROW(Validate(Settings(4, 0.7f, -0.1f)), std::invalid_argument);
  EXPECT_NO_THROW(Validate(Settings(4, 0.7f, 0.0f)));
}

TEST(OuterStep, OnlyTheNodesFirstRankSendsTheOuterGradient) {
  OuterStep step(Settings(2), {1.0f, 2.0f}, {{0, 2}});
  step.ComputeOuterGradient({0.75f, 2.5f}, true);
  EXPECT_EQ(step.outerGradient(), (std::vector<float>{0.25f, -0.5f}));
  ASSERT_EQ(step.outerGradientTensors().size(), 1u);
  EXPECT_EQ(step.outerGradientTensors()[0].data, step.outerGradient().data());
  step.ComputeOuterGradient({0.75f, 2.5f}, false);
  EXPECT_EQ(step.outerGradient(), (std::vector<float>{0.0f, 0.0f}));
}

// Two outer steps of 3 nodes: g = S * (1/3), v = mu v + g (v = g first), anchor -= lr (g + mu v), in float32 with
// one rounding per operation (this file is compiled with -ffp-contract=off).
TEST(OuterStep, NesterovAsTorchSgd) {
  const float lr = 0.7f;
  const float mu = 0.9f;
  const std::vector<float> initial = {1.0f, -0.25f, 3.0f};
  OuterStep step(Settings(4, lr, mu), initial, {{0, 1}, {1, 2}});
  const std::vector<std::vector<float>> sums = {{0.3f, -0.6f, 1.7f}, {0.1f, 0.2f, -2.9f}};
  std::vector<float> anchor = initial;
  std::vector<float> velocity(3, 0.0f);
  for (size_t s = 0; s < sums.size(); ++s) {
    step.outerGradient() = sums[s];
    const std::vector<float> result = step.Apply(3);
    const float inverse = 1.0f / 3.0f;
    for (size_t i = 0; i < anchor.size(); ++i) {
      const float g = sums[s][i] * inverse;
      velocity[i] = s == 0 ? g : mu * velocity[i] + g;
      const float update = g + mu * velocity[i];
      anchor[i] = anchor[i] - lr * update;
    }
    ASSERT_EQ(std::memcmp(result.data(), anchor.data(), anchor.size() * sizeof(float)), 0) << "outer step " << s;
    EXPECT_EQ(step.anchor(), result);
  }
  // The same numbers by hand for element 0: g 0.1, update 0.19, anchor 0.867; g 1/30, v 0.12333, update 0.14433.
  EXPECT_NEAR(anchor[0], 1.0 - 0.7 * 0.19 - 0.7 * (1.0 / 30 + 0.9 * (0.9 * 0.1 + 1.0 / 30)), 1e-6);
}

}  // namespace
}  // namespace gradagg::train
