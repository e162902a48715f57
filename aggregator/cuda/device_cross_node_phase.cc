#include "aggregator/cuda/device_cross_node_phase.h"

#include <utility>

#include "aggregator/cuda/stripe_kernels.h"
#include "aggregator/partition.h"
#include "aggregator/stopwatch.h"
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
      position_(PositionIn(cross)),
      quantizer_(QuantizerConfigOf(options)),
      errorFeedback_(options.errorFeedback),
      quantizeOwnStripe_(options.quantizeOwnStripe),
      exchange_(std::move(exchange)) {}

void DeviceCrossNodePhase::Reshape(const BucketLayout& layout) {
  if (shaped_ && layout == plan_.stripe) return;
  shaped_ = true;
  const size_t length = layout.elements();
  plan_ = ExchangePlan(layout, position_, quantizer_.config());
  subLayouts_.clear();
  for (const BucketLayout& part : plan_.subLayouts) subLayouts_.push_back(quantizer_.Upload(part));
  const size_t ownCount = plan_.own.count;
  ownSlotBytes_ = RoundUp16(plan_.ownWireBytes);
  stripeResidual_ = DeviceBuffer(length * sizeof(float));
  ownResidual_ = DeviceBuffer(ownCount * sizeof(float));
  ownSum_ = DeviceBuffer(ownCount * sizeof(float));
  stripeWire_ = DeviceBuffer(RoundUp16(plan_.stripeWireBytes));
  ownWire_ = DeviceBuffer(ownSlotBytes_);
  received_ = DeviceBuffer(ownSlotBytes_ * position_.nodes);
  if (nonFinite_.bytes() == 0) nonFinite_ = DeviceBuffer(sizeof(unsigned long long));
  ResetResiduals();
}

void DeviceCrossNodePhase::ResetResiduals() {
  if (stripeResidual_.bytes() > 0) GRADAGG_CUDA_CHECK(cudaMemset(stripeResidual_.get(), 0, stripeResidual_.bytes()));
  if (ownResidual_.bytes() > 0) GRADAGG_CUDA_CHECK(cudaMemset(ownResidual_.get(), 0, ownResidual_.bytes()));
  GRADAGG_CUDA_CHECK(cudaDeviceSynchronize());
}

