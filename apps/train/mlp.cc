#include "mlp.h"

#include <algorithm>
#include <cmath>
#include <random>

namespace gradagg::train {
namespace {

constexpr size_t kHidden1 = 256;
constexpr size_t kHidden2 = 128;

// out[j] += scale * row[j]
void Axpy(float scale, const float* row, float* out, size_t n) {
  for (size_t j = 0; j < n; ++j) out[j] += scale * row[j];
}

// Dot product with 8 independent sums, so the compiler can vectorise it without reassociating one sum.
float Dot(const float* a, const float* b, size_t n) {
  float partial[8] = {};
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (size_t k = 0; k < 8; ++k) partial[k] += a[i + k] * b[i + k];
  }
  float sum = 0.0f;
  for (; i < n; ++i) sum += a[i] * b[i];
  for (float p : partial) sum += p;
  return sum;
}

}  // namespace

Mlp::Mlp() {
  const size_t sizes[] = {kInputs, kHidden1, kHidden2, kClasses};
  size_t offset = 0;
  for (size_t l = 0; l + 1 < std::size(sizes); ++l) {
    Layer layer{sizes[l], sizes[l + 1], {offset, sizes[l] * sizes[l + 1]}, {}};
    offset += layer.weights.size;
    layer.biases = {offset, sizes[l + 1]};
    offset += layer.biases.size;
    layers_.push_back(layer);
    tensors_.push_back(layer.weights);
    tensors_.push_back(layer.biases);
  }
  parameters_.assign(offset, 0.0f);
  activations_.resize(layers_.size());
}

void Mlp::Initialize(uint64_t seed) {
  std::mt19937_64 generator(seed);
  for (const Layer& layer : layers_) {
    std::normal_distribution<float> normal(0.0f, std::sqrt(2.0f / static_cast<float>(layer.inputs)));
    for (size_t i = 0; i < layer.weights.size; ++i) parameters_[layer.weights.offset + i] = normal(generator);
    std::fill_n(parameters_.begin() + static_cast<long>(layer.biases.offset), layer.biases.size, 0.0f);
  }
}

void Mlp::Forward(const float* inputs, size_t count) {
  const float* in = inputs;
  for (size_t l = 0; l < layers_.size(); ++l) {
    const Layer& layer = layers_[l];
    const float* weights = parameters_.data() + layer.weights.offset;
    const float* biases = parameters_.data() + layer.biases.offset;
    std::vector<float>& out = activations_[l];
    out.resize(count * layer.outputs);
    for (size_t s = 0; s < count; ++s) {
      float* y = out.data() + s * layer.outputs;
      std::copy(biases, biases + layer.outputs, y);
      const float* x = in + s * layer.inputs;
      for (size_t k = 0; k < layer.inputs; ++k) {
        if (x[k] != 0.0f) Axpy(x[k], weights + k * layer.outputs, y, layer.outputs);
      }
      if (l + 1 < layers_.size()) {
        for (size_t j = 0; j < layer.outputs; ++j) y[j] = std::max(y[j], 0.0f);  // ReLU
      }
    }
    in = out.data();
  }
}

BatchResult Mlp::Backpropagate(const float* inputs, const uint8_t* labels, size_t count, std::vector<float>& gradient) {
  Forward(inputs, count);
  BatchResult result;
  // Softmax cross-entropy: delta = p - onehot(label), per sample.
  const std::vector<float>& logits = activations_.back();
  delta_.assign(count * kClasses, 0.0f);
  for (size_t s = 0; s < count; ++s) {
    const float* z = logits.data() + s * kClasses;
    const float top = *std::max_element(z, z + kClasses);
    double total = 0.0;
    for (size_t c = 0; c < kClasses; ++c) total += std::exp(static_cast<double>(z[c] - top));
    for (size_t c = 0; c < kClasses; ++c) {
      delta_[s * kClasses + c] = static_cast<float>(std::exp(static_cast<double>(z[c] - top)) / total);
    }
    result.lossSum -= std::log(static_cast<double>(delta_[s * kClasses + labels[s]]) + 1e-30);
    result.errors += static_cast<uint64_t>(std::max_element(z, z + kClasses) - z) != labels[s] ? 1 : 0;
    delta_[s * kClasses + labels[s]] -= 1.0f;
  }
  // Layers backwards: weight and bias gradients, then the delta of the layer below through its ReLU.
  for (size_t l = layers_.size(); l-- > 0;) {
    const Layer& layer = layers_[l];
    const float* in = l == 0 ? inputs : activations_[l - 1].data();
    float* weightGradient = gradient.data() + layer.weights.offset;
    float* biasGradient = gradient.data() + layer.biases.offset;
    for (size_t s = 0; s < count; ++s) {
      const float* d = delta_.data() + s * layer.outputs;
      const float* x = in + s * layer.inputs;
      for (size_t k = 0; k < layer.inputs; ++k) {
        if (x[k] != 0.0f) Axpy(x[k], d, weightGradient + k * layer.outputs, layer.outputs);
      }
      for (size_t j = 0; j < layer.outputs; ++j) biasGradient[j] += d[j];
    }
    if (l == 0) break;
    const float* weights = parameters_.data() + layer.weights.offset;
    nextDelta_.assign(count * layer.inputs, 0.0f);
    for (size_t s = 0; s < count; ++s) {
      const float* d = delta_.data() + s * layer.outputs;
      const float* x = in + s * layer.inputs;
      for (size_t k = 0; k < layer.inputs; ++k) {
        if (x[k] > 0.0f) nextDelta_[s * layer.inputs + k] = Dot(weights + k * layer.outputs, d, layer.outputs);
      }
    }
    delta_.swap(nextDelta_);
  }
  return result;
}

uint64_t Mlp::CountErrors(const float* inputs, const uint8_t* labels, size_t count) {
  Forward(inputs, count);
  uint64_t errors = 0;
  for (size_t s = 0; s < count; ++s) {
    const float* z = activations_.back().data() + s * kClasses;
    errors += static_cast<uint64_t>(std::max_element(z, z + kClasses) - z) != labels[s] ? 1 : 0;
  }
  return errors;
}

}  // namespace gradagg::train
