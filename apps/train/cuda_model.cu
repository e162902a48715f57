// The MLP on a GPU: cuBLAS for the matrix products, small kernels for the rest. Same flat parameter layout and
// the same mathematics as mlp.cc (weights [inputs x outputs] row-major, which cuBLAS reads as column-major
// [outputs x inputs]); activations and deltas are [samples x features] row-major = column-major [features x
// samples]. Per-sample losses and error flags come back to the host and are summed there, in order.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "model.h"

namespace gradagg::train {
namespace {

void Check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) throw std::runtime_error(std::string(what) + " failed: " + cudaGetErrorString(status));
}

void Check(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS) {
    throw std::runtime_error(std::string(what) + " failed: cuBLAS status " + std::to_string(static_cast<int>(status)));
  }
}

void CheckLaunch(const char* kernel) { Check(cudaGetLastError(), kernel); }

template <typename T>
class DeviceArray {
 public:
  DeviceArray() = default;
  ~DeviceArray() { cudaFree(data_); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;

  void Resize(size_t count) {
    if (count <= capacity_) return;
    cudaFree(data_);
    data_ = nullptr;
    Check(cudaMalloc(&data_, count * sizeof(T)), "cudaMalloc");
    Check(cudaMemset(data_, 0, count * sizeof(T)), "cudaMemset");
    capacity_ = count;
  }
  T* get() const { return data_; }
  void swap(DeviceArray& other) noexcept {
    std::swap(data_, other.data_);
    std::swap(capacity_, other.capacity_);
  }

 private:
  T* data_ = nullptr;
  size_t capacity_ = 0;
};

constexpr int kThreads = 256;
unsigned Blocks(size_t n) { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }

__global__ void AddBiasKernel(float* y, const float* bias, size_t count, size_t outputs, bool relu) {
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= count * outputs) return;
  const float value = y[i] + bias[i % outputs];
  y[i] = relu ? fmaxf(value, 0.0f) : value;
}

// Per sample: softmax, -log p(label), a misclassification flag, and delta = p - onehot(label).
__global__ void SoftmaxCrossEntropyKernel(const float* logits, const uint8_t* labels, size_t count, size_t classes,
                                          float* delta, double* loss, uint8_t* wrong) {
  const size_t s = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (s >= count) return;
  const float* z = logits + s * classes;
  size_t best = 0;
  for (size_t c = 1; c < classes; ++c) best = z[c] > z[best] ? c : best;
  double total = 0.0;
  for (size_t c = 0; c < classes; ++c) total += exp(static_cast<double>(z[c] - z[best]));
  for (size_t c = 0; c < classes; ++c) {
    delta[s * classes + c] = static_cast<float>(exp(static_cast<double>(z[c] - z[best])) / total);
  }
  loss[s] = -log(static_cast<double>(delta[s * classes + labels[s]]) + 1e-30);
  wrong[s] = best != labels[s] ? 1 : 0;
  delta[s * classes + labels[s]] -= 1.0f;
}

__global__ void ErrorsKernel(const float* logits, const uint8_t* labels, size_t count, size_t classes, uint8_t* wrong) {
  const size_t s = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (s >= count) return;
  const float* z = logits + s * classes;
  size_t best = 0;
  for (size_t c = 1; c < classes; ++c) best = z[c] > z[best] ? c : best;
  wrong[s] = best != labels[s] ? 1 : 0;
}

// biasGradient[j] = sum over samples of delta[s][j], in sample order.
__global__ void BiasGradientKernel(const float* delta, size_t count, size_t outputs, float* biasGradient) {
  const size_t j = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j >= outputs) return;
  float sum = 0.0f;
  for (size_t s = 0; s < count; ++s) sum += delta[s * outputs + j];
  biasGradient[j] = sum;
}

// delta *= (activation > 0): the ReLU's derivative.
__global__ void ReluMaskKernel(float* delta, const float* activation, size_t n) {
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n && !(activation[i] > 0.0f)) delta[i] = 0.0f;
}

__global__ void CarryKernel(StepCoefficients c, float* gradient, const float* momentum, size_t n) {
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) gradient[i] = CarriedGradient(c, gradient[i], momentum[i]);
}

__global__ void StepKernel(StepCoefficients c, const float* sum, float* parameters, float* momentum,
                           float* secondMoment, size_t n) {
  const size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) UpdateParameter(c, sum[i], parameters[i], momentum[i], secondMoment[i]);
}

