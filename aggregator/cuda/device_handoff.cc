// DeviceHandoff on CUDA: an event marks the caller's stream, a non-blocking stream of our own waits for it; the two
// double-buffer slots are plain device allocations that only grow.
#include "aggregator/device_handoff.h"

#include <cuda_runtime_api.h>

#include "common/cuda/cuda_error.h"
#include "common/cuda/device_memory.h"

namespace gradagg {
namespace {

size_t TensorBytes(const DeviceGradient& tensor) {
  switch (tensor.type) {
    case DataType::kBFloat16:
    case DataType::kFloat16:
      return tensor.count * 2;
    case DataType::kFloat32:
      break;
  }
  return tensor.count * 4;
}

// Each captured tensor starts on a 256-byte boundary, as cudaMalloc's own allocations do.
size_t Aligned(size_t bytes) { return (bytes + 255) / 256 * 256; }

class CudaHandoff final : public DeviceHandoff {
 public:
  CudaHandoff() {
    GRADAGG_CUDA_CHECK(cudaGetDevice(&device_));
    GRADAGG_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    if (const cudaError_t status = cudaEventCreateWithFlags(&mark_, cudaEventDisableTiming); status != cudaSuccess) {
      cudaStreamDestroy(stream_);
      GRADAGG_CUDA_CHECK(status);
    }
  }
  ~CudaHandoff() override {
    cudaEventDestroy(mark_);
    cudaStreamDestroy(stream_);
  }
  CudaHandoff(const CudaHandoff&) = delete;
  CudaHandoff& operator=(const CudaHandoff&) = delete;

  int device() const override { return device_; }

  void Mark(CudaStream stream) override {
    GRADAGG_CUDA_CHECK(cudaEventRecord(mark_, stream));
    GRADAGG_CUDA_CHECK(cudaStreamWaitEvent(stream_, mark_, 0));
  }

  CudaStream Resume() override {
    GRADAGG_CUDA_CHECK(cudaSetDevice(device_));
    return stream_;
  }

  std::vector<DeviceGradient> Capture(int slot, const std::vector<DeviceGradient>& gradients,
                                      CudaStream stream) override {
    size_t bytes = 0;
    for (const DeviceGradient& tensor : gradients) bytes += Aligned(TensorBytes(tensor));
    DeviceBuffer& memory = slots_[slot];
    if (bytes > memory.bytes()) {
      GRADAGG_CUDA_CHECK(cudaStreamSynchronize(stream));  // the old slot may still be read by queued copies
      memory = DeviceBuffer();
      memory = DeviceBuffer(bytes);
    }
    std::vector<DeviceGradient> copies;
    char* next = memory.as<char>();
    for (const DeviceGradient& tensor : gradients) {
      copies.push_back({next, tensor.count, tensor.type});
      if (tensor.count > 0)
        GRADAGG_CUDA_CHECK(cudaMemcpyAsync(next, tensor.data, TensorBytes(tensor), cudaMemcpyDeviceToDevice, stream));
      next += Aligned(TensorBytes(tensor));
    }
    captured_[slot] = copies;
    return copies;
  }

  bool Restore(int slot, const std::vector<DeviceGradient>& gradients, CudaStream stream) override {
    const std::vector<DeviceGradient>& copies = captured_[slot];
    if (copies.size() != gradients.size()) return false;
    for (size_t i = 0; i < gradients.size(); ++i) {
      if (copies[i].count != gradients[i].count || copies[i].type != gradients[i].type) return false;
    }
    for (size_t i = 0; i < gradients.size(); ++i) {
      if (gradients[i].count == 0) continue;
      GRADAGG_CUDA_CHECK(cudaMemcpyAsync(gradients[i].data, copies[i].data, TensorBytes(gradients[i]),
                                         cudaMemcpyDeviceToDevice, stream));
    }
    return true;
  }

  void Zero(const std::vector<DeviceGradient>& gradients, CudaStream stream) override {
    for (const DeviceGradient& tensor : gradients) {
      if (tensor.count > 0) GRADAGG_CUDA_CHECK(cudaMemsetAsync(tensor.data, 0, TensorBytes(tensor), stream));
    }
  }

 private:
  int device_ = 0;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t mark_ = nullptr;
  DeviceBuffer slots_[2];
  std::vector<DeviceGradient> captured_[2];
};

}  // namespace

std::unique_ptr<DeviceHandoff> MakeDeviceHandoff() { return std::make_unique<CudaHandoff>(); }

}  // namespace gradagg
