#include "outer_step.h"

#include <cmath>
#include <stdexcept>
#include <utility>

namespace gradagg::train {

void Validate(const LocalStepSettings& settings) {
  if (settings.localSteps < 0) throw std::invalid_argument("--local-steps must be 0 (off) or more");
  if (!(settings.outerLearningRate > 0.0f) || !std::isfinite(settings.outerLearningRate)) {
    throw std::invalid_argument("--outer-lr must be a positive number");
  }
  if (!(settings.outerMomentum >= 0.0f && settings.outerMomentum < 1.0f)) {
    throw std::invalid_argument("--outer-momentum must be in [0, 1)");
  }
}

bool IsOuterStep(const LocalStepSettings& settings, size_t step, size_t totalSteps) {
  if (!settings.enabled()) return false;
  return (step + 1) % static_cast<size_t>(settings.localSteps) == 0 || step + 1 == totalSteps;
}

OuterStep::OuterStep(const LocalStepSettings& settings, std::vector<float> initialParameters,
                     const std::vector<Tensor>& tensors)
    : settings_(settings),
      anchor_(std::move(initialParameters)),
      velocity_(anchor_.size(), 0.0f),
      outerGradient_(anchor_.size(), 0.0f) {
  for (const Tensor& t : tensors) outerGradientTensors_.push_back({outerGradient_.data() + t.offset, t.size});
}

void OuterStep::ComputeOuterGradient(const std::vector<float>& parameters, bool firstOfNode) {
  if (parameters.size() != anchor_.size()) throw std::invalid_argument("OuterStep: parameters of another size");
  for (size_t i = 0; i < anchor_.size(); ++i) outerGradient_[i] = firstOfNode ? anchor_[i] - parameters[i] : 0.0f;
}

const std::vector<float>& OuterStep::Apply(int nodes) {
  // Each operation rounds once (this file is compiled with -ffp-contract=off): the trainer and its reference agree
  // bit for bit whatever the compiler's target.
  const float inverseNodes = 1.0f / static_cast<float>(nodes);
  const float mu = settings_.outerMomentum;
  const float lr = settings_.outerLearningRate;
  for (size_t i = 0; i < anchor_.size(); ++i) {
    const float g = outerGradient_[i] * inverseNodes;
    const float v = firstStep_ ? g : mu * velocity_[i] + g;  // torch starts its buffer as a copy of g
    const float update = g + mu * v;
    velocity_[i] = v;
    anchor_[i] = anchor_[i] - lr * update;
  }
  firstStep_ = false;
  return anchor_;
}

}  // namespace gradagg::train
