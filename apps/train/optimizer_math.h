// The optimizers' arithmetic on one parameter, written once for the CPU model's loop and the CUDA model's kernel.
//
// A step has two halves around the aggregation (optimizer.h says why the momentum travels inside it):
//   1. Carry, before: what this rank hands to AggregateGradients in place of its gradient sum g,
//        x = gradientScale * g + carry * m,
//      where carry = beta * (this rank's samples) when the momentum travels inside the aggregation, else 0 (and
//      gradientScale = 1: the scale is then applied after).
//   2. Update, after, on the aggregate's element sum (the sum over ranks of x), identical on every rank:
//        a = sum / (all ranks' samples);
//        m' = a                                       (momentum inside: a already holds beta * m)
//           = beta * m + gradientScale * a            (momentum after the aggregation)
//        m' += gradientScale * coupledDecay * w       (L2 weight decay as part of the gradient, never compressed)
//        the step's gradient ghat = (m' - beta * m) / gradientScale;
//        direction d = m'                             (SGD, heavy ball)
//                    = gradientScale * ghat + beta * m'   (Nesterov)
//                    = (m' / c1) / (sqrt(v' / c2) + epsilon), v' = beta2 * v + (1 - beta2) * ghat^2   (Adam)
//        w -= learningRate * (d + decoupledDecay * w)  (AdamW's decay is decoupled)
// In exact arithmetic both placements give the same m', so float32 runs agree to rounding whichever is chosen.
#pragma once

#include <cmath>

#if defined(__CUDACC__)
#define GRADAGG_TRAIN_HD __host__ __device__
#else
#define GRADAGG_TRAIN_HD
#endif

namespace gradagg::train {

enum class Direction { kMomentum, kNesterov, kAdam };

// Everything the element update needs, computed on the host once per step (optimizer.h: Optimizer::Coefficients).
struct StepCoefficients {
  Direction direction = Direction::kMomentum;
  bool momentumInside = true;   // m travels inside the aggregation
  float beta = 0.0f;            // momentum; Adam's beta1
  float gradientScale = 1.0f;   // 1, or 1 - beta for unit-gain momentum and Adam
  float carry = 0.0f;           // before: beta * local samples when the momentum travels inside, else 0
  float inverseSamples = 0.0f;  // after: 1 / all ranks' samples
  float learningRate = 0.0f;
  float coupledDecay = 0.0f;    // L2 weight decay added to the gradient
  float decoupledDecay = 0.0f;  // AdamW's decay, applied to the weights directly
  float beta2 = 0.0f;
  float epsilon = 0.0f;
  float biasCorrection1 = 1.0f;  // 1 - beta1^t
  float biasCorrection2 = 1.0f;  // 1 - beta2^t
};

// 1. What this rank aggregates in place of its gradient element g.
GRADAGG_TRAIN_HD inline float CarriedGradient(const StepCoefficients& c, float gradient, float momentum) {
  return c.momentumInside ? c.gradientScale * gradient + c.carry * momentum : gradient;
}

// 2. The update from the aggregated element sum: weight w, momentum m, second moment v (Adam only).
GRADAGG_TRAIN_HD inline void UpdateParameter(const StepCoefficients& c, float sum, float& w, float& m, float& v) {
  const float average = sum * c.inverseSamples;
  const float previous = m;
  float next = c.momentumInside ? average : c.beta * previous + c.gradientScale * average;
  next += c.gradientScale * c.coupledDecay * w;
  float direction = next;
  if (c.direction != Direction::kMomentum) {
    const float scaledGradient = next - c.beta * previous;  // gradientScale * ghat
    if (c.direction == Direction::kNesterov) {
      direction = scaledGradient + c.beta * next;
    } else {
      const float gradient = scaledGradient / c.gradientScale;
      v = c.beta2 * v + (1.0f - c.beta2) * gradient * gradient;
      direction = (next / c.biasCorrection1) / (std::sqrt(v / c.biasCorrection2) + c.epsilon);
    }
  }
  m = next;
  w -= c.learningRate * (direction + c.decoupledDecay * w);
}

}  // namespace gradagg::train
