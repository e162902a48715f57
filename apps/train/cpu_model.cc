// The Model interface over the plain-C++ MLP.
#include <algorithm>

#include "model.h"

namespace gradagg::train {
namespace {

class CpuModel : public Model {
 public:
  const std::vector<Tensor>& tensors() const override { return mlp_.tensors(); }
  size_t parameterCount() const override { return mlp_.parameters().size(); }
  void SetParameters(const std::vector<float>& values) override { mlp_.parameters() = values; }

  BatchResult ComputeGradient(const float* images, const uint8_t* labels, size_t count,
                              std::vector<float>& gradient) override {
    gradient.assign(parameterCount(), 0.0f);
    return mlp_.Backpropagate(images, labels, count, gradient);
  }

  void Step(const std::vector<float>& gradientSum, double samples, float learningRate, float momentum) override {
    velocity_.resize(parameterCount(), 0.0f);
    MomentumStep(mlp_.parameters(), velocity_, gradientSum, samples, learningRate, momentum);
  }

  uint64_t CountErrors(const float* images, const uint8_t* labels, size_t count) override {
    return mlp_.CountErrors(images, labels, count);
  }

 private:
  Mlp mlp_;
  std::vector<float> velocity_;
};

}  // namespace

std::unique_ptr<Model> MakeCpuModel() { return std::make_unique<CpuModel>(); }

}  // namespace gradagg::train
