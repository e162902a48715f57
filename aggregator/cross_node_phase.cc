#include "aggregator/cross_node_phase.h"

#include <algorithm>
#include <cstring>

#include "aggregator/partition.h"
#include "aggregator/stopwatch.h"
#include "mpi_glue/mpi_error.h"
#include "mpi_glue/ordered_exchange.h"

namespace gradagg {
namespace {

constexpr int kScatterTag = 1;
constexpr int kGatherTag = 2;

size_t Words(size_t bytes) { return (bytes + sizeof(uint32_t) - 1) / sizeof(uint32_t); }

}  // namespace

CrossNodePhase::CrossNodePhase(MPI_Comm cross, const AggregatorOptions& options)
    : cross_(cross),
      quantizer_(QuantizerConfigOf(options)),
      errorFeedback_(options.errorFeedback),
      quantizeOwnStripe_(options.quantizeOwnStripe) {
  int node = 0;
  int nodes = 1;
  GRADAGG_MPI_CHECK(MPI_Comm_rank(cross_, &node));
  GRADAGG_MPI_CHECK(MPI_Comm_size(cross_, &nodes));
  node_ = static_cast<size_t>(node);
  nodes_ = static_cast<size_t>(nodes);
}

void CrossNodePhase::Reshape(size_t length) {
  if (shaped_ && length == length_) return;
  shaped_ = true;
  length_ = length;
  subStripes_ = SplitIntoBucketRuns(length, quantizer_.config().bucketSize, nodes_);
  wireOffsets_.resize(nodes_);
  for (size_t j = 0; j < nodes_; ++j) wireOffsets_[j] = quantizer_.WireBytes(subStripes_[j].begin);
  const size_t ownCount = subStripes_[node_].count;
  const size_t ownBytes = quantizer_.WireBytes(ownCount);
  stripeResidual_.assign(length, 0.0f);
  ownResidual_.assign(ownCount, 0.0f);
  ownSum_.assign(ownCount, 0.0f);
  stripeWire_.assign(Words(quantizer_.WireBytes(length)), 0);
  ownWire_.assign(Words(ownBytes), 0);
  received_.assign(Words(ownBytes) * nodes_, 0);
}

void CrossNodePhase::ResetResiduals() {
  std::fill(stripeResidual_.begin(), stripeResidual_.end(), 0.0f);
  std::fill(ownResidual_.begin(), ownResidual_.end(), 0.0f);
}

void CrossNodePhase::Aggregate(float* stripe, size_t length, PhaseTimes* times) {
  Reshape(length);
  const ElementRange own = subStripes_[node_];
  const size_t ownBytes = quantizer_.WireBytes(own.count);
  float* stripeResidual = errorFeedback_ ? stripeResidual_.data() : nullptr;
  auto* stripeWire = reinterpret_cast<unsigned char*>(stripeWire_.data());
  auto* received = reinterpret_cast<unsigned char*>(received_.data());
  Stopwatch clock;
  double decodeSeconds = 0.0;

  // 1. Quantize the stripe, one run of buckets per owner. Without quantizeOwnStripe our own part enters our sum
  //    exactly, its residual folded in and so consumed.
  for (size_t j = 0; j < nodes_; ++j) {
    const ElementRange part = subStripes_[j];
    if (j == node_ && !quantizeOwnStripe_) continue;
    quantizer_.Encode(stripe + part.begin, stripeResidual != nullptr ? stripeResidual + part.begin : nullptr,
                      part.count, stripeWire + wireOffsets_[j]);
  }
  if (!quantizeOwnStripe_ && stripeResidual != nullptr) {
    for (size_t i = own.begin; i < own.end(); ++i) {
      stripe[i] += stripeResidual[i];
      stripeResidual[i] = 0.0f;
    }
  }
  const double quantizeSeconds = clock.Lap();

  // 2. Send each owner its part; sum the parts of ours in source-node order.
  std::vector<SendBuffer> sends(nodes_);
  std::vector<ReceiveBuffer> receives(nodes_);
  for (size_t j = 0; j < nodes_; ++j) {
    if (j == node_) continue;
    sends[j] = {stripeWire + wireOffsets_[j], quantizer_.WireBytes(subStripes_[j].count)};
    receives[j] = {received + j * Words(ownBytes) * sizeof(uint32_t), ownBytes};
  }
  ExchangeInRankOrder(cross_, kScatterTag, sends, receives, [&](int sourceRank) {
    Stopwatch decodeClock;
    const auto source = static_cast<size_t>(sourceRank);
    float* sum = ownSum_.data();
    if (source == node_ && !quantizeOwnStripe_) {
      const float* exact = stripe + own.begin;
      for (size_t i = 0; i < own.count; ++i) sum[i] = source == 0 ? exact[i] : sum[i] + exact[i];
    } else {
      const void* part = source == node_ ? stripeWire + wireOffsets_[node_] : receives[source].data;
      if (source == 0) {
        quantizer_.Decode(part, own.count, sum);
      } else {
        quantizer_.DecodeAccumulate(part, own.count, sum);
      }
    }
    decodeSeconds += decodeClock.Lap();
  });
  const double scatterSeconds = clock.Lap();

  // 3. Re-quantize our sum with the second residual.
  quantizer_.Encode(ownSum_.data(), errorFeedback_ ? ownResidual_.data() : nullptr, own.count, ownWire_.data());
  const double requantizeSeconds = clock.Lap();

  // 4. All-gather the quantized sums into the stripe's wire image, and decode every owner's part.
  for (size_t j = 0; j < nodes_; ++j) {
    if (j == node_) continue;
    sends[j] = {ownWire_.data(), ownBytes};
    receives[j] = {stripeWire + wireOffsets_[j], quantizer_.WireBytes(subStripes_[j].count)};
  }
  ExchangeInRankOrder(cross_, kGatherTag, sends, receives, [&](int ownerRank) {
    Stopwatch decodeClock;
    const auto owner = static_cast<size_t>(ownerRank);
    const void* part = owner == node_ ? static_cast<const void*>(ownWire_.data()) : receives[owner].data;
    quantizer_.Decode(part, subStripes_[owner].count, stripe + subStripes_[owner].begin);
    decodeSeconds += decodeClock.Lap();
  });
  const double gatherSeconds = clock.Lap();

  lastBytesSent_ = 0;
  lastFloatBytes_ = 0;
  for (size_t j = 0; j < nodes_; ++j) {
    if (j == node_) continue;
    lastBytesSent_ += sends[j].bytes + quantizer_.WireBytes(subStripes_[j].count);
    lastFloatBytes_ += (own.count + subStripes_[j].count) * sizeof(float);
  }
  if (times != nullptr) {
    times->quantize += quantizeSeconds + requantizeSeconds;
    times->decode += decodeSeconds;
    times->exchange += scatterSeconds + gatherSeconds - decodeSeconds;
  }
}

}  // namespace gradagg
