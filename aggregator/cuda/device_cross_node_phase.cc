#include "aggregator/cuda/device_cross_node_phase.h"

#include <utility>

#include "aggregator/cuda/stripe_kernels.h"
#include "aggregator/partition.h"
#include "aggregator/stopwatch.h"
#include "mpi_glue/mpi_error.h"
#include "quantize/cuda/cuda_error.h"

namespace gradagg {
namespace {

constexpr int kScatterTag = 1;
constexpr int kGatherTag = 2;

size_t RoundUp16(size_t bytes) { return (bytes + 15) / 16 * 16; }

// Sums the GPU time of the decodes of one call, when timing is on (events, so decodes stay asynchronous).
class DecodeTimer {
 public:
  explicit DecodeTimer(bool on) : on_(on) {}
  ~DecodeTimer() {
    for (auto& [start, stop] : pairs_) {
      cudaEventDestroy(start);
      cudaEventDestroy(stop);
    }
  }
  template <typename Launch>
  void Time(cudaStream_t stream, Launch launch) {
    if (!on_) return launch();
    std::pair<cudaEvent_t, cudaEvent_t> pair{};
    GRADAGG_CUDA_CHECK(cudaEventCreate(&pair.first));
    pairs_.push_back(pair);
    GRADAGG_CUDA_CHECK(cudaEventCreate(&pairs_.back().second));
    GRADAGG_CUDA_CHECK(cudaEventRecord(pairs_.back().first, stream));
    launch();
    GRADAGG_CUDA_CHECK(cudaEventRecord(pairs_.back().second, stream));
  }
  double Seconds() const {  // after the stream has finished
    double seconds = 0.0;
    for (const auto& [start, stop] : pairs_) {
      float milliseconds = 0.0f;
      GRADAGG_CUDA_CHECK(cudaEventElapsedTime(&milliseconds, start, stop));
      seconds += milliseconds * 1e-3;
    }
    return seconds;
  }

