// What the training loop needs from a model, whatever computes it: the CPU MLP (mlp.h) or the CUDA one
// (cuda_model.h). Gradients and parameters cross this interface in host memory, in the MLP's flat layout; a GPU
// model copies them (the gradient through host memory is also how it reaches AggregateGradients for now).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "mlp.h"

namespace gradagg::train {

class Model {
 public:
  virtual ~Model() = default;

  virtual const std::vector<Tensor>& tensors() const = 0;
  virtual size_t parameterCount() const = 0;
  virtual void SetParameters(const std::vector<float>& parameters) = 0;

  // Gradient of the summed loss over `count` samples, written (not added) to `gradient` (host, flat layout).
  virtual BatchResult ComputeGradient(const float* images, const uint8_t* labels, size_t count,
                                      std::vector<float>& gradient) = 0;

  // Momentum SGD on an aggregated gradient sum (see MomentumStep).
  virtual void Step(const std::vector<float>& gradientSum, double samples, float learningRate, float momentum) = 0;

  virtual uint64_t CountErrors(const float* images, const uint8_t* labels, size_t count) = 0;
};

std::unique_ptr<Model> MakeCpuModel();

// The model on the GPU `device`; throws std::runtime_error where CUDA or the device is not there.
std::unique_ptr<Model> MakeCudaModel(int device);

}  // namespace gradagg::train
