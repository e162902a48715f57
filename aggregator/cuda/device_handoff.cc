// DeviceHandoff on CUDA: an event marks the caller's stream, a non-blocking stream of our own waits for it; the two
// double-buffer slots are plain device allocations that only grow; queued waits poll a word of mapped host memory
// (cuStreamWaitValue32) that the background thread writes once a call is over.
#include "aggregator/device_handoff.h"

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <atomic>
#include <mutex>

#include "common/cuda/cuda_error.h"
#include "common/cuda/device_memory.h"
#include "common/cuda/driver_function.h"
#include "gradagg/errors.h"

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

// A word of mapped, pinned host memory, zeroed, for one handoff's queued waits. Words are never freed: a wait may
// still be queued on the caller's stream when its Aggregator is destroyed, and must never poll freed memory (4 bytes
// per handoff that ever queued a wait, for the process's life).
volatile uint32_t* TakeSignalWord() {
  static std::mutex mutex;
  static uint32_t* page = nullptr;
  static size_t used = 0;
  constexpr size_t kPageWords = 1024;
  const std::lock_guard<std::mutex> lock(mutex);
  if (page == nullptr || used == kPageWords) {
    void* memory = nullptr;
    GRADAGG_CUDA_CHECK(
        cudaHostAlloc(&memory, kPageWords * sizeof(uint32_t), cudaHostAllocMapped | cudaHostAllocPortable));
    page = static_cast<uint32_t*>(memory);
    for (size_t i = 0; i < kPageWords; ++i) page[i] = 0;
    used = 0;
  }
  return page + used++;
}

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

  uint32_t QueueWait(CudaStream waiter) override {
    using WaitValue32 = CUresult (*)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);
    static const auto waitValue32 = DriverFunction<WaitValue32>("cuStreamWaitValue32");
    if (word_ == nullptr) {
      word_ = TakeSignalWord();
      void* mapped = nullptr;
      GRADAGG_CUDA_CHECK(cudaHostGetDevicePointer(&mapped, const_cast<uint32_t*>(word_), 0));
      wordOnDevice_ = reinterpret_cast<CUdeviceptr>(mapped);
    }
    const uint32_t call = issued_ + 1;  // GEQ compares cyclically: the count may wrap
    const CUresult status = waitValue32(static_cast<CUstream>(waiter), wordOnDevice_, call, CU_STREAM_WAIT_VALUE_GEQ);
    if (status != CUDA_SUCCESS)
      throw UsageError("cuStreamWaitValue32 failed (driver error " + std::to_string(static_cast<int>(status)) +
                       "): this GPU or driver cannot queue a wait on memory; use the async call and wait for it");
    FollowMark(waiter);  // also where the call queues no GPU work
    issued_ = call;
    return call;
  }

  void FollowMark(CudaStream waiter) override {
    GRADAGG_CUDA_CHECK(cudaStreamWaitEvent(static_cast<cudaStream_t>(waiter), mark_, 0));
  }

  void Release(uint32_t call) override {
    std::atomic_thread_fence(std::memory_order_release);
    *word_ = call;
  }

  void FillWithNaN(const std::vector<DeviceGradient>& gradients) override {
    for (const DeviceGradient& tensor : gradients) {
      if (tensor.count > 0) GRADAGG_CUDA_CHECK(cudaMemsetAsync(tensor.data, 0xff, TensorBytes(tensor), stream_));
    }
    GRADAGG_CUDA_CHECK(cudaStreamSynchronize(stream_));
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
  volatile uint32_t* word_ = nullptr;  // QueueWait's, from the first on
  CUdeviceptr wordOnDevice_ = 0;
  uint32_t issued_ = 0;  // the last call number a wait was queued for
  DeviceBuffer slots_[2];
  std::vector<DeviceGradient> captured_[2];
};

}  // namespace

std::unique_ptr<DeviceHandoff> MakeDeviceHandoff() { return std::make_unique<CudaHandoff>(); }

}  // namespace gradagg
