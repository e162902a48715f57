#include "aggregator/cuda/device_cross_node_backend.h"

#include <string>
#include <utility>
#include <vector>

#include "aggregator/cuda/stripe_kernels.h"
#include "aggregator/partition.h"
#include "common/cuda/cuda_error.h"
#include "common/cuda/device_memory.h"
#include "common/cuda/event_pool.h"
#include "quantize/bucket_layout.h"
#include "quantize/cuda/cuda_quantizer.h"

namespace gradagg {
namespace {

void FreeDevice(void* memory) { cudaFree(memory); }
void FreeMapped(void* memory) { cudaFreeHost(memory); }

// Sums the GPU time of one kind of codec work in one call, when timing is on (events, so it stays asynchronous). The
// events are made once and reused by later calls: creating them costs host time on the call's critical path.
class CodecTimer {
 public:
  void Clear() { used_ = 0; }
  template <typename Launch>
  void Time(cudaStream_t stream, Launch launch) {
    GRADAGG_CUDA_CHECK(cudaEventRecord(starts_[used_], stream));
    launch();
    GRADAGG_CUDA_CHECK(cudaEventRecord(stops_[used_], stream));
    ++used_;
  }
  double Seconds() const {  // after the stream has finished
    double seconds = 0.0;
    for (size_t i = 0; i < used_; ++i) {
      float milliseconds = 0.0f;
      GRADAGG_CUDA_CHECK(cudaEventElapsedTime(&milliseconds, starts_.at(i), stops_.at(i)));
      seconds += milliseconds * 1e-3;
    }
    return seconds;
  }

 private:
  EventPool starts_{cudaEventDefault}, stops_{cudaEventDefault};  // timed events
  size_t used_ = 0;                                               // pairs recorded in this call
};

class CudaCrossNodeBackend final : public DeviceCrossNodeBackend {
 public:
  CudaCrossNodeBackend(const AggregatorOptions& options, std::unique_ptr<DeviceExchange> exchange,
                       std::unique_ptr<DeviceExchange> small)
      : quantizer_(QuantizerConfigOf(options)),
        exchange_(std::move(exchange)),
        small_(std::move(small)),
        transport_(exchange_->name()),
        nonFinite_(sizeof(unsigned long long)) {
    if (small_) transport_ += std::string("; stripes of small messages: ") + small_->name();
  }

  void UseStream(cudaStream_t stream) override { stream_ = stream; }

  BackendMemory Allocate(size_t bytes) override {
    void* memory = nullptr;
    if (bytes > 0) GRADAGG_CUDA_CHECK(cudaMalloc(&memory, bytes));
    BackendMemory owned(memory, BackendFree{FreeDevice});
    Zero(memory, bytes);
    return owned;
  }
  void Zero(void* memory, size_t bytes) override {
    if (bytes > 0) GRADAGG_CUDA_CHECK(cudaMemset(memory, 0, bytes));
    GRADAGG_CUDA_CHECK(cudaDeviceSynchronize());
  }
  void Download(void* host, const void* memory, size_t bytes) override {
    if (bytes > 0) GRADAGG_CUDA_CHECK(cudaMemcpyAsync(host, memory, bytes, cudaMemcpyDeviceToHost, stream_));
    GRADAGG_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }
  void Upload(void* memory, const void* host, size_t bytes) override {
    if (bytes > 0) GRADAGG_CUDA_CHECK(cudaMemcpyAsync(memory, host, bytes, cudaMemcpyHostToDevice, stream_));
    GRADAGG_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }
  BackendMemory AllocateMessages(size_t bytes) override {
    if (!mapped_) return Allocate(bytes);
    return BackendMemory(AllocateMappedMessages(bytes).release(), BackendFree{FreeMapped});
  }
  size_t SlotAlignment() const override { return 16; }  // the kernels read wire images as 16-byte vectors
  const char* transport() const override { return transport_.c_str(); }

