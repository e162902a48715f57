#include "intra_node/cuda/term_pusher.h"

#include <cstring>

#include "common/cuda/cuda_error.h"
#include "intra_node/cuda/driver_function.h"

namespace gradagg::nvlink {
namespace {

using WriteValue64 = CUresult (*)(CUstream, CUdeviceptr, cuuint64_t, unsigned int);

WriteValue64 StreamWriteValue64() {
  static const auto function = DriverFunction<WriteValue64>("cuStreamWriteValue64");
  return function;
}

}  // namespace

bool TermPusher::Supported(int device) {
  using GetAttribute = CUresult (*)(int*, CUdevice_attribute, CUdevice);
  try {
    static const auto getAttribute = DriverFunction<GetAttribute>("cuDeviceGetAttribute");
    int supported = 0;
    if (getAttribute(&supported, CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS, device) != CUDA_SUCCESS)
      return false;
    StreamWriteValue64();
    return supported != 0;
  } catch (const CudaError&) {
    return false;
  }
}

TermPusher::TermPusher() {
  GRADAGG_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  GRADAGG_CUDA_CHECK(cudaEventCreateWithFlags(&start_, cudaEventDisableTiming));
  GRADAGG_CUDA_CHECK(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming));
  void* memory = nullptr;
  GRADAGG_CUDA_CHECK(cudaHostAlloc(&memory, sizeof(TermArrivalFailure), cudaHostAllocMapped));
  failure_.reset(static_cast<TermArrivalFailure*>(memory));
  std::memset(failure_.get(), 0, sizeof(TermArrivalFailure));
  failure_->term = -1;
  GRADAGG_CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&failureOnDevice_), failure_.get(), 0));
}

TermPusher::~TermPusher() {
  cudaStreamSynchronize(stream_);
  cudaEventDestroy(done_);
  cudaEventDestroy(start_);
  cudaStreamDestroy(stream_);
}

void TermPusher::Begin(cudaStream_t stream) {
  GRADAGG_CUDA_CHECK(cudaEventRecord(start_, stream));
  GRADAGG_CUDA_CHECK(cudaStreamWaitEvent(stream_, start_, 0));
  open_ = true;
}

void TermPusher::Copy(void* to, const void* from, size_t bytes) {
  GRADAGG_CUDA_CHECK(cudaMemcpyAsync(to, from, bytes, cudaMemcpyDeviceToDevice, stream_));
}

void TermPusher::Flag(uint64_t* address, uint64_t value) {
  CheckDriver(StreamWriteValue64()(reinterpret_cast<CUstream>(stream_), reinterpret_cast<CUdeviceptr>(address), value,
                                   CU_STREAM_WRITE_VALUE_DEFAULT),
              "cuStreamWriteValue64 of a pushed chunk's flag");
}

void TermPusher::End() { GRADAGG_CUDA_CHECK(cudaEventRecord(done_, stream_)); }

void TermPusher::Join(cudaStream_t stream) {
  if (!open_) return;
  GRADAGG_CUDA_CHECK(cudaStreamWaitEvent(stream, done_, 0));
  open_ = false;
}

}  // namespace gradagg::nvlink
