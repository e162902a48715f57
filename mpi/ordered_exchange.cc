#include "mpi/ordered_exchange.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "gradagg/errors.h"
#include "common/call_timeline.h"
#include "mpi/deadline.h"
#include "mpi/mpi_error.h"

namespace gradagg {
namespace {

struct PendingReceive {
  int peer;
  int bytes;
  size_t entry;
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

std::vector<int> EntrySendingOrder(int rank, int size, size_t entries) {
  const std::vector<int> peers = SendingOrder(rank, size);
  std::vector<int> order;
  for (size_t first = 0; first < entries; first += static_cast<size_t>(size)) {
    for (int peer : peers) order.push_back(static_cast<int>(first) + peer);
  }
  return order;
}

size_t PiecesOf(size_t sendEntries, size_t receiveEntries, int size, const char* who) {
  if (receiveEntries != sendEntries) {
    throw std::invalid_argument(std::string(who) + ": need as many receive entries as send entries (" +
                                std::to_string(receiveEntries) + " and " + std::to_string(sendEntries) + ")");
  }
  const auto ranks = static_cast<size_t>(size);
  if (sendEntries == 0 || sendEntries % ranks != 0) {
    throw std::invalid_argument(std::string(who) + ": need one send and one receive entry per rank and piece (" +
                                std::to_string(sendEntries) + " entries for " + std::to_string(size) + " ranks)");
  }
  return sendEntries / ranks;
}

RankOrderRelease::RankOrderRelease(int size, size_t pieces)
    : size_(static_cast<size_t>(size)), left_(size_ * pieces, 0), next_(pieces, 0) {}

std::vector<size_t> RankOrderRelease::LeftPerRank() const {
  std::vector<size_t> perRank(size_, 0);
  for (size_t entry = 0; entry < left_.size(); ++entry) perRank[entry % size_] += left_[entry];
  return perRank;
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
  const size_t pieces = PiecesOf(sends.size(), receives.size(), size, "ExchangeInRankOrder");
  maxMessageBytes = std::clamp<size_t>(maxMessageBytes, 1, static_cast<size_t>(INT32_MAX));

  // 1. Receives first, so no message waits for a matching receive. Same-tag messages between two ranks match in the
  //    order they were posted, so each piece lands in its own entry.
  std::vector<MPI_Request> receiveRequests;
  std::vector<PendingReceive> receiveInfo;
  RankOrderRelease release(size, pieces);
  for (size_t entry = 0; entry < receives.size(); ++entry) {
    const int peer = static_cast<int>(entry % static_cast<size_t>(size));
    const ReceiveBuffer& buffer = receives[entry];
    if (peer == rank) continue;
    ForEachPiece(buffer.bytes, maxMessageBytes, [&](size_t offset, int bytes) {
      receiveRequests.emplace_back();
      receiveInfo.push_back({peer, bytes, entry});
      release.Expect(entry);
      GRADAGG_MPI_CHECK(MPI_Irecv(static_cast<char*>(buffer.data) + offset, bytes, MPI_BYTE, peer, tag, comm,
                                  &receiveRequests.back()));
    });
  }

  std::vector<MPI_Request> sendRequests;

  // Past the deadline: give up on the requests (never wait on them again), name whom we still wait for, throw.
  auto timeOut = [&] {
    AbandonRequests(receiveRequests);
    AbandonRequests(sendRequests);
    throw TimeoutError(ExchangeTimeoutMessage(comm, what, timeoutSeconds, release.LeftPerRank()));
  };

  // 3. Completion-driven, consumed in rank order. The sends of 2 are inside the same clean-up: if beforeSend or
  //    onReady throws, all traffic posted so far completes before the exception leaves.
  try {
    // 2. Sends, starting with the next rank; each produced (beforeSend) just before it leaves.
    for (const int entry : EntrySendingOrder(rank, size, sends.size())) {
      const SendBuffer& buffer = sends[static_cast<size_t>(entry)];
      if (buffer.bytes == 0) continue;
      const int peer = entry % size;
      if (beforeSend) beforeSend(entry);
      ForEachPiece(buffer.bytes, maxMessageBytes, [&](size_t offset, int bytes) {
        sendRequests.emplace_back();
        GRADAGG_MPI_CHECK(MPI_Isend(static_cast<const char*>(buffer.data) + offset, bytes, MPI_BYTE, peer, tag, comm,
                                    &sendRequests.back()));
      });
      call_timeline::Note("sent", peer);
    }
    if (afterSends) afterSends();

    // 3.
    release.Release(onReady);
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
      release.Arrived(arrived.entry);
      release.Release(onReady);
    }
    release.Release(onReady);
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
