#include "aggregator/cross_node_phase.h"

#include <stdexcept>
#include <string>
#include <utility>

#include "aggregator/partition.h"
#include "aggregator/stopwatch.h"
#include "common/call_timeline.h"

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
      pieceBytes_(options.pieceBytes),
      backend_(std::move(backend)) {}

void CrossNodePhase::Reshape(const BucketLayout& layout) {
  if (shaped_ && layout == plan_.stripe) return;
  shaped_ = true;
  plan_ = ExchangePlan(layout, position_, quantizer_, pieceBytes_);
  backend_->SetLayouts(plan_.partLayouts, plan_.ownLayout);
  const size_t alignment = backend_->SlotAlignment();
  const size_t ownBytes = plan_.own.count * sizeof(float);
  ownSlotBytes_ = RoundUp(plan_.ownWireBytes, alignment);
  // Fresh memory is zeroed: a new layout starts with fresh residuals.
  CrossNodeBackend& backend = *backend_;
  stripeResidual_ = backend.Allocate(layout.elements() * sizeof(float));
  ownResidual_ = backend.Allocate(ownBytes);
  ownSum_ = backend.Allocate(SumsInEncode() ? 0 : ownBytes);
  ownStripeResidualZero_ = true;
  stripeWire_ = backend.AllocateMessages(RoundUp(plan_.stripeWireBytes, alignment));
  ownWire_ = backend.AllocateMessages(ownSlotBytes_);
  received_ = backend.AllocateMessages(ownSlotBytes_ * position_.nodes);
}

void CrossNodePhase::ResetResiduals() {
  if (!shaped_) return;
  backend_->Zero(stripeResidual_.get(), plan_.stripe.elements() * sizeof(float));
  backend_->Zero(ownResidual_.get(), plan_.own.count * sizeof(float));
  ownStripeResidualZero_ = true;
}

void CrossNodePhase::ExportResiduals(std::vector<float>* stripe, std::vector<float>* own) const {
  stripe->assign(shaped_ ? plan_.stripe.elements() : 0, 0.0f);
  own->assign(shaped_ ? plan_.own.count : 0, 0.0f);
  backend_->Download(stripe->data(), stripeResidual_.get(), stripe->size() * sizeof(float));
  backend_->Download(own->data(), ownResidual_.get(), own->size() * sizeof(float));
}

void CrossNodePhase::ImportResiduals(std::vector<float> stripe, std::vector<float> own) {
  importPending_ = true;
  importedStripe_ = std::move(stripe);
  importedOwn_ = std::move(own);
}

void CrossNodePhase::InstallImportedResiduals() {
  if (!importPending_) return;
  importPending_ = false;
  if (importedStripe_.size() != plan_.stripe.elements() || importedOwn_.size() != plan_.own.count) {
    throw std::logic_error("CrossNodePhase: imported residuals of " + std::to_string(importedStripe_.size()) + " + " +
                           std::to_string(importedOwn_.size()) + " elements for a stripe of " +
                           std::to_string(plan_.stripe.elements()) + " + " + std::to_string(plan_.own.count));
  }
  backend_->Upload(stripeResidual_.get(), importedStripe_.data(), importedStripe_.size() * sizeof(float));
  backend_->Upload(ownResidual_.get(), importedOwn_.data(), importedOwn_.size() * sizeof(float));
  ownStripeResidualZero_ = false;
  importedStripe_ = std::vector<float>();
  importedOwn_ = std::vector<float>();
}

