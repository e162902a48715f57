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

// Collective over `comm` in effect: every rank calls it with matching sizes.
//   1. Posts a receive of exactly receives[p].bytes from every peer p with bytes > 0.
//   2. Sends sends[p] to every peer p with bytes > 0 (the same buffer may go to several peers), in SendingOrder, so
//      that the ranks do not all start with the same peer. Where beforeSend
//      is set, beforeSend(p) comes just before p's send is posted: the caller may fill sends[p] there, so that the
//      first message is on the wire while the next is being produced. Then afterSends(), where set: work that overlaps
//      the traffic (the caller's own part, say).
//   3. As receives complete (MPI_Waitany), calls onReady(p) for p = 0, 1, ..., size-1 in that order, each as soon
//      as p's bytes and those of every lower rank are in place; onReady(self) comes in its turn, with no traffic.
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
