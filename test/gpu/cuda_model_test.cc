// The trainer's CUDA model against its CPU model on the same parameters and batch: gradient, loss, errors, the
// optimizer's carry and its step (every optimizer) agree to float32 rounding (cuBLAS sums in another order).
// Skipped where no GPU is visible.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "model.h"
#include "optimizer.h"

namespace gradagg::train {
namespace {

double RelativeL2(const std::vector<float>& a, const std::vector<float>& b) {
  double difference = 0.0;
  double norm = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    difference += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
    norm += static_cast<double>(b[i]) * b[i];
  }
  return std::sqrt(difference / norm);
}

// The model's gradient, flat, wherever it lives; and the other way.
std::vector<float> ReadGradient(const Model& model) {
  std::vector<float> values(model.parameterCount(), -1.0f);
  const GradientTensors& gradient = model.gradient();
  size_t offset = 0;
  for (const GradientBuffer& buffer : gradient.host) {
    std::copy_n(buffer.data, buffer.count, values.begin() + static_cast<long>(offset));
    offset += buffer.count;
  }
  for (const DeviceGradient& tensor : gradient.device) {
    EXPECT_EQ(tensor.type, DataType::kFloat32);
    EXPECT_EQ(cudaMemcpy(values.data() + offset, tensor.data, tensor.count * sizeof(float), cudaMemcpyDeviceToHost),
              cudaSuccess);
    offset += tensor.count;
  }
  EXPECT_EQ(offset, values.size());
  return values;
}

// Writes `values` where AggregateGradients would write the aggregate.
void WriteGradient(const Model& model, const std::vector<float>& values) {
  const GradientTensors& gradient = model.gradient();
  size_t offset = 0;
  for (const GradientBuffer& buffer : gradient.host) {
    std::copy_n(values.begin() + static_cast<long>(offset), buffer.count, buffer.data);
    offset += buffer.count;
  }
  for (const DeviceGradient& tensor : gradient.device) {
    ASSERT_EQ(cudaMemcpy(tensor.data, values.data() + offset, tensor.count * sizeof(float), cudaMemcpyHostToDevice),
              cudaSuccess);
    offset += tensor.count;
  }
  ASSERT_EQ(offset, values.size());
}

TEST(CudaModel, KeepsItsGradientOnTheGpuInTheCpuModelsLayout) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) GTEST_SKIP() << "no CUDA device";
  const std::unique_ptr<Model> cpu = MakeCpuModel();
  const std::unique_ptr<Model> gpu = MakeCudaModel(0);
  ASSERT_TRUE(gpu->gradient().onDevice());
  ASSERT_TRUE(gpu->gradient().host.empty());
  ASSERT_FALSE(cpu->gradient().onDevice());
  ASSERT_EQ(gpu->gradient().device.size(), cpu->tensors().size());
  ASSERT_EQ(cpu->gradient().host.size(), cpu->tensors().size());
  for (size_t t = 0; t < cpu->tensors().size(); ++t) {
    EXPECT_EQ(gpu->gradient().device[t].count, cpu->tensors()[t].size) << "tensor " << t;
    EXPECT_EQ(cpu->gradient().host[t].count, cpu->tensors()[t].size) << "tensor " << t;
    cudaPointerAttributes attributes{};
    ASSERT_EQ(cudaPointerGetAttributes(&attributes, gpu->gradient().device[t].data), cudaSuccess);
    EXPECT_EQ(attributes.type, cudaMemoryTypeDevice) << "tensor " << t;
  }
}

TEST(CudaModel, AgreesWithTheCpuModelUnderEveryOptimizer) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) GTEST_SKIP() << "no CUDA device";
  std::mt19937 generator(3);
  std::uniform_real_distribution<float> pixel(0.0f, 1.0f);
  constexpr size_t kCount = 96;
  std::vector<float> images(kCount * Mlp::kInputs);
  for (float& p : images) p = pixel(generator) < 0.5f ? 0.0f : pixel(generator);  // sparse, like the data
  std::vector<uint8_t> labels(kCount);
  for (uint8_t& l : labels) l = static_cast<uint8_t>(generator() % Mlp::kClasses);
  Mlp initial;
  initial.Initialize(7);

  for (const OptimizerKind kind : {OptimizerKind::kSgd, OptimizerKind::kMomentum, OptimizerKind::kNesterov,
                                   OptimizerKind::kAdam, OptimizerKind::kAdamW}) {
    SCOPED_TRACE(ToString(kind));
    OptimizerSettings settings;
    settings.kind = kind;
    settings.learningRate = kind == OptimizerKind::kAdam || kind == OptimizerKind::kAdamW ? 0.001f : 0.1f;
    settings.weightDecay = 0.01f;
    const Optimizer optimizer(settings, ScheduleSettings{});
    const std::unique_ptr<Model> cpu = MakeCpuModel();
    const std::unique_ptr<Model> gpu = MakeCudaModel(0);
    cpu->SetParameters(initial.parameters());
    gpu->SetParameters(initial.parameters());

    WriteGradient(*gpu, std::vector<float>(gpu->parameterCount(), 7.0f));  // must be overwritten, not added to
    for (size_t step = 0; step < 3; ++step) {
      const BatchResult a = cpu->ComputeGradient(images.data(), labels.data(), kCount);
      const BatchResult b = gpu->ComputeGradient(images.data(), labels.data(), kCount);
      EXPECT_LT(RelativeL2(ReadGradient(*gpu), ReadGradient(*cpu)), 1e-4) << "step " << step;
      EXPECT_NEAR(b.lossSum, a.lossSum, 1e-4 * a.lossSum) << "step " << step;
      EXPECT_LE(std::abs(static_cast<long>(b.errors) - static_cast<long>(a.errors)), 1) << "step " << step;
      cpu->CarryMomentum(optimizer.BeforeAggregation(step, kCount));
      gpu->CarryMomentum(optimizer.BeforeAggregation(step, kCount));
      const std::vector<float> carried = ReadGradient(*cpu);
      EXPECT_LT(RelativeL2(ReadGradient(*gpu), carried), 1e-4) << "step " << step;
      WriteGradient(*gpu, carried);  // the same aggregate, as every rank applies
      cpu->Step(optimizer.AfterAggregation(step, kCount));
      gpu->Step(optimizer.AfterAggregation(step, kCount));
    }
    EXPECT_LT(RelativeL2(gpu->Parameters(), cpu->Parameters()), 1e-5);
    EXPECT_LT(RelativeL2(gpu->OptimizerState(), cpu->OptimizerState()), 1e-4);
    EXPECT_GT(RelativeL2(cpu->Parameters(), initial.parameters()), 1e-4);  // the steps moved the weights
    EXPECT_LE(std::abs(static_cast<long>(gpu->CountErrors(images.data(), labels.data(), kCount)) -
                       static_cast<long>(cpu->CountErrors(images.data(), labels.data(), kCount))),
              1);
  }
}

}  // namespace
}  // namespace gradagg::train
