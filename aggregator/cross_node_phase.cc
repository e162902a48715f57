#include "aggregator/cross_node_phase.h"

#include <algorithm>
#include <cstring>

#include "aggregator/partition.h"
#include "aggregator/stopwatch.h"
#include "mpi_glue/ordered_exchange.h"

namespace gradagg {
namespace {

constexpr int kScatterTag = 1;
constexpr int kGatherTag = 2;

size_t Words(size_t bytes) { return (bytes + sizeof(uint32_t) - 1) / sizeof(uint32_t); }

}  // namespace

CrossNodePhase::CrossNodePhase(MPI_Comm cross, const AggregatorOptions& options)
    : cross_(cross),
      position_(PositionIn(cross)),
      quantizer_(QuantizerConfigOf(options)),
      errorFeedback_(options.errorFeedback),
      quantizeOwnStripe_(options.quantizeOwnStripe),
      timeoutSeconds_(options.timeoutSeconds) {}

void CrossNodePhase::Reshape(const BucketLayout& layout) {
  if (shaped_ && layout == plan_.stripe) return;
  shaped_ = true;
  const size_t length = layout.elements();
  plan_ = ExchangePlan(layout, position_, quantizer_.config());
  const size_t ownCount = plan_.own.count;
  const size_t ownBytes = plan_.ownWireBytes;
  stripeResidual_.assign(length, 0.0f);
  ownResidual_.assign(ownCount, 0.0f);
  ownSum_.assign(ownCount, 0.0f);
  stripeWire_.assign(Words(plan_.stripeWireBytes), 0);
  ownWire_.assign(Words(ownBytes), 0);
  received_.assign(Words(ownBytes) * position_.nodes, 0);
}

void CrossNodePhase::ResetResiduals() {
  std::fill(stripeResidual_.begin(), stripeResidual_.end(), 0.0f);
  std::fill(ownResidual_.begin(), ownResidual_.end(), 0.0f);
}

void CrossNodePhase::Aggregate(float* stripe, const BucketLayout& layout, PhaseTimes* times) {
  Reshape(layout);
  const std::vector<BucketLayout>& layouts = plan_.subLayouts;
  const BucketLayout& ownLayout = layouts[position_.node];
  const ElementRange own = plan_.own;
  float* stripeResidual = errorFeedback_ ? stripeResidual_.data() : nullptr;
  auto* stripeWire = reinterpret_cast<unsigned char*>(stripeWire_.data());
  auto* received = reinterpret_cast<unsigned char*>(received_.data());
  Stopwatch clock;
  double decodeSeconds = 0.0;

  // 1. Quantize the stripe, one run of buckets per owner. Without quantizeOwnStripe our own part enters our sum
  //    exactly, its residual folded in and so consumed.
  for (size_t j = 0; j < position_.nodes; ++j) {
    const ElementRange part = plan_.subStripes[j];
    if (j == position_.node && !quantizeOwnStripe_) continue;
    quantizer_.Encode(stripe + part.begin, stripeResidual != nullptr ? stripeResidual + part.begin : nullptr,
                      layouts[j], stripeWire + plan_.wireOffsets[j]);
  }
  if (!quantizeOwnStripe_ && stripeResidual != nullptr) {
    for (size_t i = own.begin; i < own.end(); ++i) {
      stripe[i] += stripeResidual[i];
      stripeResidual[i] = 0.0f;
    }
  }
  const double quantizeSeconds = clock.Lap();

  // 2. Send each owner its part; sum the parts of ours in source-node order.
  const ExchangeMessages scatter = plan_.Scatter(stripeWire, received, Words(plan_.ownWireBytes) * sizeof(uint32_t));
  const auto sumInOrder = [&](int sourceRank) {
    Stopwatch decodeClock;
    const auto source = static_cast<size_t>(sourceRank);
    float* sum = ownSum_.data();
    if (source == position_.node && !quantizeOwnStripe_) {
      const float* exact = stripe + own.begin;
      for (size_t i = 0; i < own.count; ++i) sum[i] = source == 0 ? exact[i] : sum[i] + exact[i];
    } else {
      const void* part =
          source == position_.node ? stripeWire + plan_.wireOffsets[position_.node] : scatter.receives[source].data;
      if (source == 0) {
        quantizer_.Decode(part, ownLayout, sum);
      } else {
        quantizer_.DecodeAccumulate(part, ownLayout, sum);
      }
    }
    decodeSeconds += decodeClock.Lap();
  };
  ExchangeInRankOrder(cross_, kScatterTag, scatter.sends, scatter.receives, sumInOrder, kDefaultMaxMessageBytes,
                      timeoutSeconds_, "phase 2, the quantized parts of our sub-stripe");
  const double scatterSeconds = clock.Lap();

  // 3. Re-quantize our sum with the second residual.
  quantizer_.Encode(ownSum_.data(), errorFeedback_ ? ownResidual_.data() : nullptr, ownLayout, ownWire_.data());
  const double requantizeSeconds = clock.Lap();

  // 4. All-gather the quantized sums into the stripe's wire image, and decode every owner's part.
  //    Every node decodes the same bytes, so every node counts the same non-finite buckets.
  const ExchangeMessages gather = plan_.Gather(ownWire_.data(), stripeWire);
  size_t nonFinite = 0;
  const auto decodeInOrder = [&](int ownerRank) {
    Stopwatch decodeClock;
    const auto owner = static_cast<size_t>(ownerRank);
    const void* part =
        owner == position_.node ? static_cast<const void*>(ownWire_.data()) : gather.receives[owner].data;
    nonFinite += quantizer_.Decode(part, layouts[owner], stripe + plan_.subStripes[owner].begin);
    decodeSeconds += decodeClock.Lap();
  };
  ExchangeInRankOrder(cross_, kGatherTag, gather.sends, gather.receives, decodeInOrder, kDefaultMaxMessageBytes,
                      timeoutSeconds_, "phase 2, the all-gather of the owners' quantized sums");
  const double gatherSeconds = clock.Lap();

  lastBytesSent_ = plan_.bytesSent;
  lastFloatBytes_ = plan_.floatBytes;
  lastNonFiniteBuckets_ = nonFinite;
  if (times != nullptr) {
    times->quantize += quantizeSeconds + requantizeSeconds;
    times->decode += decodeSeconds;
    times->exchange += scatterSeconds + gatherSeconds - decodeSeconds;
  }
}

}  // namespace gradagg
