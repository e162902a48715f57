// The Model interface over the plain-C++ MLP.
#include <algorithm>

#include "model.h"

namespace gradagg::train {
namespace {

class CpuModel : public Model {
 public:
  CpuModel() : gradient_(mlp_.parameters().size()), velocity_(mlp_.parameters().size()) {
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

  void Step(double samples, float learningRate, float momentum) override {
    MomentumStep(mlp_.parameters(), velocity_, gradient_, samples, learningRate, momentum);
  }

  uint64_t CountErrors(const float* images, const uint8_t* labels, size_t count) override {
    return mlp_.CountErrors(images, labels, count);
  }

 private:
  Mlp mlp_;
  std::vector<float> gradient_;  // never reallocated: tensors_ points into it
  std::vector<float> velocity_;
  GradientTensors tensors_;
};

}  // namespace

std::unique_ptr<Model> MakeCpuModel() { return std::make_unique<CpuModel>(); }

}  // namespace gradagg::train
