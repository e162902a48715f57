// The trainer's optimizers and schedules: against textbook formulas written out here in float64 (PyTorch's
// definitions of SGD with momentum, Nesterov, Adam and AdamW), and the two placements of the momentum (inside the
// aggregation or after it) against each other on an exact aggregation of several ranks.
#include "optimizer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace gradagg::train {
namespace {

constexpr int kRanks = 3;
constexpr double kLocalSamples = 8.0;
constexpr size_t kParameters = 64;
constexpr size_t kSteps = 12;

struct Case {
  std::string name;
  OptimizerKind kind;
  bool unitGain;
  float weightDecay;
};

std::vector<Case> Cases() {
  return {{"sgd", OptimizerKind::kSgd, false, 0.0f},
          {"momentum", OptimizerKind::kMomentum, false, 0.0f},
          {"momentum_decay", OptimizerKind::kMomentum, false, 0.01f},
          {"unit_gain", OptimizerKind::kMomentum, true, 0.0f},
          {"nesterov", OptimizerKind::kNesterov, false, 0.01f},
          {"adam", OptimizerKind::kAdam, false, 0.01f},
          {"adamw", OptimizerKind::kAdamW, false, 0.01f}};
}

// Per step and rank, a gradient sum over kLocalSamples samples (fixed, so that runs can be compared).
std::vector<std::vector<std::vector<float>>> Gradients() {
  std::mt19937 generator(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<std::vector<std::vector<float>>> g(kSteps, std::vector<std::vector<float>>(kRanks));
  for (auto& step : g) {
    for (auto& rank : step) {
      rank.resize(kParameters);
      for (float& x : rank) x = static_cast<float>(kLocalSamples) * (0.3f + normal(generator));
    }
  }
  return g;
}

std::vector<float> InitialWeights() {
  std::vector<float> w(kParameters);
  for (size_t i = 0; i < kParameters; ++i) w[i] = 0.5f - 0.01f * static_cast<float>(i);
  return w;
}

// The trainer's loop on kRanks ranks with an exact (float64, then rounded) aggregation: every rank's carry, the sum,
// the update. Returns the weights after kSteps.
std::vector<float> Train(const OptimizerSettings& settings, const ScheduleSettings& schedule) {
  const Optimizer optimizer(settings, schedule);
  const auto gradients = Gradients();
  std::vector<float> w = InitialWeights();
  std::vector<float> m(kParameters, 0.0f);
  std::vector<float> v(kParameters, 0.0f);
  for (size_t step = 0; step < kSteps; ++step) {
    const StepCoefficients before = optimizer.BeforeAggregation(step, kLocalSamples);
    const StepCoefficients after = optimizer.AfterAggregation(step, kRanks * kLocalSamples);
    for (size_t i = 0; i < kParameters; ++i) {
      double sum = 0.0;
      for (int r = 0; r < kRanks; ++r) sum += CarriedGradient(before, gradients[step][r][i], m[i]);
      UpdateParameter(after, static_cast<float>(sum), w[i], m[i], v[i]);
    }
  }
  return w;
}

// PyTorch's definitions, in float64, on the ranks' mean gradient.
std::vector<double> Reference(const Case& c, double lr, const ScheduleSettings& schedule, double beta) {
  const auto gradients = Gradients();
  const std::vector<float> initial = InitialWeights();
  std::vector<double> w(initial.begin(), initial.end());
  std::vector<double> m(kParameters, 0.0);
  std::vector<double> v(kParameters, 0.0);
  const double beta2 = 0.999;
  const double epsilon = 1e-8;
  for (size_t step = 0; step < kSteps; ++step) {
    const double rate = LearningRateAt(schedule, static_cast<float>(lr), step);
    const double t = static_cast<double>(step + 1);
    for (size_t i = 0; i < kParameters; ++i) {
      double g = 0.0;
      for (int r = 0; r < kRanks; ++r) g += gradients[step][r][i];
      g /= kRanks * kLocalSamples;
      if (c.kind != OptimizerKind::kAdamW) g += c.weightDecay * w[i];
      switch (c.kind) {
        case OptimizerKind::kSgd:
          w[i] -= rate * g;
          break;
        case OptimizerKind::kMomentum:
          m[i] = beta * m[i] + (c.unitGain ? 1.0 - beta : 1.0) * g;
          w[i] -= rate * m[i];
          break;
        case OptimizerKind::kNesterov:
          m[i] = beta * m[i] + g;
          w[i] -= rate * (g + beta * m[i]);
          break;
        case OptimizerKind::kAdam:
        case OptimizerKind::kAdamW: {
          m[i] = beta * m[i] + (1.0 - beta) * g;
          v[i] = beta2 * v[i] + (1.0 - beta2) * g * g;
          const double update =
              (m[i] / (1.0 - std::pow(beta, t))) / (std::sqrt(v[i] / (1.0 - std::pow(beta2, t))) + epsilon);
          w[i] -= rate * (update + (c.kind == OptimizerKind::kAdamW ? c.weightDecay * w[i] : 0.0));
          break;
        }
      }
    }
  }
  return w;
}

double RelativeDistance(const std::vector<float>& a, const std::vector<double>& b) {
  double difference = 0.0;
  double norm = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    difference += (a[i] - b[i]) * (a[i] - b[i]);
    norm += b[i] * b[i];
  }
  return std::sqrt(difference / norm);
}

OptimizerSettings SettingsOf(const Case& c, bool inside) {
  OptimizerSettings s;
  s.kind = c.kind;
  s.unitGain = c.unitGain;
  s.weightDecay = c.weightDecay;
  s.momentumInside = inside;
  s.learningRate = c.kind == OptimizerKind::kAdam || c.kind == OptimizerKind::kAdamW ? 0.01f : 0.05f;
  return s;
}

TEST(Optimizer, EveryOptimizerFollowsItsTextbookDefinitionWithTheMomentumInsideOrAfter) {
  ScheduleSettings schedule;
  schedule.kind = ScheduleKind::kCosine;
  schedule.warmupSteps = 3;
  schedule.totalSteps = kSteps + 2;
  for (const Case& c : Cases()) {
    for (bool inside : {true, false}) {
      const OptimizerSettings settings = SettingsOf(c, inside);
      const std::vector<float> w = Train(settings, schedule);
      const std::vector<double> reference =
          Reference(c, settings.learningRate, schedule, c.kind == OptimizerKind::kSgd ? 0.0 : 0.9);
      // The initial weights are O(1) and move by O(lr * steps): float32 rounding of a dozen steps stays far below.
      EXPECT_LT(RelativeDistance(w, reference), 2e-6) << c.name << (inside ? " inside" : " after");
      // And the steps did move the weights (so the comparison means something).
      EXPECT_GT(RelativeDistance(InitialWeights(), reference), 1e-2) << c.name;
    }
  }
}

TEST(Optimizer, WithoutMomentumTheCarryIsTheGradient) {
  OptimizerSettings settings;
  settings.kind = OptimizerKind::kSgd;
  const Optimizer sgd(settings, ScheduleSettings{});
  const StepCoefficients c = sgd.BeforeAggregation(5, 64.0);
  EXPECT_EQ(CarriedGradient(c, 1.25f, 1000.0f), 1.25f);
  EXPECT_EQ(sgd.settings().momentum, 0.0f);
}

TEST(Optimizer, TheCarryAddsBetaTimesTheLocalSamplesTimesTheMomentum) {
  const Optimizer heavyBall(OptimizerSettings{}, ScheduleSettings{});  // momentum 0.9, inside
  EXPECT_FLOAT_EQ(CarriedGradient(heavyBall.BeforeAggregation(0, 64.0), 2.0f, 0.5f), 2.0f + 0.9f * 64.0f * 0.5f);
  OptimizerSettings after;
  after.momentumInside = false;
  EXPECT_EQ(CarriedGradient(Optimizer(after, ScheduleSettings{}).BeforeAggregation(0, 64.0), 2.0f, 0.5f), 2.0f);
  EXPECT_FLOAT_EQ(heavyBall.GradientScaleBeforeAggregation(), 1.0f);
  OptimizerSettings adam;
  adam.kind = OptimizerKind::kAdam;
  EXPECT_FLOAT_EQ(Optimizer(adam, ScheduleSettings{}).GradientScaleBeforeAggregation(), 0.1f);
}

TEST(Schedule, WarmupThenConstantStepAndCosine) {
  // A warm-up of 4 steps to 0.4, then: constant; x0.5 every 10 steps; cosine to 0 at step 104.
  struct Point {
    ScheduleKind kind;
    size_t step;
    float rate;
  };
  const Point points[] = {{ScheduleKind::kConstant, 0, 0.1f},   {ScheduleKind::kConstant, 3, 0.4f},
                          {ScheduleKind::kConstant, 100, 0.4f}, {ScheduleKind::kStep, 0, 0.1f},
                          {ScheduleKind::kStep, 13, 0.4f},      {ScheduleKind::kStep, 14, 0.2f},
                          {ScheduleKind::kStep, 34, 0.05f},     {ScheduleKind::kCosine, 4, 0.4f},
                          {ScheduleKind::kCosine, 54, 0.2f},    {ScheduleKind::kCosine, 104, 0.0f}};
  for (const Point& p : points) {
    ScheduleSettings s;
    s.kind = p.kind;
    s.warmupSteps = 4;
    s.stepEvery = 10;
    s.stepFactor = 0.5f;
    s.totalSteps = 104;
    EXPECT_NEAR(LearningRateAt(s, 0.4f, p.step), p.rate, 1e-6) << ToString(p.kind) << " step " << p.step;
  }
  ScheduleSettings cosine;
  cosine.kind = ScheduleKind::kCosine;
  cosine.totalSteps = 104;
  EXPECT_GT(LearningRateAt(cosine, 0.4f, 103), 0.0f);  // the last step still moves
  EXPECT_LT(LearningRateAt(cosine, 0.4f, 103), 1e-3f);
}

TEST(Optimizer, BadSettingsAreNamed) {
  auto message = [](OptimizerSettings o, ScheduleSettings s) {
    try {
      Optimizer optimizer(o, s);
    } catch (const std::invalid_argument& error) {
      return std::string(error.what());
    }
    return std::string("accepted");
  };
  OptimizerSettings o;
  o.learningRate = -1.0f;
  EXPECT_NE(message(o, {}).find("--lr"), std::string::npos);
  o = {};
  o.momentum = 1.0f;
  EXPECT_NE(message(o, {}).find("--momentum"), std::string::npos);
  o = {};
  o.kind = OptimizerKind::kAdam;
  o.momentum = 0.0f;
  EXPECT_NE(message(o, {}).find("beta1"), std::string::npos);
  ScheduleSettings s;
  s.kind = ScheduleKind::kStep;
  EXPECT_NE(message({}, s).find("--step-epochs"), std::string::npos);
  s = {};
  s.kind = ScheduleKind::kCosine;
  s.totalSteps = 5;
  s.warmupSteps = 5;
  EXPECT_NE(message({}, s).find("cosine"), std::string::npos);
  EXPECT_THROW(ParseOptimizerKind("lamb"), std::invalid_argument);
  EXPECT_THROW(ParseScheduleKind("linear"), std::invalid_argument);
  EXPECT_EQ(ParseOptimizerKind(ToString(OptimizerKind::kAdamW)), OptimizerKind::kAdamW);
  EXPECT_EQ(ParseScheduleKind(ToString(ScheduleKind::kCosine)), ScheduleKind::kCosine);
}

}  // namespace
}  // namespace gradagg::train
