#include "aggregator/cross_node_phase.h"

#include <utility>

#include "aggregator/partition.h"
#include "aggregator/stopwatch.h"
#include "ground/call_timeline.h"

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
  stripeWire_ = backend.AllocateMessages(RoundUp(plan_.stripeWireBytes, alignment));
  ownWire_ = backend.AllocateMessages(ownSlotBytes_);
  received_ = backend.AllocateMessages(ownSlotBytes_ * position_.nodes);
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

  // 1-2. Each owner's part is quantized just before it is sent (beforeSend), so the first part is on the wire while
  //      the next is quantized; our own part once every part is sent (afterSends), while they travel. The parts of
  //      our sub-stripe are summed in source-node order as they arrive. Without quantizeOwnStripe our own part
  //      enters our sum exactly, its residual folded in and so consumed.
  const auto quantizePart = [&](int ownerRank) {
    const size_t begin = plan_.subStripes[static_cast<size_t>(ownerRank)].begin;
    backend.Time(CodecStep::kEncode, [&] {
      backend.Encode(stripe + begin, stripeResidual != nullptr ? stripeResidual + begin : nullptr,
                     static_cast<size_t>(ownerRank), stripeWire + plan_.wireOffsets[static_cast<size_t>(ownerRank)]);
    });
  };
  const ExchangeMessages scatter = plan_.Scatter(stripeWire, received, ownSlotBytes_);
  const auto prepareOwnPart = [&] {
    if (quantizeOwnStripe_) {
      quantizePart(static_cast<int>(ownIndex));
    } else if (stripeResidual != nullptr) {  // counted with the encodes, as it replaces one
      backend.Time(CodecStep::kEncode,
                   [&] { backend.Fold(stripe + own.begin, stripeResidual + own.begin, own.count); });
    }
  };
  const auto sumInOrder = [&](int sourceRank) {
    const auto source = static_cast<size_t>(sourceRank);
    backend.Time(CodecStep::kDecode, [&] {
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
  backend.Exchange(cross_, kScatterTag, scatter.sends, scatter.receives, quantizePart, prepareOwnPart, sumInOrder,
                   "phase 2, the quantized parts of our sub-stripe");
  call_timeline::Note("scattered");

  // 3. Re-quantize our sum with the second residual.
  backend.Time(CodecStep::kEncode, [&] { backend.Encode(sum, ownResidual, ownIndex, ownWire_.get()); });
  call_timeline::Note("sum encoded");

  // 4. All-gather the quantized sums into the stripe's wire image, and decode every owner's part. Every node decodes
  //    the same bytes, so every node counts the same non-finite buckets. The parts fill disjoint ranges, so our own
  //    is decoded while the others travel, and each other as it arrives.
  const ExchangeMessages gather = plan_.Gather(ownWire_.get(), stripeWire);
  const auto decodePart = [&](size_t owner, const void* part) {
    backend.Time(CodecStep::kDecode,
                 [&] { backend.Decode(part, owner, stripe + plan_.subStripes[owner].begin, true); });
  };
  const auto decodeOwnPart = [&] { decodePart(ownIndex, ownWire_.get()); };
  const auto decodeArrivedPart = [&](int ownerRank) {
    const auto owner = static_cast<size_t>(ownerRank);
    if (owner != ownIndex) decodePart(owner, gather.receives[owner].data);
  };
  backend.Exchange(cross_, kGatherTag, gather.sends, gather.receives, nullptr, decodeOwnPart, decodeArrivedPart,
                   "phase 2, the all-gather of the owners' quantized sums");
  call_timeline::Note("gathered");
  lastNonFiniteBuckets_ = backend.FinishCall();
  call_timeline::Note("finished");
  const double seconds = clock.Lap();

  lastBytesSent_ = plan_.bytesSent;
  lastFloatBytes_ = plan_.floatBytes;
  if (times != nullptr) {  // the exchange's share: the time not spent in the codec, waiting for the network
    const double quantizeSeconds = backend.Seconds(CodecStep::kEncode);
    const double decodeSeconds = backend.Seconds(CodecStep::kDecode);
    times->quantize += quantizeSeconds;
    times->decode += decodeSeconds;
    times->exchange += seconds - quantizeSeconds - decodeSeconds;
  }
}

}  // namespace gradagg