void CrossNodePhase::Aggregate(float* stripe, const BucketLayout& layout, PhaseTimes* times,
                               const ValueTerms* values, const ValueCopies* copies) {
  if (values != nullptr && !TakesValueTerms())
    throw std::logic_error("CrossNodePhase: the stripe's values as terms, but this phase reads them exactly");
  if (copies != nullptr && values == nullptr)
    throw std::logic_error("CrossNodePhase: copies of the aggregate without the stripe's values as terms");
  Reshape(layout);
  InstallImportedResiduals();
  CrossNodeBackend& backend = *backend_;
  const size_t ownIndex = position_.node;
  const size_t lastNode = position_.nodes - 1;
  const ElementRange own = plan_.own;
  float* stripeResidual = errorFeedback_ ? static_cast<float*>(stripeResidual_.get()) : nullptr;
  float* ownResidual = errorFeedback_ ? static_cast<float*>(ownResidual_.get()) : nullptr;
  auto* stripeWire = static_cast<unsigned char*>(stripeWire_.get());
  auto* ownWire = static_cast<unsigned char*>(ownWire_.get());
  auto* received = static_cast<unsigned char*>(received_.get());
  auto* sum = static_cast<float*>(ownSum_.get());
  backend.StartCall(times != nullptr);
  Stopwatch clock;

  // 1-3. Each part (a piece of an owner's sub-stripe) is quantized just before it is sent (beforeSend), so the first
  //      part is on the wire while the next is quantized; our own parts once every part is sent (afterSends), while
  //      they travel. Each piece of our sub-stripe is summed in source-node order as its parts arrive and re-quantized
  //      with the second residual while later pieces travel; a last term that is a wire image (any term, with two
  //      nodes) is added inside that re-quantization (EncodeSum). Without quantizeOwnStripe our own part enters our
  //      sum exactly, its residual folded in and so consumed (the fold is skipped while that residual is known to be
  //      zero: it is never written again). With value terms the stripe's values are never read: every quantization
  //      sums the terms as it reads them.
  // Quantizes the stripe's elements from `begin` on, laid out as the backend's layouts[index], into `wire`.
  const auto quantizeStripe = [&](size_t begin, size_t index, unsigned char* wire) {
    float* const residual = stripeResidual != nullptr ? stripeResidual + begin : nullptr;
    backend.Time(CodecStep::kEncode, [&] {
      if (values != nullptr) {
        backend.EncodeTerms(values->Shifted(begin), residual, index, wire);
      } else {
        backend.Encode(stripe + begin, residual, index, wire);
      }
    });
  };
  const auto quantizePart = [&](int partIndex) {
    const auto part = static_cast<size_t>(partIndex);
    quantizeStripe(plan_.parts[part].begin, part, stripeWire + plan_.StripeWireOffset(part));
  };
  const ExchangeMessages scatter = plan_.Scatter(stripeWire, received, ownSlotBytes_);
  const size_t ownLayout = plan_.parts.size();  // the backend's index of our sub-stripe whole
  const auto prepareOwnParts = [&] {
    if (quantizeOwnStripe_) {  // every part of it in one call: the same bytes as part by part
      quantizeStripe(own.begin, ownLayout, stripeWire + plan_.wireOffsets[ownIndex]);
    } else if (stripeResidual != nullptr && !ownStripeResidualZero_) {  // counted with the encodes, as it replaces one
      backend.Time(CodecStep::kEncode,
                   [&] { backend.Fold(stripe + own.begin, stripeResidual + own.begin, own.count); });
      ownStripeResidualZero_ = true;
    }
  };
  // The wire image of `part`'s term of our sum, or nullptr for our own part entering exactly.
  const auto termWire = [&](size_t part) -> const void* {
    if (plan_.Owner(part) != ownIndex) return scatter.receives[part].data;
    return quantizeOwnStripe_ ? stripeWire + plan_.StripeWireOffset(plan_.OwnPart(part)) : nullptr;
  };
  const auto sumInOrder = [&](int partIndex) {
    const auto part = static_cast<size_t>(partIndex);
    const size_t source = plan_.Owner(part);
    const size_t ownPart = plan_.OwnPart(part);
    const ElementRange piece = plan_.parts[ownPart];
    const size_t pieceOffset = piece.begin - own.begin;  // in our sub-stripe
    float* pieceSum = sum != nullptr ? sum + pieceOffset : nullptr;  // none with SumsInEncode
    const float* exact = stripe + piece.begin;
    float* residual = ownResidual != nullptr ? ownResidual + pieceOffset : nullptr;
    void* sumWire = ownWire + plan_.partWireOffsets[ownPart];
    const void* wire = termWire(part);
    if (SumsInEncode()) {  // one pass once the second term is here; exact + other == other + exact (but NaN payloads)
      if (source != lastNode) return;
      const void* node0 = termWire(part - source);
      const void* node1 = termWire(part - source + 1);
      const SumTerm first = node0 != nullptr && node1 != nullptr ? SumTerm{nullptr, node0} : SumTerm{exact, nullptr};
      const void* addend = node1 != nullptr ? node1 : node0;
      backend.Time(CodecStep::kEncode, [&] { backend.EncodeSum(first, addend, residual, ownPart, sumWire); });
      return;
    }
    if (source == lastNode && source != 0 && wire != nullptr) {
      backend.Time(CodecStep::kEncode,
                   [&] { backend.EncodeSum(SumTerm{pieceSum, nullptr}, wire, residual, ownPart, sumWire); });
      return;
    }
    backend.Time(CodecStep::kDecode, [&] {
      if (wire == nullptr) {
        if (source == 0) {
          backend.Copy(pieceSum, exact, piece.count);
        } else {
          backend.Add(pieceSum, exact, piece.count);
        }
      } else if (source == 0) {
        backend.Decode(wire, ownPart, pieceSum, false);
      } else {
        backend.DecodeAccumulate(wire, ownPart, pieceSum);
      }
    });
    if (source != lastNode) return;
    backend.Time(CodecStep::kEncode, [&] { backend.Encode(pieceSum, residual, ownPart, sumWire); });
  };
  backend.Exchange(cross_, kScatterTag, scatter.sends, scatter.receives, quantizePart, prepareOwnParts, sumInOrder,
                   "phase 2, the quantized parts of our sub-stripe");
  call_timeline::Note("scattered and sum encoded");

  // 4. All-gather the quantized sums into the stripe's wire image, and decode every owner's part. Every node decodes
  //    the same bytes, so every node counts the same non-finite buckets. The parts fill disjoint ranges, so our own
  //    are decoded while the others travel, and each other as it arrives.
  //    With copies, every decode writes every copy (the node's all-gather done here).
  const ExchangeMessages gather = plan_.Gather(ownWire, stripeWire);
  const auto decodeInto = [&](const void* wire, size_t index, size_t begin) {
    backend.Time(CodecStep::kDecode, [&] {
      if (copies != nullptr) {
        backend.DecodeCopies(wire, index, copies->Shifted(begin), true);
      } else {
        backend.Decode(wire, index, stripe + begin, true);
      }
    });
  };
  const auto decodePart = [&](size_t part, const void* wire) { decodeInto(wire, part, plan_.parts[part].begin); };
  const auto decodeOwnParts = [&] { decodeInto(ownWire, ownLayout, own.begin); };  // in one call
  const auto decodeArrivedPart = [&](int partIndex) {
    const auto part = static_cast<size_t>(partIndex);
    if (plan_.Owner(part) != ownIndex) decodePart(part, gather.receives[part].data);
  };
  backend.Exchange(cross_, kGatherTag, gather.sends, gather.receives, nullptr, decodeOwnParts, decodeArrivedPart,
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
