#include "optimizer.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace gradagg::train {
namespace {

constexpr double kPi = 3.14159265358979323846;

bool UsesMomentum(OptimizerKind kind) { return kind != OptimizerKind::kSgd; }
bool IsAdam(OptimizerKind kind) { return kind == OptimizerKind::kAdam || kind == OptimizerKind::kAdamW; }

}  // namespace

float LearningRateAt(const ScheduleSettings& schedule, float baseRate, size_t step) {
  if (step < schedule.warmupSteps) {
    return baseRate * static_cast<float>(step + 1) / static_cast<float>(schedule.warmupSteps);
  }
  const size_t sinceWarmup = step - schedule.warmupSteps;
  switch (schedule.kind) {
    case ScheduleKind::kConstant:
      return baseRate;
    case ScheduleKind::kStep:
      return baseRate *
             static_cast<float>(std::pow(schedule.stepFactor, static_cast<double>(sinceWarmup / schedule.stepEvery)));
    case ScheduleKind::kCosine: {
      const size_t span = schedule.totalSteps - schedule.warmupSteps;
      const double progress = std::min(1.0, static_cast<double>(sinceWarmup) / static_cast<double>(span));
      return static_cast<float>(baseRate * 0.5 * (1.0 + std::cos(kPi * progress)));
    }
  }
  return baseRate;
}

namespace {

// Each kind's name, once: parsing and printing read the same table.
template <typename Kind>
struct Named {
  Kind kind;
  const char* name;
};
constexpr Named<OptimizerKind> kOptimizerNames[] = {{OptimizerKind::kSgd, "sgd"},
                                                    {OptimizerKind::kMomentum, "momentum"},
                                                    {OptimizerKind::kNesterov, "nesterov"},
                                                    {OptimizerKind::kAdam, "adam"},
                                                    {OptimizerKind::kAdamW, "adamw"}};
constexpr Named<ScheduleKind> kScheduleNames[] = {
    {ScheduleKind::kConstant, "constant"}, {ScheduleKind::kStep, "step"}, {ScheduleKind::kCosine, "cosine"}};

template <typename Kind, size_t N>
Kind Parse(const Named<Kind> (&names)[N], const std::string& name, const char* flag) {
  std::string choices;
  for (const Named<Kind>& entry : names) {
    if (name == entry.name) return entry.kind;
    choices += std::string(choices.empty() ? "" : ", ") + entry.name;
  }
  throw std::invalid_argument(std::string(flag) + " must be one of " + choices + ", not '" + name + "'");
}

template <typename Kind, size_t N>
std::string NameOf(const Named<Kind> (&names)[N], Kind kind) {
  for (const Named<Kind>& entry : names) {
    if (entry.kind == kind) return entry.name;
  }
  return "?";
}

}  // namespace

OptimizerKind ParseOptimizerKind(const std::string& name) { return Parse(kOptimizerNames, name, "--optimizer"); }
ScheduleKind ParseScheduleKind(const std::string& name) { return Parse(kScheduleNames, name, "--schedule"); }
std::string ToString(OptimizerKind kind) { return NameOf(kOptimizerNames, kind); }
std::string ToString(ScheduleKind kind) { return NameOf(kScheduleNames, kind); }

void Validate(const OptimizerSettings& o, const ScheduleSettings& s) {
  if (!(o.learningRate > 0.0f) || !std::isfinite(o.learningRate)) {
    throw std::invalid_argument("--lr must be a positive number");
  }
  if (!(o.momentum >= 0.0f && o.momentum < 1.0f)) throw std::invalid_argument("--momentum must be in [0, 1)");
  if (!(o.beta2 >= 0.0f && o.beta2 < 1.0f)) throw std::invalid_argument("--beta2 must be in [0, 1)");
  if (!(o.epsilon > 0.0f)) throw std::invalid_argument("--epsilon must be positive");
  if (!(o.weightDecay >= 0.0f) || !std::isfinite(o.weightDecay)) {
    throw std::invalid_argument("--weight-decay must be 0 or positive");
  }
  if (IsAdam(o.kind) && o.momentum == 0.0f) throw std::invalid_argument("Adam needs --momentum (beta1) above 0");
  if (s.kind == ScheduleKind::kStep && s.stepEvery == 0) {
    throw std::invalid_argument("--schedule step needs --step-epochs above 0");
  }
  if (!(s.stepFactor > 0.0f && s.stepFactor <= 1.0f)) throw std::invalid_argument("--step-factor must be in (0, 1]");
  if (s.kind == ScheduleKind::kCosine && s.totalSteps <= s.warmupSteps) {
    throw std::invalid_argument("--schedule cosine needs more steps than the warm-up");
  }
}

Optimizer::Optimizer(const OptimizerSettings& settings, const ScheduleSettings& schedule)
    : settings_(settings), schedule_(schedule) {
  Validate(settings_, schedule_);
  if (!UsesMomentum(settings_.kind)) settings_.momentum = 0.0f;
}

StepCoefficients Optimizer::Common(size_t step) const {
  StepCoefficients c;
  c.direction = settings_.kind == OptimizerKind::kNesterov ? Direction::kNesterov
                : IsAdam(settings_.kind)                   ? Direction::kAdam
                                                           : Direction::kMomentum;
  c.momentumInside = settings_.momentumInside;
  c.beta = settings_.momentum;
  c.gradientScale = IsAdam(settings_.kind) || settings_.unitGain ? 1.0f - c.beta : 1.0f;
  c.learningRate = LearningRateAt(schedule_, settings_.learningRate, step);
  (settings_.kind == OptimizerKind::kAdamW ? c.decoupledDecay : c.coupledDecay) = settings_.weightDecay;
  c.beta2 = settings_.beta2;
  c.epsilon = settings_.epsilon;
  const double updates = static_cast<double>(step + 1);
  c.biasCorrection1 = IsAdam(settings_.kind) ? static_cast<float>(1.0 - std::pow(c.beta, updates)) : 1.0f;
  c.biasCorrection2 = IsAdam(settings_.kind) ? static_cast<float>(1.0 - std::pow(c.beta2, updates)) : 1.0f;
  return c;
}

StepCoefficients Optimizer::BeforeAggregation(size_t step, double localSamples) const {
  StepCoefficients c = Common(step);
  c.carry = static_cast<float>(static_cast<double>(c.beta) * localSamples);
  return c;
}

StepCoefficients Optimizer::AfterAggregation(size_t step, double totalSamples) const {
  StepCoefficients c = Common(step);
  c.inverseSamples = static_cast<float>(1.0 / totalSamples);
  return c;
}

float Optimizer::GradientScaleBeforeAggregation() const {
  const StepCoefficients c = Common(0);
  return c.momentumInside ? c.gradientScale : 1.0f;
}

}  // namespace gradagg::train