class CudaModel : public Model {
 public:
  explicit CudaModel(int device) {
    int count = 0;
    Check(cudaGetDeviceCount(&count), "cudaGetDeviceCount");
    if (count == 0) throw std::runtime_error("no CUDA device");
    Check(cudaSetDevice(device % count), "cudaSetDevice");
    Check(cublasCreate(&handle_), "cublasCreate");
    const size_t n = layout_.parameters().size();
    parameters_.Resize(n);
    momentum_.Resize(n);
    secondMoment_.Resize(n);
    gradient_.Resize(n);
    // cuBLAS and the kernels run on the legacy default stream, so that is the gradient's stream too.
    for (const Tensor& t : layout_.tensors())
      tensors_.device.push_back({gradient_.get() + t.offset, t.size, DataType::kFloat32});
    tensors_.stream = nullptr;
  }
  ~CudaModel() override { cublasDestroy(handle_); }
  CudaModel(const CudaModel&) = delete;
  CudaModel& operator=(const CudaModel&) = delete;

  const std::vector<Tensor>& tensors() const override { return layout_.tensors(); }
  size_t parameterCount() const override { return layout_.parameters().size(); }

  void SetParameters(const std::vector<float>& values) override {
    Check(cudaMemcpy(parameters_.get(), values.data(), values.size() * sizeof(float), cudaMemcpyHostToDevice),
          "cudaMemcpy parameters");
  }

  BatchResult ComputeGradient(const float* images, const uint8_t* labels, size_t count) override {
    Forward(images, labels, count);
    // Loss, errors and delta = p - onehot(label) at the logits.
    delta_.Resize(count * Mlp::kClasses);
    SoftmaxCrossEntropyKernel<<<Blocks(count), kThreads>>>(activations_[2].get(), labels_.get(), count, Mlp::kClasses,
                                                           delta_.get(), loss_.get(), wrong_.get());
    CheckLaunch("SoftmaxCrossEntropyKernel");
    // Layers backwards.
    for (size_t l = kLayers; l-- > 0;) {
      const Shape shape = ShapeOf(l);
      const float* in = l == 0 ? input_.get() : activations_[l - 1].get();
      const float one = 1.0f;
      const float zero = 0.0f;
      // dW [out x in], column-major = delta [out x count] * in^T [count x in].
      Check(cublasSgemm(handle_, CUBLAS_OP_N, CUBLAS_OP_T, shape.outputs, shape.inputs, Int(count), &one, delta_.get(),
                        shape.outputs, in, shape.inputs, &zero, gradient_.get() + shape.weights.offset, shape.outputs),
            "cublasSgemm (weight gradient)");
      BiasGradientKernel<<<Blocks(shape.biases.size), kThreads>>>(delta_.get(), count, shape.biases.size,
                                                                  gradient_.get() + shape.biases.offset);
      CheckLaunch("BiasGradientKernel");
      if (l == 0) break;
      // delta below [in x count] = W^T [in x out] * delta [out x count], through the ReLU.
      nextDelta_.Resize(count * static_cast<size_t>(shape.inputs));
      Check(cublasSgemm(handle_, CUBLAS_OP_T, CUBLAS_OP_N, shape.inputs, Int(count), shape.outputs, &one,
                        parameters_.get() + shape.weights.offset, shape.outputs, delta_.get(), shape.outputs, &zero,
                        nextDelta_.get(), shape.inputs),
            "cublasSgemm (delta)");
      ReluMaskKernel<<<Blocks(count * shape.inputs), kThreads>>>(nextDelta_.get(), activations_[l - 1].get(),
                                                                 count * static_cast<size_t>(shape.inputs));
      CheckLaunch("ReluMaskKernel");
      delta_.swap(nextDelta_);
    }
    return Totals(count, true);
  }

  const GradientTensors& gradient() const override { return tensors_; }

  void CarryMomentum(const StepCoefficients& c) override {
    if (!c.momentumInside) return;
    const size_t n = parameterCount();
    CarryKernel<<<Blocks(n), kThreads>>>(c, gradient_.get(), momentum_.get(), n);
    CheckLaunch("CarryKernel");
  }

  void Step(const StepCoefficients& c) override {
    const size_t n = parameterCount();
    StepKernel<<<Blocks(n), kThreads>>>(c, gradient_.get(), parameters_.get(), momentum_.get(), secondMoment_.get(), n);
    CheckLaunch("StepKernel");
  }

