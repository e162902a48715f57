// A multilayer perceptron 784-256-128-10 (ReLU, softmax cross-entropy) on the CPU, in plain C++.
//
// Parameters live in one flat array, tensor after tensor, so their gradients can go to AggregateGradients as a
// list of buffers. Weights are stored [inputs x outputs]: forward and weight-gradient passes are axpy loops over
// contiguous rows, and zero inputs (ReLU, blank pixels) are skipped.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace gradagg::train {

struct Tensor {  // a slice of the flat parameter (or gradient) array
  size_t offset;
  size_t size;
};

struct BatchResult {
  double lossSum = 0.0;  // sum over the batch of -log p(label)
  uint64_t errors = 0;   // misclassified samples
};

class Mlp {
 public:
  static constexpr size_t kInputs = 784;
  static constexpr size_t kClasses = 10;

  Mlp();  // sizes only; parameters are zero until Initialize or a broadcast fills them

  // He-normal weights, zero biases, from `seed`.
  void Initialize(uint64_t seed);

  std::vector<float>& parameters() { return parameters_; }
  const std::vector<float>& parameters() const { return parameters_; }
  const std::vector<Tensor>& tensors() const { return tensors_; }

  // Forward and backward over `count` samples (inputs row-major, kInputs floats each): adds the gradient of the
  // summed loss to `gradient` (same layout as the parameters) and returns loss sum and errors.
  BatchResult Backpropagate(const float* inputs, const uint8_t* labels, size_t count, std::vector<float>& gradient);

  // Forward only: misclassified samples among `count`.
  uint64_t CountErrors(const float* inputs, const uint8_t* labels, size_t count);

 private:
  struct Layer {
    size_t inputs;
    size_t outputs;
    Tensor weights;  // [inputs x outputs]
    Tensor biases;   // [outputs]
  };
  // Fills activations_ for `count` samples; returns the logits' layer output.
  void Forward(const float* inputs, size_t count);

  std::vector<Layer> layers_;
  std::vector<Tensor> tensors_;
  std::vector<float> parameters_;
  std::vector<std::vector<float>> activations_;  // per layer output, [count x outputs]
  std::vector<float> delta_;
  std::vector<float> nextDelta_;
};

}  // namespace gradagg::train
