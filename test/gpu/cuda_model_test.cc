// The trainer's CUDA model against its CPU model on the same parameters and batch: gradient, loss, errors and a
// momentum step agree to float32 rounding (cuBLAS sums in another order). Skipped where no GPU is visible.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "model.h"

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

TEST(CudaModel, AgreesWithTheCpuModel) {
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
  const std::unique_ptr<Model> cpu = MakeCpuModel();
  const std::unique_ptr<Model> gpu = MakeCudaModel(0);
  cpu->SetParameters(initial.parameters());
  gpu->SetParameters(initial.parameters());

  for (int step = 0; step < 3; ++step) {
    std::vector<float> cpuGradient;
    std::vector<float> gpuGradient(17, 1.0f);  // wrong size on purpose: it must be resized and overwritten
    const BatchResult a = cpu->ComputeGradient(images.data(), labels.data(), kCount, cpuGradient);
    const BatchResult b = gpu->ComputeGradient(images.data(), labels.data(), kCount, gpuGradient);
    ASSERT_EQ(gpuGradient.size(), cpuGradient.size());
    EXPECT_LT(RelativeL2(gpuGradient, cpuGradient), 1e-4) << "step " << step;
    EXPECT_NEAR(b.lossSum, a.lossSum, 1e-4 * a.lossSum) << "step " << step;
    EXPECT_LE(std::abs(static_cast<long>(b.errors) - static_cast<long>(a.errors)), 1) << "step " << step;
    cpu->Step(cpuGradient, kCount, 0.1f, 0.5f);
    gpu->Step(cpuGradient, kCount, 0.1f, 0.5f);  // the same aggregate, as every rank applies
  }
  EXPECT_LE(std::abs(static_cast<long>(gpu->CountErrors(images.data(), labels.data(), kCount)) -
                     static_cast<long>(cpu->CountErrors(images.data(), labels.data(), kCount))),
            1);
}

}  // namespace
}  // namespace gradagg::train