  std::vector<float> OptimizerState() const override {
    std::vector<float> state(2 * parameterCount());
    Check(cudaMemcpy(state.data(), momentum_.get(), parameterCount() * sizeof(float), cudaMemcpyDeviceToHost),
          "cudaMemcpy momentum");
    Check(cudaMemcpy(state.data() + parameterCount(), secondMoment_.get(), parameterCount() * sizeof(float),
                     cudaMemcpyDeviceToHost),
          "cudaMemcpy second moment");
    return state;
  }

  std::vector<float> Parameters() const override {
    std::vector<float> values(parameterCount());
    Check(cudaMemcpy(values.data(), parameters_.get(), values.size() * sizeof(float), cudaMemcpyDeviceToHost),
          "cudaMemcpy parameters");
    return values;
  }

  uint64_t CountErrors(const float* images, const uint8_t* labels, size_t count) override {
    Forward(images, labels, count);
    ErrorsKernel<<<Blocks(count), kThreads>>>(activations_[2].get(), labels_.get(), count, Mlp::kClasses, wrong_.get());
    CheckLaunch("ErrorsKernel");
    return Totals(count, false).errors;
  }

 private:
  static constexpr size_t kLayers = 3;
  struct Shape {
    int inputs;
    int outputs;
    Tensor weights;
    Tensor biases;
  };

  static int Int(size_t n) { return static_cast<int>(n); }

  Shape ShapeOf(size_t layer) const {
    const Tensor weights = layout_.tensors()[2 * layer];
    const Tensor biases = layout_.tensors()[2 * layer + 1];
    return {Int(weights.size / biases.size), Int(biases.size), weights, biases};
  }

  void Forward(const float* images, const uint8_t* labels, size_t count) {
    input_.Resize(count * Mlp::kInputs);
    labels_.Resize(count);
    loss_.Resize(count);
    wrong_.Resize(count);
    Check(cudaMemcpy(input_.get(), images, count * Mlp::kInputs * sizeof(float), cudaMemcpyHostToDevice),
          "cudaMemcpy images");
    Check(cudaMemcpy(labels_.get(), labels, count, cudaMemcpyHostToDevice), "cudaMemcpy labels");
    const float* in = input_.get();
    for (size_t l = 0; l < kLayers; ++l) {
      const Shape shape = ShapeOf(l);
      activations_[l].Resize(count * static_cast<size_t>(shape.outputs));
      const float one = 1.0f;
      const float zero = 0.0f;
      // out [out x count], column-major = W [out x in] * in [in x count].
      Check(cublasSgemm(handle_, CUBLAS_OP_N, CUBLAS_OP_N, shape.outputs, Int(count), shape.inputs, &one,
                        parameters_.get() + shape.weights.offset, shape.outputs, in, shape.inputs, &zero,
                        activations_[l].get(), shape.outputs),
            "cublasSgemm (forward)");
      AddBiasKernel<<<Blocks(count * shape.outputs), kThreads>>>(
          activations_[l].get(), parameters_.get() + shape.biases.offset, count, shape.biases.size, l + 1 < kLayers);
      CheckLaunch("AddBiasKernel");
      in = activations_[l].get();
    }
  }

  // Copies per-sample losses (with `withLoss`) and error flags back and sums them in order.
  BatchResult Totals(size_t count, bool withLoss) {
    std::vector<uint8_t> wrong(count);
    Check(cudaMemcpy(wrong.data(), wrong_.get(), count, cudaMemcpyDeviceToHost), "cudaMemcpy errors");
    BatchResult result;
    for (uint8_t w : wrong) result.errors += w;
    if (withLoss) {
      std::vector<double> loss(count);
      Check(cudaMemcpy(loss.data(), loss_.get(), count * sizeof(double), cudaMemcpyDeviceToHost), "cudaMemcpy loss");
      for (double l : loss) result.lossSum += l;
    }
    return result;
  }

  Mlp layout_;  // sizes and tensor offsets only
  cublasHandle_t handle_ = nullptr;
  DeviceArray<float> parameters_, momentum_, secondMoment_, gradient_, input_, delta_, nextDelta_;
  DeviceArray<float> activations_[kLayers];
  DeviceArray<uint8_t> labels_, wrong_;
  DeviceArray<double> loss_;
  GradientTensors tensors_;  // gradient_'s tensors, for AggregateGradients
};

}  // namespace

std::unique_ptr<Model> MakeCudaModel(int device) { return std::make_unique<CudaModel>(device); }

}  // namespace gradagg::train
