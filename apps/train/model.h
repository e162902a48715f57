// What the training loop needs from a model, whatever computes it: the CPU MLP (mlp.h) or the CUDA one
// (cuda_model.cu). Parameters cross this interface in host memory, in the MLP's flat layout. The gradient stays
// where the model computes it (host memory, or GPU memory on the model's stream) and goes to AggregateGradients
// from there, which writes the sum over all ranks back in place.
#pragma once

#include <gradagg/device_gradient.h>
#include <gradagg/gradient_buffer.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "mlp.h"
#include "optimizer_math.h"

namespace gradagg::train {

// A model's gradient as AggregateGradients takes it: one entry per parameter tensor, in host memory (CPU model) or
// in device memory ordered on `stream` (GPU model).
struct GradientTensors {
  std::vector<GradientBuffer> host;
  std::vector<DeviceGradient> device;
  CudaStream stream = nullptr;
  bool onDevice() const { return !device.empty(); }
};

class Model {
 public:
  virtual ~Model() = default;

  virtual const std::vector<Tensor>& tensors() const = 0;
  virtual size_t parameterCount() const = 0;
  virtual void SetParameters(const std::vector<float>& parameters) = 0;

  // Gradient of the summed loss over `count` samples, written (not added) to gradient().
  virtual BatchResult ComputeGradient(const float* images, const uint8_t* labels, size_t count) = 0;

  // Where the gradient lives; the tensors stay the same for the model's life.
  virtual const GradientTensors& gradient() const = 0;

  // Before the aggregation: gradient() = CarriedGradient(c, gradient, momentum), element by element
  // (optimizer_math.h); nothing changes where the momentum is applied after the aggregation.
  virtual void CarryMomentum(const StepCoefficients& c) = 0;

  // After it: UpdateParameter(c, aggregate, ...) on every parameter, gradient() holding the aggregated sum.
  virtual void Step(const StepCoefficients& c) = 0;

  // The optimizer's state (momentum, then second moment) in the parameters' layout, for tests.
  virtual std::vector<float> OptimizerState() const = 0;
  virtual std::vector<float> Parameters() const = 0;

  virtual uint64_t CountErrors(const float* images, const uint8_t* labels, size_t count) = 0;
};

std::unique_ptr<Model> MakeCpuModel();

// The model on the GPU `device`; throws std::runtime_error where CUDA or the device is not there.
std::unique_ptr<Model> MakeCudaModel(int device);

}  // namespace gradagg::train
