// One round of point-to-point traffic whose results are consumed in rank order, whatever order messages arrive in.
//
// This is the transport of phase 2 (docs/DESIGN.md): the scatter of quantized sub-stripes to their owners and the
// all-gather of the owners' quantized aggregates are both one call. It moves bytes and knows no quantization; the
// caller decodes in the onReady callback.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <functional>
#include <vector>

namespace gradagg {

struct SendBuffer {
  const void* data = nullptr;
  size_t bytes = 0;
};

struct ReceiveBuffer {
  void* data = nullptr;
  size_t bytes = 0;
};

// Messages larger than this travel as several MPI messages (MPI counts are int).
inline constexpr size_t kDefaultMaxMessageBytes = size_t{1} << 30;

// The peers a rank sends to, in the order it sends: rank + 1, rank + 2, ..., wrapping, itself left out.
std::vector<int> SendingOrder(int rank, int size);

// An exchange's messages may come in pieces, produced and consumed one at a time: with `pieces` pieces, sends and
// receives hold pieces * size entries, and entry piece * size + p is that piece of the message to (from) rank p.
// One piece (size entries) is a plain exchange. The entries a rank sends, in order: every peer's piece 0 in
// SendingOrder, then every peer's piece 1, and so on.
std::vector<int> EntrySendingOrder(int rank, int size, size_t entries);

// The pieces of an exchange of these entry counts, checked: throws std::invalid_argument naming `who` unless there are
// as many receive entries as send entries and their count is a positive multiple of size.
size_t PiecesOf(size_t sendEntries, size_t receiveEntries, int size, const char* who);

// When onReady may see an entry: entry (piece k, rank p) once its bytes are in place and (k, p - 1) has been seen,
// so each piece's parts come in rank order; pieces do not wait for each other. The caller counts each entry's
// outstanding messages (Expect, Arrived); Release calls onReady for every entry now due.
class RankOrderRelease {
 public:
  RankOrderRelease(int size, size_t pieces);
  void Expect(size_t entry) { ++left_[entry]; }
  void Arrived(size_t entry) { --left_[entry]; }
  template <typename OnReady>
  void Release(OnReady onReady) {
    for (size_t piece = 0; piece < next_.size(); ++piece) {
      size_t& next = next_[piece];
      while (next < size_ && left_[piece * size_ + next] == 0) onReady(static_cast<int>(piece * size_ + next++));
    }
  }
  // Per rank, the messages still expected from it (for a timeout's message).
  std::vector<size_t> LeftPerRank() const;

 private:
  size_t size_;
  std::vector<size_t> left_;  // per entry
  std::vector<size_t> next_;  // per piece: the rank whose part comes next
};

// Collective over `comm` in effect: every rank calls it with matching sizes and the same number of pieces. Callbacks
// take an entry (the rank itself with one piece).
//   1. Posts a receive of exactly receives[e].bytes for every entry e of a peer with bytes > 0.
//   2. Sends sends[e] for every entry e of a peer with bytes > 0 (the same buffer may go to several peers), in
//      EntrySendingOrder, so that the ranks do not all start with the same peer. Where beforeSend is set,
//      beforeSend(e) comes just before e's send is posted: the caller may fill sends[e] there, so that the first
//      message is on the wire while the next is being produced. Then afterSends(), where set: work that overlaps the
//      traffic (the caller's own part, say).
//   3. As receives complete (MPI_Waitany), calls onReady(e) as RankOrderRelease allows: with one piece, for
//      p = 0, 1, ..., size-1 in that order, each as soon as p's bytes and those of every lower rank are in place;
//      onReady of our own entries comes in its turn, with no traffic.
//   4. Returns when every receive and send has completed.
// A message of another size than expected throws MpiError / std::runtime_error naming the peer. If onReady throws,
// all traffic is completed before the exception leaves, so no buffer is written after return.
// With timeoutSeconds > 0, a round still incomplete after that long throws TimeoutError naming the ranks (of
// MPI_COMM_WORLD) it still waits for and `what`; its receives are cancelled and its requests abandoned, so the
// exchange (and whoever owns its buffers) must not be used again.
void ExchangeInRankOrder(MPI_Comm comm, int tag, const std::vector<SendBuffer>& sends,
                         const std::vector<ReceiveBuffer>& receives, const std::function<void(int)>& onReady,
                         size_t maxMessageBytes = kDefaultMaxMessageBytes, double timeoutSeconds = 0.0,
                         const char* what = "an ordered exchange", const std::function<void(int)>& beforeSend = {},
                         const std::function<void()>& afterSends = {});

}  // namespace gradagg
