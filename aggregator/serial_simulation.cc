#include "aggregator/serial_simulation.h"

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "aggregator/partition.h"
#include "quantize/quantizer.h"

namespace gradagg {
namespace {

using Floats = std::vector<float>;

Floats Slice(const Floats& values, ElementRange range) {
  return Floats(values.begin() + static_cast<std::ptrdiff_t>(range.begin),
                values.begin() + static_cast<std::ptrdiff_t>(range.end()));
}

void Place(Floats& values, ElementRange range, const Floats& part) {
  std::copy(part.begin(), part.end(), values.begin() + static_cast<std::ptrdiff_t>(range.begin));
}

// A sum that starts from its first term: sum = terms[0]; sum = sum + terms[k] for k = 1, 2, ...
void AddInto(Floats& sum, const Floats& term, bool first) {
  for (size_t i = 0; i < sum.size(); ++i) sum[i] = first ? term[i] : sum[i] + term[i];
}

struct Encoded {
  std::vector<uint32_t> words;
};

Encoded Encode(const Quantizer& quantizer, const Floats& values, Floats* residual, const BucketLayout& layout) {
  Encoded encoded;
  encoded.words.resize((quantizer.WireBytes(layout) + 3) / 4);
  quantizer.Encode(values.data(), residual != nullptr ? residual->data() : nullptr, layout, encoded.words.data());
  return encoded;
}

// Decodes into a new vector; adds the bucket count of non-finite buckets to *nonFinite when it is not null.
Floats Decode(const Quantizer& quantizer, const Encoded& encoded, const BucketLayout& layout,
              size_t* nonFinite = nullptr) {
  Floats values(layout.elements());
  const size_t count = quantizer.Decode(encoded.words.data(), layout, values.data());
  if (nonFinite != nullptr) *nonFinite += count;
  return values;
}

// What a source sends for a part: the decode of its encoding.
Floats RoundTrip(const Quantizer& quantizer, const Floats& values, Floats* residual, const BucketLayout& layout) {
  return Decode(quantizer, Encode(quantizer, values, residual, layout), layout);
}

}  // namespace

SerialSimulation::SerialSimulation(std::vector<RankPlacement> placements, const AggregatorOptions& options)
    : placements_(std::move(placements)), options_(options) {
  if (placements_.empty()) throw std::invalid_argument("SerialSimulation: no ranks");
  for (const RankPlacement& p : placements_) {
    nodes_ = std::max(nodes_, static_cast<size_t>(p.node) + 1);
    ranksPerNode_ = std::max(ranksPerNode_, static_cast<size_t>(p.local) + 1);
  }
  rankAt_.assign(nodes_, std::vector<int>(ranksPerNode_, -1));
  for (size_t rank = 0; rank < placements_.size(); ++rank) {
    int& slot = rankAt_[static_cast<size_t>(placements_[rank].node)][static_cast<size_t>(placements_[rank].local)];
    if (slot != -1) throw std::invalid_argument("SerialSimulation: two ranks share a placement");
    slot = static_cast<int>(rank);
  }
  if (nodes_ * ranksPerNode_ != placements_.size()) {
    throw std::invalid_argument("SerialSimulation: placements are not " + std::to_string(nodes_) + " nodes x " +
                                std::to_string(ranksPerNode_) + " ranks");
  }
}

void SerialSimulation::ResetResiduals() {
  for (Floats& r : stripeResidual_) std::fill(r.begin(), r.end(), 0.0f);
  for (Floats& r : ownResidual_) std::fill(r.begin(), r.end(), 0.0f);
}

std::vector<float> SerialSimulation::Run(const std::vector<std::vector<float>>& inputs,
                                         const std::vector<bool>& contributes, const std::vector<size_t>& tensors) {
  if (inputs.size() != placements_.size()) throw std::invalid_argument("SerialSimulation: one input per rank");
  const size_t length = inputs[0].size();
  for (const Floats& input : inputs) {
    if (input.size() != length) throw std::invalid_argument("SerialSimulation: inputs differ in length");
  }
  const BucketLayout layout =
      tensors.empty() ? BucketLayout::Uniform(length, options_.bucketSize) : BucketLayout(tensors, options_.bucketSize);
  if (layout.elements() != length) throw std::invalid_argument("SerialSimulation: tensors do not add up to inputs");
  const Quantizer quantizer(QuantizerConfigOf(options_));
  const std::vector<ElementRange> shards = SplitIntoBucketRuns(layout, ranksPerNode_);
  std::vector<BucketLayout> shardLayouts;
  for (const ElementRange& shard : shards) shardLayouts.push_back(layout.Slice(shard.begin, shard.count));
  if (stripeResidual_.empty() || layout != layout_) {
    layout_ = layout;
    stripeResidual_.assign(inputs.size(), Floats());
    ownResidual_.assign(inputs.size(), Floats());
    for (size_t node = 0; node < nodes_; ++node) {
      for (size_t local = 0; local < ranksPerNode_; ++local) {
        const auto rank = static_cast<size_t>(rankAt_[node][local]);
        stripeResidual_[rank].assign(shards[local].count, 0.0f);
        ownResidual_[rank].assign(SplitIntoBucketRuns(shardLayouts[local], nodes_)[node].count, 0.0f);
      }
    }
  }

  lastNonFiniteBuckets_ = 0;
  Floats result(length, 0.0f);
  for (size_t local = 0; local < ranksPerNode_; ++local) {
    const ElementRange shard = shards[local];

    // Phase 1: on every node, stripe `local` is the sum of the node's shards in local-rank order.
    std::vector<Floats> stripes(nodes_, Floats(shard.count));
    for (size_t node = 0; node < nodes_; ++node) {
      for (size_t k = 0; k < ranksPerNode_; ++k) {
        const auto rank = static_cast<size_t>(rankAt_[node][k]);
        const bool counts = contributes.empty() || contributes[rank];
        const Floats part = counts ? Slice(inputs[rank], shard) : Floats(shard.count, 0.0f);
        AddInto(stripes[node], part, k == 0);
      }
    }
    if (nodes_ == 1) {
      Place(result, shard, stripes[0]);
      continue;
    }

    // Phase 2: every node quantizes its stripe per owner; owner j sums its parts in node order, re-quantizes,
    // and every node decodes that.
    const std::vector<ElementRange> parts = SplitIntoBucketRuns(shardLayouts[local], nodes_);
    std::vector<BucketLayout> partLayouts;
    for (const ElementRange& part : parts) partLayouts.push_back(shardLayouts[local].Slice(part.begin, part.count));
    std::vector<std::vector<Floats>> contribution(nodes_, std::vector<Floats>(nodes_));  // [source][owner]
    for (size_t source = 0; source < nodes_; ++source) {
      const auto rank = static_cast<size_t>(rankAt_[source][local]);
      for (size_t owner = 0; owner < nodes_; ++owner) {
        Floats values = Slice(stripes[source], parts[owner]);
        const BucketLayout& partLayout = partLayouts[owner];
        if (!options_.errorFeedback) {
          contribution[source][owner] = owner == source && !options_.quantizeOwnStripe
                                            ? values
                                            : RoundTrip(quantizer, values, nullptr, partLayout);
          continue;
        }
        Floats residual = Slice(stripeResidual_[rank], parts[owner]);
        if (owner == source && !options_.quantizeOwnStripe) {
          for (size_t i = 0; i < values.size(); ++i) values[i] += residual[i];
          std::fill(residual.begin(), residual.end(), 0.0f);
          contribution[source][owner] = values;
        } else {
          contribution[source][owner] = RoundTrip(quantizer, values, &residual, partLayout);
        }
        Place(stripeResidual_[rank], parts[owner], residual);
      }
    }
    Floats stripe(shard.count);
    for (size_t owner = 0; owner < nodes_; ++owner) {
      Floats sum(parts[owner].count);
      for (size_t source = 0; source < nodes_; ++source) AddInto(sum, contribution[source][owner], source == 0);
      const auto ownerRank = static_cast<size_t>(rankAt_[owner][local]);
      Floats* residual = options_.errorFeedback ? &ownResidual_[ownerRank] : nullptr;
      const Encoded aggregate = Encode(quantizer, sum, residual, partLayouts[owner]);
      Place(stripe, parts[owner], Decode(quantizer, aggregate, partLayouts[owner], &lastNonFiniteBuckets_));
    }
    Place(result, shard, stripe);
  }
  return result;
}

}  // namespace gradagg