 private:
  bool on_;
  std::vector<std::pair<cudaEvent_t, cudaEvent_t>> pairs_;
};

}  // namespace

DeviceCrossNodePhase::DeviceCrossNodePhase(MPI_Comm cross, const AggregatorOptions& options,
                                           std::unique_ptr<DeviceExchange> exchange)
    : cross_(cross),
      quantizer_(QuantizerConfigOf(options)),
      errorFeedback_(options.errorFeedback),
      quantizeOwnStripe_(options.quantizeOwnStripe),
      exchange_(std::move(exchange)) {
  int node = 0, nodes = 1;
  GRADAGG_MPI_CHECK(MPI_Comm_rank(cross_, &node));
  GRADAGG_MPI_CHECK(MPI_Comm_size(cross_, &nodes));
  node_ = static_cast<size_t>(node);
  nodes_ = static_cast<size_t>(nodes);
}

void DeviceCrossNodePhase::Reshape(size_t length) {
  if (shaped_ && length == length_) return;
  shaped_ = true;
  length_ = length;
  subStripes_ = SplitIntoBucketRuns(length, quantizer_.config().bucketSize, nodes_);
  wireOffsets_.resize(nodes_);
  for (size_t j = 0; j < nodes_; ++j) wireOffsets_[j] = quantizer_.WireBytes(subStripes_[j].begin);
  const size_t ownCount = subStripes_[node_].count;
  ownSlotBytes_ = RoundUp16(quantizer_.WireBytes(ownCount));
  stripeResidual_ = DeviceBuffer(length * sizeof(float));
  ownResidual_ = DeviceBuffer(ownCount * sizeof(float));
  ownSum_ = DeviceBuffer(ownCount * sizeof(float));
  stripeWire_ = DeviceBuffer(RoundUp16(quantizer_.WireBytes(length)));
  ownWire_ = DeviceBuffer(ownSlotBytes_);
  received_ = DeviceBuffer(ownSlotBytes_ * nodes_);
  ResetResiduals();
}

void DeviceCrossNodePhase::ResetResiduals() {
  if (stripeResidual_.bytes() > 0) GRADAGG_CUDA_CHECK(cudaMemset(stripeResidual_.get(), 0, stripeResidual_.bytes()));
  if (ownResidual_.bytes() > 0) GRADAGG_CUDA_CHECK(cudaMemset(ownResidual_.get(), 0, ownResidual_.bytes()));
  GRADAGG_CUDA_CHECK(cudaDeviceSynchronize());
}

void DeviceCrossNodePhase::Aggregate(float* stripe, size_t length, cudaStream_t stream, PhaseTimes* times) {
  Reshape(length);
  const ElementRange own = subStripes_[node_];
  const size_t ownBytes = quantizer_.WireBytes(own.count);
  float* stripeResidual = errorFeedback_ ? stripeResidual_.as<float>() : nullptr;
  auto* stripeWire = stripeWire_.as<unsigned char>();
  auto* received = received_.as<unsigned char>();
  float* sum = ownSum_.as<float>();
  DecodeTimer decodeTimer(times != nullptr);
  Stopwatch clock;

  // 1. Quantize the stripe, one run of buckets per owner. Without quantizeOwnStripe our own part enters our sum
  //    exactly, its residual folded in and so consumed.
  for (size_t j = 0; j < nodes_; ++j) {
    const ElementRange part = subStripes_[j];
    if (j == node_ && !quantizeOwnStripe_) continue;
    quantizer_.Encode(stripe + part.begin, ElementType::kFloat32,
                      stripeResidual != nullptr ? stripeResidual + part.begin : nullptr, part.count,
                      stripeWire + wireOffsets_[j], stream);
  }
  if (!quantizeOwnStripe_ && stripeResidual != nullptr)
    FoldResidual(stripe + own.begin, stripeResidual + own.begin, own.count, stream);
  if (times != nullptr) GRADAGG_CUDA_CHECK(cudaStreamSynchronize(stream));
  const double quantizeSeconds = clock.Lap();

  // 2. Send each owner its part; sum the parts of ours in source-node order.
  std::vector<SendBuffer> sends(nodes_);
  std::vector<ReceiveBuffer> receives(nodes_);
  for (size_t j = 0; j < nodes_; ++j) {
    if (j == node_) continue;
    sends[j] = {stripeWire + wireOffsets_[j], quantizer_.WireBytes(subStripes_[j].count)};
    receives[j] = {received + j * ownSlotBytes_, ownBytes};
  }
  exchange_->Run(cross_, kScatterTag, sends, receives, stream, [&](int sourceRank) {
    const auto source = static_cast<size_t>(sourceRank);
    decodeTimer.Time(stream, [&] {
      if (source == node_ && !quantizeOwnStripe_) {
        const float* exact = stripe + own.begin;
        if (source == 0) {
          GRADAGG_CUDA_CHECK(
              cudaMemcpyAsync(sum, exact, own.count * sizeof(float), cudaMemcpyDeviceToDevice, stream));
        } else {
          AddInto(sum, exact, own.count, stream);
        }
        return;
      }
      const void* part = source == node_ ? stripeWire + wireOffsets_[node_] : receives[source].data;
      if (source == 0) {
        quantizer_.Decode(part, own.count, sum, ElementType::kFloat32, stream);
      } else {
        quantizer_.DecodeAccumulate(part, own.count, sum, stream);
      }
    });
  });
  // With timing, the decodes queued by the exchange finish inside it (else they would count as the next step's).
  if (times != nullptr) GRADAGG_CUDA_CHECK(cudaStreamSynchronize(stream));
  const double scatterSeconds = clock.Lap();

  // 3. Re-quantize our sum with the second residual.
  quantizer_.Encode(sum, ElementType::kFloat32, errorFeedback_ ? ownResidual_.as<float>() : nullptr, own.count,
                    ownWire_.get(), stream);
  if (times != nullptr) GRADAGG_CUDA_CHECK(cudaStreamSynchronize(stream));
  const double requantizeSeconds = clock.Lap();

  // 4. All-gather the quantized sums into the stripe's wire image, and decode every owner's part.
  for (size_t j = 0; j < nodes_; ++j) {
    if (j == node_) continue;
    sends[j] = {ownWire_.get(), ownBytes};
    receives[j] = {stripeWire + wireOffsets_[j], quantizer_.WireBytes(subStripes_[j].count)};
  }
  exchange_->Run(cross_, kGatherTag, sends, receives, stream, [&](int ownerRank) {
    const auto owner = static_cast<size_t>(ownerRank);
    const void* part = owner == node_ ? ownWire_.get() : receives[owner].data;
    decodeTimer.Time(stream, [&] {
      quantizer_.Decode(part, subStripes_[owner].count, stripe + subStripes_[owner].begin, ElementType::kFloat32,
                        stream);
    });
  });
  if (times != nullptr) GRADAGG_CUDA_CHECK(cudaStreamSynchronize(stream));
  const double gatherSeconds = clock.Lap();

  lastBytesSent_ = 0;
  lastFloatBytes_ = 0;
  for (size_t j = 0; j < nodes_; ++j) {
    if (j == node_) continue;
    lastBytesSent_ += ownBytes + quantizer_.WireBytes(subStripes_[j].count);
    lastFloatBytes_ += (own.count + subStripes_[j].count) * sizeof(float);
  }
  if (times != nullptr) {
    const double decodeSeconds = decodeTimer.Seconds();
    times->quantize += quantizeSeconds + requantizeSeconds;
    times->decode += decodeSeconds;
    times->exchange += scatterSeconds + gatherSeconds - decodeSeconds;
  }
}

}  // namespace gradagg