  void SetLayouts(const std::vector<BucketLayout>& parts, const BucketLayout& own) override {
    layouts_.clear();
    size_t messageBytes = 0;
    for (const BucketLayout& layout : parts) {
      layouts_.push_back(quantizer_.Upload(layout));
      messageBytes += WireBytes(layout, quantizer_.config().bits);
    }
    layouts_.push_back(quantizer_.Upload(own));
    mapped_ = small_ && messageBytes <= kMappedMessagesMaxBytes;
  }
  void Encode(const float* values, float* residual, size_t layout, void* wire) override {
    quantizer_.Encode(values, ElementType::kFloat32, residual, layouts_[layout], wire, stream_);
  }
  void Decode(const void* wire, size_t layout, float* out, bool count) override {
    quantizer_.Decode(wire, layouts_[layout], out, ElementType::kFloat32, stream_,
                      count ? nonFinite_.as<unsigned long long>() : nullptr);
  }
  void DecodeCopies(const void* wire, size_t layout, const ValueCopies& out, bool count) override {
    quantizer_.DecodeCopies(wire, layouts_[layout], out, stream_, count ? nonFinite_.as<unsigned long long>() : nullptr);
  }
  void DecodeAccumulate(const void* wire, size_t layout, float* sum) override {
    quantizer_.DecodeAccumulate(wire, layouts_[layout], sum, stream_);
  }
  void EncodeSum(SumTerm first, const void* addend, float* residual, size_t layout, void* wire) override {
    quantizer_.EncodeSum(first, addend, residual, layouts_[layout], wire, stream_);
  }
  void EncodeTerms(const ValueTerms& values, float* residual, size_t layout, void* wire) override {
    quantizer_.EncodeTerms(values, residual, layouts_[layout], wire, stream_);
  }
  void Copy(float* to, const float* from, size_t count) override {
    GRADAGG_CUDA_CHECK(cudaMemcpyAsync(to, from, count * sizeof(float), cudaMemcpyDeviceToDevice, stream_));
  }
  void Add(float* sum, const float* values, size_t count) override { AddInto(sum, values, count, stream_); }
  void Fold(float* values, float* residual, size_t count) override { FoldResidual(values, residual, count, stream_); }

  void Exchange(MPI_Comm cross, int tag, const std::vector<SendBuffer>& sends,
                const std::vector<ReceiveBuffer>& receives, const std::function<void(int)>& beforeSend,
                const std::function<void()>& afterSends, const std::function<void(int)>& onReady,
                const char* what) override {
    (mapped_ ? small_ : exchange_)->Run(cross, tag, sends, receives, stream_, onReady, what, beforeSend, afterSends);
  }

  void StartCall(bool timing) override {
    timing_ = timing;
    for (CodecTimer& timer : timers_) timer.Clear();
    GRADAGG_CUDA_CHECK(cudaMemsetAsync(nonFinite_.get(), 0, sizeof(unsigned long long), stream_));
  }
  void Time(CodecStep step, const std::function<void()>& work) override {
    if (timing_) {
      timers_[static_cast<int>(step)].Time(stream_, work);
    } else {
      work();
    }
  }
  size_t FinishCall() override {
    unsigned long long nonFinite = 0;
    GRADAGG_CUDA_CHECK(
        cudaMemcpyAsync(&nonFinite, nonFinite_.get(), sizeof nonFinite, cudaMemcpyDeviceToHost, stream_));
    GRADAGG_CUDA_CHECK(cudaStreamSynchronize(stream_));
    return static_cast<size_t>(nonFinite);
  }
  double Seconds(CodecStep step) const override { return timing_ ? timers_[static_cast<int>(step)].Seconds() : 0.0; }

 private:
  CudaQuantizer quantizer_;
  std::unique_ptr<DeviceExchange> exchange_;
  std::unique_ptr<DeviceExchange> small_;  // may be null
  std::string transport_;
  bool mapped_ = false;     // this shape's messages are in mapped memory, exchanged through small_
  DeviceBuffer nonFinite_;  // the non-finite buckets the counted decodes met
  std::vector<DeviceBucketLayout> layouts_;
  cudaStream_t stream_ = nullptr;
  bool timing_ = false;
  CodecTimer timers_[2];  // by CodecStep
};

}  // namespace

std::unique_ptr<DeviceCrossNodeBackend> MakeDeviceCrossNodeBackend(const AggregatorOptions& options,
                                                                   std::unique_ptr<DeviceExchange> exchange,
                                                                   std::unique_ptr<DeviceExchange> small) {
  return std::make_unique<CudaCrossNodeBackend>(options, std::move(exchange), std::move(small));
}

}  // namespace gradagg
