// Phase 2's plan cut into pieces: the parts tile each sub-stripe in whole buckets, their codes tile its wire image,
// no piece's codes exceed the piece size where buckets allow, and the messages point where the plan says.
#include "aggregator/exchange_plan.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "quantize/wire_format.h"

namespace gradagg {
namespace {

QuantizerConfig Bits(int bits) {
  QuantizerConfig config;
  config.bits = bits;
  return config;
}

// Three tensors, so pieces meet tensor boundaries and short buckets.
BucketLayout Tensors() { return BucketLayout({70001, 333, 29000}, 96); }

TEST(ExchangePlan, PartsTileEverySubStripeAndItsWireImage) {
  for (int bits : {1, 4, 32}) {
    for (size_t nodes : {1, 2, 3}) {
      for (size_t pieceBytes : {size_t{0}, size_t{1}, size_t{1000}, size_t{16384}}) {
        const ExchangePlan plan(Tensors(), NodePosition{nodes - 1, nodes}, Bits(bits), pieceBytes);
        ASSERT_EQ(plan.parts.size(), plan.pieces * nodes);
        for (size_t j = 0; j < nodes; ++j) {
          size_t nextElement = plan.subStripes[j].begin;
          size_t nextByte = 0;
          for (size_t piece = 0; piece < plan.pieces; ++piece) {
            const size_t part = piece * nodes + j;
            EXPECT_EQ(plan.Owner(part), j);
            EXPECT_EQ(plan.parts[part].begin, nextElement) << "part " << part;
            EXPECT_EQ(plan.partWireOffsets[part], nextByte) << "part " << part;
            EXPECT_EQ(plan.partWireBytes[part], WireBytes(plan.partLayouts[part], bits));
            EXPECT_EQ(plan.partLayouts[part], Tensors().Slice(plan.parts[part].begin, plan.parts[part].count));
            nextElement = plan.parts[part].end();
            nextByte += plan.partWireBytes[part];
          }
          EXPECT_EQ(nextElement, plan.subStripes[j].end());
          EXPECT_EQ(nextByte, plan.wireBytes[j]);
        }
      }
    }
  }
}

TEST(ExchangePlan, PiecesFollowThePieceSizeUpToOnePerBucketAndTheMessageCap) {
  const BucketLayout layout = Tensors();  // 1 bit: about 2.3 MB of floats, 103 KB of codes; 2 nodes: 52 KB each
  EXPECT_EQ(ExchangePlan(layout, {0, 2}, Bits(1), 0).pieces, 1u);
  EXPECT_EQ(ExchangePlan(layout, {0, 2}, Bits(1), size_t{1} << 20).pieces, 1u);
  const ExchangePlan cut(layout, {1, 2}, Bits(1), 8192);
  EXPECT_GT(cut.pieces, 1u);
  size_t largest = 0;
  for (size_t bytes : cut.partWireBytes) largest = std::max(largest, bytes);
  EXPECT_LE(largest, size_t{8192} + BucketWireBytes(96, 1));  // whole buckets: at most one over
  // One byte per piece: one bucket per piece, as many pieces as the largest sub-stripe has buckets, unless that
  // makes more messages than the cap.
  const BucketLayout small = BucketLayout::Uniform(10000, 96);  // 105 buckets: 53 and 52 on 2 nodes
  EXPECT_EQ(ExchangePlan(small, {0, 2}, Bits(1), 1).pieces, 53u);
  EXPECT_EQ(ExchangePlan(layout, {0, 2}, Bits(1), 1).pieces, kMaxMessagesPerExchange);
  EXPECT_EQ(ExchangePlan(layout, {0, 5}, Bits(1), 1).pieces, kMaxMessagesPerExchange / 4);
  EXPECT_EQ(ExchangePlan(layout, {0, 1}, Bits(1), 1).pieces, 1u);  // one node sends nothing
}

TEST(ExchangePlan, MessagesPointAtEachPartsCodes) {
  const ExchangePlan plan(Tensors(), {1, 3}, Bits(2), 4096);
  std::vector<unsigned char> stripeWire(plan.stripeWireBytes), ownWire(plan.ownWireBytes);
  const size_t slot = plan.ownWireBytes + 16;
  std::vector<unsigned char> received(3 * slot);
  const ExchangeMessages scatter = plan.Scatter(stripeWire.data(), received.data(), slot);
  const ExchangeMessages gather = plan.Gather(ownWire.data(), stripeWire.data());
  for (size_t part = 0; part < plan.parts.size(); ++part) {
    const size_t owner = plan.Owner(part);
    const size_t ownPart = plan.OwnPart(part);
    EXPECT_EQ(plan.Owner(ownPart), 1u);
    if (owner == 1) {  // our own: no traffic
      EXPECT_EQ(scatter.sends[part].bytes, 0u);
      EXPECT_EQ(gather.receives[part].bytes, 0u);
      continue;
    }
    EXPECT_EQ(scatter.sends[part].data, stripeWire.data() + plan.wireOffsets[owner] + plan.partWireOffsets[part]);
    EXPECT_EQ(scatter.sends[part].bytes, plan.partWireBytes[part]);
    EXPECT_EQ(scatter.receives[part].data, received.data() + owner * slot + plan.partWireOffsets[ownPart]);
    EXPECT_EQ(scatter.receives[part].bytes, plan.partWireBytes[ownPart]);
    EXPECT_EQ(gather.sends[part].data, ownWire.data() + plan.partWireOffsets[ownPart]);
    EXPECT_EQ(gather.sends[part].bytes, plan.partWireBytes[ownPart]);
    EXPECT_EQ(gather.receives[part].data, stripeWire.data() + plan.StripeWireOffset(part));
    EXPECT_EQ(gather.receives[part].bytes, plan.partWireBytes[part]);
  }
}

}  // namespace
}  // namespace gradagg
