// The Model interface over the plain-C++ MLP.
#include <algorithm>

#include "model.h"

namespace gradagg::train {
namespace {

class CpuModel : public Model {
 public:
  CpuModel()
      : gradient_(mlp_.parameters().size()),
        momentum_(mlp_.parameters().size()),
        secondMoment_(mlp_.parameters().size()) {
    for (const Tensor& t : mlp_.tensors()) tensors_.host.push_back({gradient_.data() + t.offset, t.size});
  }
  CpuModel(const CpuModel&) = delete;
  CpuModel& operator=(const CpuModel&) = delete;

  const std::vector<Tensor>& tensors() const override { return mlp_.tensors(); }
  size_t parameterCount() const override { return mlp_.parameters().size(); }
  void SetParameters(const std::vector<float>& values) override { mlp_.parameters() = values; }

  BatchResult ComputeGradient(const float* images, const uint8_t* labels, size_t count) override {
    std::fill(gradient_.begin(), gradient_.end(), 0.0f);
    return mlp_.Backpropagate(images, labels, count, gradient_);
  }

  const GradientTensors& gradient() const override { return tensors_; }

  void CarryMomentum(const StepCoefficients& c) override {
    if (!c.momentumInside) return;
    for (size_t i = 0; i < gradient_.size(); ++i) gradient_[i] = CarriedGradient(c, gradient_[i], momentum_[i]);
  }

  void Step(const StepCoefficients& c) override {
    std::vector<float>& w = mlp_.parameters();
    for (size_t i = 0; i < w.size(); ++i) UpdateParameter(c, gradient_[i], w[i], momentum_[i], secondMoment_[i]);
  }

  std::vector<float> OptimizerState() const override {
    std::vector<float> state(momentum_);
    state.insert(state.end(), secondMoment_.begin(), secondMoment_.end());
    return state;
  }
  std::vector<float> Parameters() const override { return mlp_.parameters(); }

  uint64_t CountErrors(const float* images, const uint8_t* labels, size_t count) override {
    return mlp_.CountErrors(images, labels, count);
  }

 private:
  Mlp mlp_;
  std::vector<float> gradient_;  // never reallocated: tensors_ points into it
  std::vector<float> momentum_;
  std::vector<float> secondMoment_;  // Adam
  GradientTensors tensors_;
};

}  // namespace

std::unique_ptr<Model> MakeCpuModel() { return std::make_unique<CpuModel>(); }

}  // namespace gradagg::train
