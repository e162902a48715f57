#include "aggregator/host_cross_node_backend.h"

#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

#include "aggregator/partition.h"
#include "aggregator/stopwatch.h"
#include "quantize/quantizer.h"

namespace gradagg {
namespace {

void FreeHost(void* memory) { std::free(memory); }

class HostCrossNodeBackend final : public CrossNodeBackend {
 public:
  explicit HostCrossNodeBackend(const AggregatorOptions& options)
      : quantizer_(QuantizerConfigOf(options)), timeoutSeconds_(options.timeoutSeconds) {}

  BackendMemory Allocate(size_t bytes) override {
    void* memory = std::calloc(bytes > 0 ? bytes : 1, 1);  // 16-byte aligned, zeroed
    if (memory == nullptr) throw std::bad_alloc();
    return BackendMemory(memory, BackendFree{FreeHost});
  }
  BackendMemory AllocateMessages(size_t bytes) override { return Allocate(bytes); }
  void Zero(void* memory, size_t bytes) override {
    if (bytes > 0) std::memset(memory, 0, bytes);
  }
  void Download(void* host, const void* memory, size_t bytes) override {
    if (bytes > 0) std::memcpy(host, memory, bytes);
  }
  void Upload(void* memory, const void* host, size_t bytes) override {
    if (bytes > 0) std::memcpy(memory, host, bytes);
  }
  size_t SlotAlignment() const override { return sizeof(uint32_t); }
  const char* transport() const override { return "host"; }

  void SetLayouts(const std::vector<BucketLayout>& parts, const BucketLayout& own) override {
    layouts_ = parts;
    layouts_.push_back(own);
  }
  void Encode(const float* values, float* residual, size_t layout, void* wire) override {
    quantizer_.Encode(values, residual, layouts_[layout], wire);
  }
  void Decode(const void* wire, size_t layout, float* out, bool count) override {
    const size_t nonFinite = quantizer_.Decode(wire, layouts_[layout], out);
    if (count) nonFinite_ += nonFinite;
  }
  void DecodeCopies(const void* wire, size_t layout, const ValueCopies& out, bool count) override {
    CheckArrayCount("DecodeCopies", out.count);
    Decode(wire, layout, out.at[0], count);
    for (int c = 1; c < out.count; ++c) Copy(out.at[c], out.at[0], layouts_[layout].elements());
  }
  void DecodeAccumulate(const void* wire, size_t layout, float* sum) override {
    quantizer_.DecodeAccumulate(wire, layouts_[layout], sum);
  }
  void EncodeSum(SumTerm first, const void* addend, float* residual, size_t layout, void* wire) override {
    const BucketLayout& buckets = layouts_[layout];
    if (first.wire != nullptr) {
      sum_.resize(buckets.elements());
      quantizer_.Decode(first.wire, buckets, sum_.data());
    } else {
      sum_.assign(first.values, first.values + buckets.elements());
    }
    quantizer_.DecodeAccumulate(addend, buckets, sum_.data());
    quantizer_.Encode(sum_.data(), residual, buckets, wire);
  }
  void EncodeTerms(const ValueTerms& values, float* residual, size_t layout, void* wire) override {
    CheckArrayCount("EncodeTerms", values.count);
    const BucketLayout& buckets = layouts_[layout];
    sum_.assign(values.at[0], values.at[0] + buckets.elements());
    for (int t = 1; t < values.count; ++t) Add(sum_.data(), values.at[t], sum_.size());
    quantizer_.Encode(sum_.data(), residual, buckets, wire);
  }
  void Copy(float* to, const float* from, size_t count) override {
    if (count > 0) std::memcpy(to, from, count * sizeof(float));
  }
  void Add(float* sum, const float* values, size_t count) override {
    for (size_t i = 0; i < count; ++i) sum[i] += values[i];
  }
  void Fold(float* values, float* residual, size_t count) override {
    for (size_t i = 0; i < count; ++i) {
      values[i] += residual[i];
      residual[i] = 0.0f;
    }
  }

  void Exchange(MPI_Comm cross, int tag, const std::vector<SendBuffer>& sends,
                const std::vector<ReceiveBuffer>& receives, const std::function<void(int)>& beforeSend,
                const std::function<void()>& afterSends, const std::function<void(int)>& onReady,
                const char* what) override {
    ExchangeInRankOrder(cross, tag, sends, receives, onReady, kDefaultMaxMessageBytes, timeoutSeconds_, what,
                        beforeSend, afterSends);
  }

  void StartCall(bool) override {
    nonFinite_ = 0;
    seconds_[0] = seconds_[1] = 0.0;
  }
  void Time(CodecStep step, const std::function<void()>& work) override {
    Stopwatch clock;
    work();
    seconds_[static_cast<int>(step)] += clock.Lap();
  }
  size_t FinishCall() override { return nonFinite_; }
  double Seconds(CodecStep step) const override { return seconds_[static_cast<int>(step)]; }

 private:
  Quantizer quantizer_;
  double timeoutSeconds_;
  std::vector<BucketLayout> layouts_;
  std::vector<float> sum_;  // EncodeSum's and EncodeTerms' sum
  size_t nonFinite_ = 0;
  double seconds_[2] = {};  // by CodecStep
};

}  // namespace

std::unique_ptr<CrossNodeBackend> MakeHostCrossNodeBackend(const AggregatorOptions& options) {
  return std::make_unique<HostCrossNodeBackend>(options);
}

}  // namespace gradagg
