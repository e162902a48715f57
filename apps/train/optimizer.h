// The trainer's optimizers and learning-rate schedules, and where their momentum is aggregated.
//
// Why the momentum travels inside the aggregation: with 1-bit error feedback the compressor returns a large
// coordinate only a fraction of its value per step (a bucket's side shares one magnitude) and repays the rest over
// later steps. Applied to the gradient, that delay sits in front of the momentum's own filter, and a network trained
// at float32's best learning rate (near its edge of stability) turns unstable: momentum 0.9 diverged. Applied to the
// momentum itself (each rank sends beta * m + its gradient, and every rank takes the decoded aggregate as its new,
// identical m, as 1-bit Adam and blockwise-momentum EF-SGD do) the quantization error enters the momentum
// recurrence once, damped by (1 - beta), and is never amplified by it. bench/NOTES.md has the measurements.
#pragma once

#include <cstddef>
#include <string>

#include "optimizer_math.h"

namespace gradagg::train {

enum class OptimizerKind { kSgd, kMomentum, kNesterov, kAdam, kAdamW };
enum class ScheduleKind { kConstant, kStep, kCosine };

struct OptimizerSettings {
  OptimizerKind kind = OptimizerKind::kMomentum;
  float learningRate = 0.1f;
  float momentum = 0.9f;  // heavy ball and Nesterov; Adam's beta1
  bool unitGain = false;  // m = beta m + (1 - beta) g (CNTK's form) instead of m = beta m + g
  float beta2 = 0.999f;
  float epsilon = 1e-8f;
  float weightDecay = 0.0f;    // L2 in the gradient; decoupled for AdamW
  bool momentumInside = true;  // aggregate beta * m + g (true) or g, with the momentum applied after (false)
};

struct ScheduleSettings {
  ScheduleKind kind = ScheduleKind::kConstant;
  size_t warmupSteps = 0;  // linear from learningRate / warmupSteps up to learningRate
  size_t stepEvery = 0;    // step schedule: multiply by stepFactor every this many steps (after the warm-up)
  float stepFactor = 0.1f;
  size_t totalSteps = 0;  // cosine: decays to 0 at this step
};

// The learning rate of step `step` (0-based): warm-up, then the schedule.
float LearningRateAt(const ScheduleSettings& schedule, float baseRate, size_t step);

// Names on the command line and in the CSV; Parse* throw std::invalid_argument naming the bad value.
OptimizerKind ParseOptimizerKind(const std::string& name);
ScheduleKind ParseScheduleKind(const std::string& name);
std::string ToString(OptimizerKind kind);
std::string ToString(ScheduleKind kind);

// Throws std::invalid_argument naming the first bad field.
void Validate(const OptimizerSettings& optimizer, const ScheduleSettings& schedule);

// Hands out each step's coefficients (optimizer_math.h).
class Optimizer {
 public:
  Optimizer(const OptimizerSettings& settings, const ScheduleSettings& schedule);

  const OptimizerSettings& settings() const { return settings_; }
  // The carry for this rank's `localSamples`, before the aggregation of step `step`.
  StepCoefficients BeforeAggregation(size_t step, double localSamples) const;
  // The update after it, `totalSamples` the aggregated sample count (> 0).
  StepCoefficients AfterAggregation(size_t step, double totalSamples) const;
  // What the carry multiplies the gradient by: the error of one aggregation, in gradient units, is the
  // aggregate's error divided by this.
  float GradientScaleBeforeAggregation() const;

 private:
  StepCoefficients Common(size_t step) const;

  OptimizerSettings settings_;
  ScheduleSettings schedule_;
};

}  // namespace gradagg::train