void DeviceCrossNodePhase::Aggregate(float* stripe, const BucketLayout& layout, cudaStream_t stream,
                                     PhaseTimes* times) {
  Reshape(layout);
  const ElementRange own = plan_.own;
  const DeviceBucketLayout& ownLayout = subLayouts_[position_.node];
  auto* nonFinite = nonFinite_.as<unsigned long long>();
  float* stripeResidual = errorFeedback_ ? stripeResidual_.as<float>() : nullptr;
  auto* stripeWire = stripeWire_.as<unsigned char>();
  auto* received = received_.as<unsigned char>();
  float* sum = ownSum_.as<float>();
  DecodeTimer decodeTimer(times != nullptr);
  Stopwatch clock;

  // 1. Quantize the stripe, one run of buckets per owner. Without quantizeOwnStripe our own part enters our sum
  //    exactly, its residual folded in and so consumed.
  for (size_t j = 0; j < position_.nodes; ++j) {
    const ElementRange part = plan_.subStripes[j];
    if (j == position_.node && !quantizeOwnStripe_) continue;
    quantizer_.Encode(stripe + part.begin, ElementType::kFloat32,
                      stripeResidual != nullptr ? stripeResidual + part.begin : nullptr, subLayouts_[j],
                      stripeWire + plan_.wireOffsets[j], stream);
  }
  if (!quantizeOwnStripe_ && stripeResidual != nullptr)
    FoldResidual(stripe + own.begin, stripeResidual + own.begin, own.count, stream);
  if (times != nullptr) GRADAGG_CUDA_CHECK(cudaStreamSynchronize(stream));
  const double quantizeSeconds = clock.Lap();

  // 2. Send each owner its part; sum the parts of ours in source-node order.
  const ExchangeMessages scatter = plan_.Scatter(stripeWire, received, ownSlotBytes_);
  const auto sumInOrder = [&](int sourceRank) {
    const auto source = static_cast<size_t>(sourceRank);
    decodeTimer.Time(stream, [&] {
      if (source == position_.node && !quantizeOwnStripe_) {
        const float* exact = stripe + own.begin;
        if (source == 0) {
          GRADAGG_CUDA_CHECK(cudaMemcpyAsync(sum, exact, own.count * sizeof(float), cudaMemcpyDeviceToDevice, stream));
        } else {
          AddInto(sum, exact, own.count, stream);
        }
        return;
      }
      const void* part =
          source == position_.node ? stripeWire + plan_.wireOffsets[position_.node] : scatter.receives[source].data;
      if (source == 0) {
        quantizer_.Decode(part, ownLayout, sum, ElementType::kFloat32, stream);
      } else {
        quantizer_.DecodeAccumulate(part, ownLayout, sum, stream);
      }
    });
  };
  exchange_->Run(cross_, kScatterTag, scatter.sends, scatter.receives, stream, sumInOrder,
                 "phase 2, the quantized parts of our sub-stripe");
  // With timing, the decodes queued by the exchange finish inside it (else they would count as the next step's).
  if (times != nullptr) GRADAGG_CUDA_CHECK(cudaStreamSynchronize(stream));
  const double scatterSeconds = clock.Lap();

  // 3. Re-quantize our sum with the second residual.
  quantizer_.Encode(sum, ElementType::kFloat32, errorFeedback_ ? ownResidual_.as<float>() : nullptr, ownLayout,
                    ownWire_.get(), stream);
  if (times != nullptr) GRADAGG_CUDA_CHECK(cudaStreamSynchronize(stream));
  const double requantizeSeconds = clock.Lap();

  // 4. All-gather the quantized sums into the stripe's wire image, and decode every owner's part. Every node decodes
  //    the same bytes, so every node counts the same non-finite buckets.
  GRADAGG_CUDA_CHECK(cudaMemsetAsync(nonFinite, 0, sizeof *nonFinite, stream));
  const ExchangeMessages gather = plan_.Gather(ownWire_.get(), stripeWire);
  const auto decodeInOrder = [&](int ownerRank) {
    const auto owner = static_cast<size_t>(ownerRank);
    const void* part = owner == position_.node ? ownWire_.get() : gather.receives[owner].data;
    decodeTimer.Time(stream, [&] {
      quantizer_.Decode(part, subLayouts_[owner], stripe + plan_.subStripes[owner].begin, ElementType::kFloat32, stream,
                        nonFinite);
    });
  };
  exchange_->Run(cross_, kGatherTag, gather.sends, gather.receives, stream, decodeInOrder,
                 "phase 2, the all-gather of the owners' quantized sums");
  unsigned long long nonFiniteBuckets = 0;
  GRADAGG_CUDA_CHECK(
      cudaMemcpyAsync(&nonFiniteBuckets, nonFinite, sizeof nonFiniteBuckets, cudaMemcpyDeviceToHost, stream));
  GRADAGG_CUDA_CHECK(cudaStreamSynchronize(stream));
  const double gatherSeconds = clock.Lap();

  lastBytesSent_ = plan_.bytesSent;
  lastFloatBytes_ = plan_.floatBytes;
  lastNonFiniteBuckets_ = static_cast<size_t>(nonFiniteBuckets);
  if (times != nullptr) {
    const double decodeSeconds = decodeTimer.Seconds();
    times->quantize += quantizeSeconds + requantizeSeconds;
    times->decode += decodeSeconds;
    times->exchange += scatterSeconds + gatherSeconds - decodeSeconds;
  }
}

}  // namespace gradagg
