#include "aggregator/cross_node_phase.h"

#include <utility>

#include "aggregator/partition.h"
#include "aggregator/stopwatch.h"

namespace gradagg {
namespace {

constexpr int kScatterTag = 1;
constexpr int kGatherTag = 2;

size_t RoundUp(size_t bytes, size_t alignment) { return (bytes + alignment - 1) / alignment * alignment; }

}  // namespace

CrossNodePhase::CrossNodePhase(MPI_Comm cross, const AggregatorOptions& options,
                               std::unique_ptr<CrossNodeBackend> backend)
    : cross_(cross),
      position_(PositionIn(cross)),
      quantizer_(QuantizerConfigOf(options)),
      errorFeedback_(options.errorFeedback),
      quantizeOwnStripe_(options.quantizeOwnStripe),
      backend_(std::move(backend)) {}

void CrossNodePhase::Reshape(const BucketLayout& layout) {
  if (shaped_ && layout == plan_.stripe) return;
  shaped_ = true;
  plan_ = ExchangePlan(layout, position_, quantizer_);
  backend_->SetLayouts(plan_.subLayouts);
  const size_t alignment = backend_->SlotAlignment();
  const size_t ownBytes = plan_.own.count * sizeof(float);
  ownSlotBytes_ = RoundUp(plan_.ownWireBytes, alignment);
  // Fresh memory is zeroed: a new layout starts with fresh residuals.
  CrossNodeBackend& backend = *backend_;
  stripeResidual_ = backend.Allocate(layout.elements() * sizeof(float));
  ownResidual_ = backend.Allocate(ownBytes);
  ownSum_ = backend.Allocate(ownBytes);
  stripeWire_ = backend.Allocate(RoundUp(plan_.stripeWireBytes, alignment));
  ownWire_ = backend.Allocate(ownSlotBytes_);
  received_ = backend.Allocate(ownSlotBytes_ * position_.nodes);
}

void CrossNodePhase::ResetResiduals() {
  if (!shaped_) return;
  backend_->Zero(stripeResidual_.get(), plan_.stripe.elements() * sizeof(float));
  backend_->Zero(ownResidual_.get(), plan_.own.count * sizeof(float));
}

void CrossNodePhase::Aggregate(float* stripe, const BucketLayout& layout, PhaseTimes* times) {
  Reshape(layout);
  CrossNodeBackend& backend = *backend_;
  const size_t ownIndex = position_.node;
  const ElementRange own = plan_.own;
  float* stripeResidual = errorFeedback_ ? static_cast<float*>(stripeResidual_.get()) : nullptr;
  float* ownResidual = errorFeedback_ ? static_cast<float*>(ownResidual_.get()) : nullptr;
  auto* stripeWire = static_cast<unsigned char*>(stripeWire_.get());
  auto* received = static_cast<unsigned char*>(received_.get());
  auto* sum = static_cast<float*>(ownSum_.get());
  backend.StartCall(times != nullptr);
  Stopwatch clock;

  // 1. Quantize the stripe, one run of buckets per owner. Without quantizeOwnStripe our own part enters our sum
  //    exactly, its residual folded in and so consumed.
  for (size_t j = 0; j < position_.nodes; ++j) {
    if (j == ownIndex && !quantizeOwnStripe_) continue;
    const size_t begin = plan_.subStripes[j].begin;
    backend.Encode(stripe + begin, stripeResidual != nullptr ? stripeResidual + begin : nullptr, j,
                   stripeWire + plan_.wireOffsets[j]);
  }
  if (!quantizeOwnStripe_ && stripeResidual != nullptr) {
    backend.Fold(stripe + own.begin, stripeResidual + own.begin, own.count);
  }
  backend.Settle();
  const double quantizeSeconds = clock.Lap();

  // 2. Send each owner its part; sum the parts of ours in source-node order.
  const ExchangeMessages scatter = plan_.Scatter(stripeWire, received, ownSlotBytes_);
  const auto sumInOrder = [&](int sourceRank) {
    const auto source = static_cast<size_t>(sourceRank);
    backend.TimeDecode([&] {
      if (source == ownIndex && !quantizeOwnStripe_) {
        const float* exact = stripe + own.begin;
        if (source == 0) {
          backend.Copy(sum, exact, own.count);
        } else {
          backend.Add(sum, exact, own.count);
        }
        return;
      }
      const void* part = source == ownIndex ? stripeWire + plan_.wireOffsets[ownIndex] : scatter.receives[source].data;
      if (source == 0) {
        backend.Decode(part, ownIndex, sum, false);
      } else {
        backend.DecodeAccumulate(part, ownIndex, sum);
      }
    });
  };
  backend.Exchange(cross_, kScatterTag, scatter.sends, scatter.receives, sumInOrder,
                   "phase 2, the quantized parts of our sub-stripe");
  backend.Settle();  // timed: the decodes the exchange queued belong to this step
  const double scatterSeconds = clock.Lap();

  // 3. Re-quantize our sum with the second residual.
  backend.Encode(sum, ownResidual, ownIndex, ownWire_.get());
  backend.Settle();
  const double requantizeSeconds = clock.Lap();

  // 4. All-gather the quantized sums into the stripe's wire image, and decode every owner's part. Every node decodes
  //    the same bytes, so every node counts the same non-finite buckets.
  const ExchangeMessages gather = plan_.Gather(ownWire_.get(), stripeWire);
  const auto decodeInOrder = [&](int ownerRank) {
    const auto owner = static_cast<size_t>(ownerRank);
    const void* part = owner == ownIndex ? ownWire_.get() : gather.receives[owner].data;
    backend.TimeDecode([&] { backend.Decode(part, owner, stripe + plan_.subStripes[owner].begin, true); });
  };
  backend.Exchange(cross_, kGatherTag, gather.sends, gather.receives, decodeInOrder,
                   "phase 2, the all-gather of the owners' quantized sums");
  lastNonFiniteBuckets_ = backend.FinishCall();
  const double gatherSeconds = clock.Lap();

  lastBytesSent_ = plan_.bytesSent;
  lastFloatBytes_ = plan_.floatBytes;
  if (times != nullptr) {
    const double decodeSeconds = backend.DecodeSeconds();
    times->quantize += quantizeSeconds + requantizeSeconds;
    times->decode += decodeSeconds;
    times->exchange += scatterSeconds + gatherSeconds - decodeSeconds;
  }
}

}  // namespace gradagg
