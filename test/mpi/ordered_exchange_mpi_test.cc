// The phase-2 transport on its own: sizes, chunking, rank-ordered delivery, and a wrong size caught.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <string>
#include <vector>

#include "gradagg/errors.h"
#include "mpi/ordered_exchange.h"
#include "mpi_test_support.h"
#include "timeout_expectation.h"

namespace gradagg {
namespace {

using test::WorldRank;
using test::WorldSize;

// Bytes rank `from` sends rank `to`: a length and contents that depend on both.
std::vector<unsigned char> Message(int from, int to) {
  std::vector<unsigned char> bytes(static_cast<size_t>(13 * from + 5 * to + 1));
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<unsigned char>(from * 31 + to * 7 + i);
  return bytes;
}

// This rank's side of one exchange: what it sends every peer (Message, or placeholder bytes that beforeSend fills) and
// room for what every peer sends it.
struct Traffic {
  std::vector<std::vector<unsigned char>> outgoing, incoming;
  std::vector<SendBuffer> sends;
  std::vector<ReceiveBuffer> receives;

  Traffic(int rank, int size, bool produceLater) {
    for (int peer = 0; peer < size; ++peer) {
      outgoing.push_back(produceLater ? std::vector<unsigned char>(Message(rank, peer).size(), 0xee)
                                      : Message(rank, peer));
      incoming.emplace_back(Message(peer, rank).size(), 0);
    }
    for (int peer = 0; peer < size; ++peer) {
      const auto p = static_cast<size_t>(peer);
      sends.push_back({outgoing[p].data(), peer == rank && produceLater ? 0 : outgoing[p].size()});
      receives.push_back({incoming[p].data(), incoming[p].size()});
    }
  }
};

TEST(ExchangeInRankOrder, DeliversEveryMessageAndCallsBackInRankOrder) {
  const int rank = WorldRank();
  const int size = WorldSize();
  for (size_t chunk : {size_t{3}, size_t{64}, kDefaultMaxMessageBytes}) {
    Traffic traffic(rank, size, false);
    std::vector<int> order;
    ExchangeInRankOrder(
        MPI_COMM_WORLD, 5, traffic.sends, traffic.receives,
        [&](int peer) {
          order.push_back(peer);
          if (peer != rank) {
            EXPECT_EQ(traffic.incoming[static_cast<size_t>(peer)], Message(peer, rank)) << "from " << peer;
          }
        },
        chunk);
    std::vector<int> expected(static_cast<size_t>(size));
    for (int p = 0; p < size; ++p) expected[static_cast<size_t>(p)] = p;
    EXPECT_EQ(order, expected) << "chunk " << chunk;
  }
}

// beforeSend produces each message just before it leaves: called once per peer with bytes, next rank first, and
// what it writes is what the peer receives (the buffers start as garbage).
TEST(ExchangeInRankOrder, BeforeSendFillsEachMessageInSendingOrder) {
  const int rank = WorldRank();
  const int size = WorldSize();
  Traffic traffic(rank, size, true);
  std::vector<int> produced;
  ExchangeInRankOrder(
      MPI_COMM_WORLD, 8, traffic.sends, traffic.receives, [](int) {}, 7, 0.0, "the beforeSend test",
      [&](int peer) {
        produced.push_back(peer);
        const std::vector<unsigned char> message = Message(rank, peer);
        std::copy(message.begin(), message.end(), traffic.outgoing[static_cast<size_t>(peer)].begin());  // in place
      });
  std::vector<int> expected;
  for (int step = 1; step < size; ++step) expected.push_back((rank + step) % size);
  EXPECT_EQ(produced, expected);
  for (int peer = 0; peer < size; ++peer) {
    if (peer != rank) EXPECT_EQ(traffic.incoming[static_cast<size_t>(peer)], Message(peer, rank)) << "from " << peer;
  }
}

// afterSends runs once, after every message was produced and before the first onReady (which may need its work).
TEST(ExchangeInRankOrder, AfterSendsComesOnceBetweenTheSendsAndTheFirstReadyPart) {
  const int rank = WorldRank();
  const int size = WorldSize();
  Traffic traffic(rank, size, true);
  std::vector<std::string> steps;
  ExchangeInRankOrder(
      MPI_COMM_WORLD, 9, traffic.sends, traffic.receives,
      [&](int peer) { steps.push_back("ready " + std::to_string(peer)); }, 7, 0.0, "the afterSends test",
      [&](int peer) {
        steps.push_back("send " + std::to_string(peer));
        const std::vector<unsigned char> message = Message(rank, peer);
        std::copy(message.begin(), message.end(), traffic.outgoing[static_cast<size_t>(peer)].begin());
      },
      [&] { steps.push_back("after sends"); });
  std::vector<std::string> expected;
  for (int step = 1; step < size; ++step) expected.push_back("send " + std::to_string((rank + step) % size));
  expected.push_back("after sends");
  for (int peer = 0; peer < size; ++peer) expected.push_back("ready " + std::to_string(peer));
  EXPECT_EQ(steps, expected);
  for (int peer = 0; peer < size; ++peer) {
    if (peer != rank) EXPECT_EQ(traffic.incoming[static_cast<size_t>(peer)], Message(peer, rank)) << "from " << peer;
  }
}

// Bytes rank `from` sends rank `to` as piece `piece`: pieces of one message differ in length and contents; piece 1
// is empty between some pairs.
std::vector<unsigned char> PieceOf(int from, int to, int piece) {
  const size_t length =
      piece == 1 && (from + to) % 2 == 0 ? 0 : static_cast<size_t>(7 * from + 3 * to + 11 * piece + 1);
  std::vector<unsigned char> bytes(length);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<unsigned char>(from * 31 + to * 7 + piece * 5 + i);
  return bytes;
}

// Messages in pieces: entry piece * size + peer. Every piece is produced in EntrySendingOrder (each peer's first
// piece before any second), lands in its own entry, and onReady sees each piece's ranks in order, each entry once.
TEST(ExchangeInRankOrder, PiecesAreProducedInOrderAndEachPiecesRanksComeInRankOrder) {
  const int rank = WorldRank();
  const int size = WorldSize();
  constexpr int kPieces = 3;
  const auto entries = static_cast<size_t>(kPieces * size);
  std::vector<std::vector<unsigned char>> outgoing(entries), incoming(entries);
  std::vector<SendBuffer> sends(entries);
  std::vector<ReceiveBuffer> receives(entries);
  for (size_t entry = 0; entry < entries; ++entry) {
    const int peer = static_cast<int>(entry) % size;
    const int piece = static_cast<int>(entry) / size;
    if (peer == rank) continue;
    outgoing[entry].assign(PieceOf(rank, peer, piece).size(), 0xee);  // filled by beforeSend
    incoming[entry].assign(PieceOf(peer, rank, piece).size(), 0);
    sends[entry] = {outgoing[entry].data(), outgoing[entry].size()};
    receives[entry] = {incoming[entry].data(), incoming[entry].size()};
  }
  std::vector<int> produced, ready;
  ExchangeInRankOrder(
      MPI_COMM_WORLD, 10, sends, receives,
      [&](int entry) {
        const auto e = static_cast<size_t>(entry);
        ready.push_back(entry);
        const int peer = entry % size;
        if (peer != rank) EXPECT_EQ(incoming[e], PieceOf(peer, rank, entry / size)) << "entry " << entry;
      },
      5, 0.0, "the pieces test",
      [&](int entry) {
        produced.push_back(entry);
        const std::vector<unsigned char> piece = PieceOf(rank, entry % size, entry / size);
        std::copy(piece.begin(), piece.end(), outgoing[static_cast<size_t>(entry)].begin());
      });

  std::vector<int> expectedProduced;
  for (int entry : EntrySendingOrder(rank, size, entries)) {
    if (!outgoing[static_cast<size_t>(entry)].empty()) expectedProduced.push_back(entry);
  }
  EXPECT_EQ(produced, expectedProduced);
  for (size_t i = 1; i < produced.size(); ++i) {  // every first piece goes out before any second
    EXPECT_LE(produced[i - 1] / size, produced[i] / size) << "at " << i;
  }
  ASSERT_EQ(ready.size(), entries);
  std::vector<int> seenPerPiece;
  for (int piece = 0; piece < kPieces; ++piece) {
    seenPerPiece.clear();
    for (int entry : ready) {
      if (entry / size == piece) seenPerPiece.push_back(entry % size);
    }
    std::vector<int> inRankOrder(static_cast<size_t>(size));
    std::iota(inRankOrder.begin(), inRankOrder.end(), 0);
    EXPECT_EQ(seenPerPiece, inRankOrder) << "piece " << piece;
  }
}

TEST(ExchangeInRankOrder, EntriesThatAreNotWholePiecesAreRefused) {
  const int size = WorldSize();
  std::vector<SendBuffer> sends(static_cast<size_t>(size));
  std::vector<ReceiveBuffer> receives(2 * sends.size());  // as many receives as sends, or none of it
  EXPECT_THROW(ExchangeInRankOrder(MPI_COMM_WORLD, 11, sends, receives, [](int) {}), std::invalid_argument);
  if (size > 1) {  // every count is whole pieces of one rank
    sends.resize(static_cast<size_t>(size) + 1);
    receives.resize(sends.size());
    EXPECT_THROW(ExchangeInRankOrder(MPI_COMM_WORLD, 11, sends, receives, [](int) {}), std::invalid_argument);
  }
  EXPECT_THROW(PiecesOf(0, 0, size, "test"), std::invalid_argument);
  const auto four = static_cast<size_t>(4 * size);
  EXPECT_THROW(PiecesOf(four, four + 1, size, "test"), std::invalid_argument);
  EXPECT_EQ(PiecesOf(four, four, size, "test"), 4u);
}

TEST(ExchangeInRankOrder, AMessageOfTheWrongSizeThrowsOnTheReceiver) {
  if (WorldSize() < 2) GTEST_SKIP() << "needs two ranks";
  const int rank = WorldRank();
  const int size = WorldSize();
  std::vector<unsigned char> outgoing(16, 1);
  std::vector<unsigned char> incoming(16, 0);
  std::vector<SendBuffer> sends(static_cast<size_t>(size));
  std::vector<ReceiveBuffer> receives(static_cast<size_t>(size));
  // Rank 1 sends rank 0 twelve bytes where rank 0 expects eight: rank 0 must say so; nobody hangs.
  if (rank == 1) sends[0] = {outgoing.data(), 12};
  if (rank == 0) receives[1] = {incoming.data(), 8};
  if (rank == 0) {
    EXPECT_THROW(ExchangeInRankOrder(MPI_COMM_WORLD, 6, sends, receives, [](int) {}), std::runtime_error);
  } else {
    EXPECT_NO_THROW(ExchangeInRankOrder(MPI_COMM_WORLD, 6, sends, receives, [](int) {}));
  }
  // And too few bytes.
  if (rank == 1) sends[0] = {outgoing.data(), 4};
  if (rank == 0) {
    EXPECT_THROW(ExchangeInRankOrder(MPI_COMM_WORLD, 7, sends, receives, [](int) {}), std::runtime_error);
  } else {
    EXPECT_NO_THROW(ExchangeInRankOrder(MPI_COMM_WORLD, 7, sends, receives, [](int) {}));
  }
}

// The last rank never joins the round: every other rank gives up after the deadline, naming it, within a second of
// the deadline, and leaves no request behind that could write into its buffers later.
TEST(ExchangeInRankOrder, APeerThatNeverComesTimesOutNamingIt) {
  if (WorldSize() < 2) GTEST_SKIP() << "needs two ranks";
  test::WithoutTheLastRank([](MPI_Comm comm, int absent) {
    const int rank = WorldRank();
    const int size = WorldSize();
    std::vector<std::vector<unsigned char>> incoming(static_cast<size_t>(size), std::vector<unsigned char>(8));
    std::vector<unsigned char> outgoing(8, 1);
    std::vector<SendBuffer> sends(static_cast<size_t>(size));
    std::vector<ReceiveBuffer> receives(static_cast<size_t>(size));
    for (int peer = 0; peer < size; ++peer) {
      if (peer == rank) continue;
      sends[static_cast<size_t>(peer)] = {outgoing.data(), outgoing.size()};
      receives[static_cast<size_t>(peer)] = {incoming[static_cast<size_t>(peer)].data(), 8};
    }
    test::ExpectTimeoutNamingRank(
        [&] {
          ExchangeInRankOrder(
              comm, 9, sends, receives, [](int) {}, kDefaultMaxMessageBytes, 1.0, "the test round");
        },
        "the test round: waited 1 s", absent, 1.0, 1.0);
  });
}

}  // namespace
}  // namespace gradagg
