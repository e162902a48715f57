// Local steps (--local-steps H), DiLoCo's outer step: the ranks of a node train together on exact float32 sums for H
// steps, then the nodes meet once, through the quantized cross-node exchange, on how far each has moved.
//
// The outer step, in float32 on the host, on every rank:
//   1. anchor: the parameters as of the last outer step (at first the initial weights);
//   2. outer gradient delta = anchor - parameters; the node's local rank 0 hands it to the exchange and every other
//      local rank zeros, so that the node's sum in phase 1 is exactly delta;
//   3. the caller sums the outer gradients over all ranks (AggregateGradients over every node at the run's --bits,
//      or the serial simulation) into S; g = S * (1 / M) for M nodes;
//   4. Nesterov momentum as torch.optim.SGD(nesterov=True, dampening=0) writes it, one rounding per operation:
//      v = mu * v + g (v = g at the first); anchor = anchor - lr * (g + mu * v);
//   5. parameters = anchor (the inner optimizer's state is kept as it is).
// The trainer and its serial reference (test/train/local_steps_reference.cc) both run this class, so the arithmetic
// exists once.
#pragma once

#include <gradagg/gradient_buffer.h>

#include <cstddef>
#include <vector>

#include "mlp.h"

namespace gradagg::train {

struct LocalStepSettings {
  int localSteps = 0;              // H; 0: every step sums over all ranks (no outer step)
  float outerLearningRate = 0.7f;  // DiLoCo's
  float outerMomentum = 0.9f;      // DiLoCo's
  bool enabled() const { return localSteps > 0; }
};

// Throws std::invalid_argument naming the flag of the first bad field.
void Validate(const LocalStepSettings& settings);

// Whether an outer step follows step `step` (0-based, counted over the whole run of `totalSteps`): after every H-th
// step, and after the run's last.
bool IsOuterStep(const LocalStepSettings& settings, size_t step, size_t totalSteps);

class OuterStep {
 public:
  // `initialParameters` are the run's first weights (the same on every rank), `tensors` their layout.
  OuterStep(const LocalStepSettings& settings, std::vector<float> initialParameters,
            const std::vector<Tensor>& tensors);
  OuterStep(const OuterStep&) = delete;
  OuterStep& operator=(const OuterStep&) = delete;

  // 2. Writes this rank's outer gradient: anchor - parameters where `firstOfNode`, else zeros.
  void ComputeOuterGradient(const std::vector<float>& parameters, bool firstOfNode);

  // The outer gradient in the parameters' flat layout and as their tensors, for AggregateGradients, which replaces
  // it in place by S, the sum over every rank.
  std::vector<float>& outerGradient() { return outerGradient_; }
  const std::vector<GradientBuffer>& outerGradientTensors() const { return outerGradientTensors_; }

  // 3-5, with outerGradient() holding S over `nodes` nodes: moves the anchor and returns it, the new parameters.
  const std::vector<float>& Apply(int nodes);

  const std::vector<float>& anchor() const { return anchor_; }

 private:
  LocalStepSettings settings_;
  std::vector<float> anchor_;
  std::vector<float> velocity_;
  bool firstStep_ = true;
  std::vector<float> outerGradient_;  // never reallocated: outerGradientTensors_ points into it
  std::vector<GradientBuffer> outerGradientTensors_;
};

}  // namespace gradagg::train
