#include "mpi_glue/ordered_exchange.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "gradagg/errors.h"
#include "ground/call_timeline.h"
#include "mpi_glue/deadline.h"
#include "mpi_glue/mpi_error.h"

namespace gradagg {
namespace {

struct PendingReceive {
  int peer;
  int bytes;
};

// Calls post(offset, bytes) for each piece of a `total`-byte message cut into pieces of at most `maxPiece` bytes.
template <typename Post>
void ForEachPiece(size_t total, size_t maxPiece, Post post) {
  for (size_t offset = 0; offset < total; offset += maxPiece) {
    post(offset, static_cast<int>(std::min(maxPiece, total - offset)));
  }
}

// Completes whatever is still in flight, ignoring errors: used only on the way out of a failure.
void DrainQuietly(std::vector<MPI_Request>& requests) {
  MPI_Waitall(static_cast<int>(requests.size()), requests.data(), MPI_STATUSES_IGNORE);
}

}  // namespace

std::vector<int> SendingOrder(int rank, int size) {
  std::vector<int> order;
  for (int step = 1; step < size; ++step) order.push_back((rank + step) % size);
  return order;
}

void ExchangeInRankOrder(MPI_Comm comm, int tag, const std::vector<SendBuffer>& sends,
                         const std::vector<ReceiveBuffer>& receives, const std::function<void(int)>& onReady,
                         size_t maxMessageBytes, double timeoutSeconds, const char* what,
                         const std::function<void(int)>& beforeSend, const std::function<void()>& afterSends) {
  const Deadline deadline(timeoutSeconds);
  int rank = 0;
  int size = 0;
  GRADAGG_MPI_CHECK(MPI_Comm_rank(comm, &rank));
  GRADAGG_MPI_CHECK(MPI_Comm_size(comm, &size));
  if (sends.size() != static_cast<size_t>(size) || receives.size() != static_cast<size_t>(size)) {
    throw std::invalid_argument("ExchangeInRankOrder: need one send and one receive entry per rank");
  }
  maxMessageBytes = std::clamp<size_t>(maxMessageBytes, 1, static_cast<size_t>(INT32_MAX));

  // 1. Receives first, so no message waits for a matching receive.
  std::vector<MPI_Request> receiveRequests;
  std::vector<PendingReceive> receiveInfo;
  std::vector<size_t> chunksLeft(static_cast<size_t>(size), 0);
  for (int peer = 0; peer < size; ++peer) {
    const ReceiveBuffer& buffer = receives[static_cast<size_t>(peer)];
    if (peer == rank) continue;
    ForEachPiece(buffer.bytes, maxMessageBytes, [&](size_t offset, int bytes) {
      receiveRequests.emplace_back();
      receiveInfo.push_back({peer, bytes});
      ++chunksLeft[static_cast<size_t>(peer)];
      GRADAGG_MPI_CHECK(MPI_Irecv(static_cast<char*>(buffer.data) + offset, bytes, MPI_BYTE, peer, tag, comm,
                                  &receiveRequests.back()));
    });
  }

  std::vector<MPI_Request> sendRequests;

  // Past the deadline: give up on the requests (never wait on them again), name whom we still wait for, throw.
  auto timeOut = [&] {
    AbandonRequests(receiveRequests);
    AbandonRequests(sendRequests);
    throw TimeoutError(ExchangeTimeoutMessage(comm, what, timeoutSeconds, chunksLeft));
  };

  // 3. Completion-driven, consumed in rank order. The sends of 2 are inside the same clean-up: if beforeSend or
  //    onReady throws, all traffic posted so far completes before the exception leaves.
  int nextReady = 0;
  auto releaseReadyPrefix = [&] {
    while (nextReady < size && chunksLeft[static_cast<size_t>(nextReady)] == 0) onReady(nextReady++);
  };
  try {
    // 2. Sends, starting with the next rank; each produced (beforeSend) just before it leaves.
    for (const int peer : SendingOrder(rank, size)) {
      const SendBuffer& buffer = sends[static_cast<size_t>(peer)];
      if (buffer.bytes == 0) continue;
      if (beforeSend) beforeSend(peer);
      ForEachPiece(buffer.bytes, maxMessageBytes, [&](size_t offset, int bytes) {
        sendRequests.emplace_back();
        GRADAGG_MPI_CHECK(MPI_Isend(static_cast<const char*>(buffer.data) + offset, bytes, MPI_BYTE, peer, tag, comm,
                                    &sendRequests.back()));
      });
      call_timeline::Note("sent", peer);
    }
    if (afterSends) afterSends();

    // 3.
    releaseReadyPrefix();
    for (size_t done = 0; done < receiveRequests.size(); ++done) {
      int index = MPI_UNDEFINED;
      MPI_Status status;
      int result = MPI_SUCCESS;
      if (!WaitAnyBefore(deadline, receiveRequests, &index, &status, &result)) timeOut();
      if (result != MPI_SUCCESS && index != MPI_UNDEFINED) {
        const PendingReceive& failed = receiveInfo[static_cast<size_t>(index)];
        throw std::runtime_error("receive from rank " + std::to_string(failed.peer) +
                                 " failed: " + MpiErrorString(result) + " (expected " + std::to_string(failed.bytes) +
                                 " bytes; " + RankAndHost() + ")");
      }
      GRADAGG_MPI_CHECK(result);
      const PendingReceive& arrived = receiveInfo[static_cast<size_t>(index)];
      int count = 0;
      GRADAGG_MPI_CHECK(MPI_Get_count(&status, MPI_BYTE, &count));
      if (count != arrived.bytes) {
        throw std::runtime_error("message from rank " + std::to_string(arrived.peer) + " has " + std::to_string(count) +
                                 " bytes, expected " + std::to_string(arrived.bytes) + " (" + RankAndHost() + ")");
      }
      call_timeline::Note("arrived", arrived.peer);
      --chunksLeft[static_cast<size_t>(arrived.peer)];
      releaseReadyPrefix();
    }
    releaseReadyPrefix();
  } catch (...) {
    DrainQuietly(receiveRequests);
    DrainQuietly(sendRequests);
    throw;
  }

  // 4. Our sends must be done before the caller may touch the send buffers.
  if (!WaitAllBefore(deadline, sendRequests)) timeOut();
  call_timeline::Note("sends done");
}

}  // namespace gradagg
