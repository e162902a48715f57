#include "intra_node/shared_window_phase.h"

#include <algorithm>
#include <cstdio>
#include <exception>
#include <new>
#include <stdexcept>
#include <string>
#include <thread>

#include "gradagg/errors.h"
#include "mpi/deadline.h"
#include "mpi/mpi_error.h"
#include "intra_node/ordered_sum.h"

namespace gradagg {
namespace {

// A segment: the published count's cache line, then the ring of kDepth slots of one chunk per local rank.
constexpr size_t kLineBytes = 64;
constexpr size_t kLineFloats = kLineBytes / sizeof(float);
constexpr size_t kDepth = 2;  // the fewest that is safe (see the header)
constexpr size_t kSlotBytes = 1 << 20;
// A one-node gradient of at most this many bytes goes in one round: every rank reads all of every peer's (G times
// the bytes, cheap at this size) for one meeting instead of two per chunk.
constexpr size_t kOneShotBytes = 256 << 10;
// A gradient above this many bytes no longer sits in the cache between the two phases (the cores share 32 MiB or
// less of it on the machines measured, and every rank of the node has a gradient of its own).
constexpr size_t kStreamAboveBytes = 16 << 20;
// Polls of a peer's count before a wait sleeps: many where every rank of the node can have a core of its own (this
// machine's CPU count, not what a scheduler grants), few where they cannot and the peer needs ours.
constexpr unsigned kPollsOwnCore = 1u << 16;
constexpr unsigned kPollsSharedCore = 64;

// The part of `shard` in chunk `chunk` of `chunkElements`: the range, empty past the shard's end.
ElementRange ChunkOf(ElementRange shard, size_t chunk, size_t chunkElements) {
  const size_t offset = std::min(shard.count, chunk * chunkElements);
  return {shard.begin + offset, std::min(chunkElements, shard.count - offset)};
}

}  // namespace

SharedWindowPhase::SharedWindowPhase(MPI_Comm node, double timeoutSeconds, size_t chunkElements)
    : node_(node), timeoutSeconds_(timeoutSeconds) {
  GRADAGG_MPI_CHECK(MPI_Comm_rank(node_, &localRank_));
  GRADAGG_MPI_CHECK(MPI_Comm_size(node_, &localSize_));
  const size_t ranks = static_cast<size_t>(localSize_);
  chunk_ = chunkElements > 0 ? chunkElements
                             : std::max(kLineFloats, kSlotBytes / sizeof(float) / ranks / kLineFloats * kLineFloats);
  const size_t segmentBytes = kLineBytes + kDepth * ranks * chunk_ * sizeof(float);
  void* mine = nullptr;
  GRADAGG_MPI_CHECK(
      MPI_Win_allocate_shared(static_cast<MPI_Aint>(segmentBytes), 1, MPI_INFO_NULL, node_, &mine, &window_));
  GRADAGG_MPI_CHECK(MPI_Win_set_errhandler(window_, MPI_ERRORS_RETURN));
  GRADAGG_MPI_CHECK(MPI_Win_lock_all(MPI_MODE_NOCHECK, window_));
  new (mine) SharedCount();
  for (int peer = 0; peer < localSize_; ++peer) {
    MPI_Aint bytes = 0;
    int unit = 0;
    void* base = nullptr;
    GRADAGG_MPI_CHECK(MPI_Win_shared_query(window_, peer, &bytes, &unit, &base));
    char* segment = static_cast<char*>(base);
    published_.push_back(reinterpret_cast<SharedCount*>(segment));
    rings_.push_back(reinterpret_cast<float*>(segment + kLineBytes));
  }
  terms_.resize(ranks);
  polls_ = ranks <= std::max(1u, std::thread::hardware_concurrency()) ? kPollsOwnCore : kPollsSharedCore;
  // Every count is 0 before anyone reads one.
  GRADAGG_MPI_CHECK(MPI_Win_sync(window_));
  GRADAGG_MPI_CHECK(MPI_Barrier(node_));
}

SharedWindowPhase::~SharedWindowPhase() {
  // Unwinding: the node's other ranks may be inside their next call, where MPI_Win_free would wait for them for ever.
  if (abandoned_ || std::uncaught_exceptions() > 0) return;
  if (!FreeWindow()) {
    std::fprintf(stderr,
                 "gradagg: %s: the node's other ranks did not come to free the shared window within %.0f s; "
                 "left to MPI\n",
                 RankAndHost().c_str(), timeoutSeconds_);
  }
}

bool SharedWindowPhase::FreeWindow() noexcept {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (window_ != MPI_WIN_NULL && !finalized) {
    // MPI_Win_free waits for every rank of the node: first make sure they are all here, within the deadline.
    std::vector<MPI_Request> barrier(1, MPI_REQUEST_NULL);
    try {
      GRADAGG_MPI_CHECK(MPI_Ibarrier(node_, barrier.data()));
      if (!WaitAllBefore(Deadline(timeoutSeconds_), barrier)) {
        AbandonRequests(barrier);
        return false;
      }
    } catch (const std::exception&) {
      return false;
    }
    MPI_Win_unlock_all(window_);
    MPI_Win_free(&window_);
  }
  window_ = MPI_WIN_NULL;
  return true;
}

float* SharedWindowPhase::Slot(int owner, uint64_t round, int sub) const {
  const size_t slot = static_cast<size_t>(round % kDepth) * static_cast<size_t>(localSize_) + static_cast<size_t>(sub);
  return rings_[static_cast<size_t>(owner)] + slot * chunk_;
}

void SharedWindowPhase::WaitFor(const SharedCount& count, uint64_t value, int peer, const char* what) {
  if (count.WaitUntilReaches(static_cast<uint32_t>(value), polls_, Deadline(timeoutSeconds_))) return;
  abandoned_ = true;
  char seconds[32];
  std::snprintf(seconds, sizeof seconds, "%g", timeoutSeconds_);
  throw TimeoutError("gradagg: " + RankAndHost() + " waited " + seconds +
                     " s in the node's shared window for local rank " + std::to_string(peer) + " (" +
                     DescribeWorldRanks(node_, {peer}) + ") to " + what + " (GRADAGG_TIMEOUT)");
}

template <typename Fill, typename Read>
void SharedWindowPhase::RunRound(Fill fill, Read read) {
  const uint64_t round = rounds_;
  // 1. Fill our slot and publish it.
  fill(round);
  published_[static_cast<size_t>(localRank_)]->Advance(static_cast<uint32_t>(round + 1));
  // 2. Every peer's slot of this round.
  for (int peer = 0; peer < localSize_; ++peer) {
    if (peer != localRank_) WaitFor(*published_[static_cast<size_t>(peer)], round + 1, peer, "fill its slot");
  }
  // 3. Read them.
  read(round);
  rounds_ = round + 1;
}

template <typename Out>
void SharedWindowPhase::SumWithPeers(const FlatBuffers& gradient, ElementRange range, uint64_t round, int sub,
                                     Out out) {
  // Local-rank order: our own term straight from the gradient, the others' from their slots.
  gradient.ForEachPiece(range, [&](float* piece, size_t at, size_t length) {
    for (int peer = 0; peer < localSize_; ++peer) {
      terms_[static_cast<size_t>(peer)] = peer == localRank_ ? piece : Slot(peer, round, sub) + at;
    }
    SumInOrder(terms_.data(), terms_.size(), length, out(piece, at), nullptr);
  });
}

void SharedWindowPhase::ReduceScatterRound(const FlatBuffers& gradient, const std::vector<ElementRange>& shards,
                                           size_t chunk, float* stripe) {
  const ElementRange mine = ChunkOf(shards[static_cast<size_t>(localRank_)], chunk, chunk_);
  RunRound(
      [&](uint64_t round) {
        for (int peer = 0; peer < localSize_; ++peer) {
          if (peer == localRank_) continue;
          gradient.CopyOut(ChunkOf(shards[static_cast<size_t>(peer)], chunk, chunk_), Slot(localRank_, round, peer));
        }
      },
      [&](uint64_t round) {
        float* sums = stripe != nullptr ? stripe + (mine.begin - shards[static_cast<size_t>(localRank_)].begin)
                                        : nullptr;  // null: in place
        SumWithPeers(gradient, mine, round, localRank_,
                     [&](float* piece, size_t at) { return sums != nullptr ? sums + at : piece; });
      });
}

void SharedWindowPhase::AllGatherRound(const float* stripe, const std::vector<ElementRange>& shards, size_t chunk,
                                       const FlatBuffers& gradient, Stores stores) {
  const ElementRange mine = ChunkOf(shards[static_cast<size_t>(localRank_)], chunk, chunk_);
  RunRound(
      [&](uint64_t round) {
        float* slot = Slot(localRank_, round, localRank_);
        if (stripe == nullptr) {
          gradient.CopyOut(mine, slot);
          return;
        }
        const float* aggregated = stripe + (mine.begin - shards[static_cast<size_t>(localRank_)].begin);
        gradient.ForEachPiece(mine, [&](float* piece, size_t at, size_t length) {
          const float* term = aggregated + at;
          SumInOrder(&term, 1, length, slot + at, term == piece ? nullptr : piece);  // in place: the slot only
        });
      },
      [&](uint64_t round) {
        for (int peer = 0; peer < localSize_; ++peer) {
          if (peer == localRank_) continue;
          const float* from = Slot(peer, round, peer);
          gradient.ForEachPiece(ChunkOf(shards[static_cast<size_t>(peer)], chunk, chunk_),
                                [&](float* piece, size_t at, size_t length) {
                                  const float* term = from + at;
                                  SumInOrder(&term, 1, length, piece, nullptr, stores);
                                });
        }
      });
}

size_t SharedWindowPhase::Rounds(const FlatBuffers& gradient, const std::vector<ElementRange>& shards) const {
  if (shards.size() != static_cast<size_t>(localSize_)) {
    throw std::invalid_argument("shared window phase: need one shard per local rank");
  }
  size_t longest = 0;
  for (const ElementRange& shard : shards) {
    if (shard.end() > gradient.size()) {
      throw std::out_of_range("shared window phase: a shard ends past the gradient's " +
                              std::to_string(gradient.size()) + " elements");
    }
    longest = std::max(longest, shard.count);
  }
  return (longest + chunk_ - 1) / chunk_;
}

void SharedWindowPhase::ReduceScatter(const FlatBuffers& gradient, const std::vector<ElementRange>& shards,
                                      float* stripe) {
  const size_t rounds = Rounds(gradient, shards);
  if (shards[static_cast<size_t>(localRank_)].count > 0 && stripe == nullptr) {
    throw std::invalid_argument("shared window phase: no stripe to sum into");
  }
  for (size_t chunk = 0; chunk < rounds; ++chunk) ReduceScatterRound(gradient, shards, chunk, stripe);
}

void SharedWindowPhase::AllGather(const float* stripe, const std::vector<ElementRange>& shards,
                                  const FlatBuffers& gradient) {
  const size_t rounds = Rounds(gradient, shards);
  if (shards[static_cast<size_t>(localRank_)].count > 0 && stripe == nullptr) {
    throw std::invalid_argument("shared window phase: no stripe to gather from");
  }
  // The peers' parts of a gradient too large to stay in cache since the reduce-scatter read it: streamed to memory.
  const Stores stores = gradient.size() * sizeof(float) > kStreamAboveBytes ? Stores::kStreamed : Stores::kCached;
  for (size_t chunk = 0; chunk < rounds; ++chunk) AllGatherRound(stripe, shards, chunk, gradient, stores);
}

float* SharedWindowPhase::StripeInPlace(const FlatBuffers& gradient, const std::vector<ElementRange>& shards) {
  if (shards.size() != static_cast<size_t>(localSize_)) return nullptr;
  const ElementRange mine = shards[static_cast<size_t>(localRank_)];
  if (mine.count == 0 || mine.end() > gradient.size()) return nullptr;
  float* start = nullptr;
  size_t pieces = 0;
  gradient.ForEachPiece(mine, [&](float* piece, size_t, size_t) {
    if (pieces++ == 0) start = piece;
  });
  return pieces == 1 ? start : nullptr;
}

bool SharedWindowPhase::AllReduce(const FlatBuffers& gradient) {
  const size_t ranks = static_cast<size_t>(localSize_);
  if (gradient.size() * sizeof(float) <= kOneShotBytes && gradient.size() <= ranks * chunk_) {
    // One round: every rank publishes its whole gradient and sums all of it, in local-rank order.
    RunRound(
        [&](uint64_t round) {
          gradient.CopyOut({0, gradient.size()}, Slot(localRank_, round, 0));
        },
        [&](uint64_t round) {
          SumWithPeers(gradient, {0, gradient.size()}, round, 0, [](float* piece, size_t) { return piece; });
        });
    return true;
  }
  // Equal shards of whole cache lines.
  const size_t lines = (gradient.size() + kLineFloats - 1) / kLineFloats;
  std::vector<ElementRange> shards;
  for (size_t part = 0, begin = 0; part < ranks; ++part) {
    const size_t end = std::min(gradient.size(), lines * (part + 1) / ranks * kLineFloats);
    shards.push_back({begin, end - begin});
    begin = end;
  }
  const size_t rounds = Rounds(gradient, shards);
  for (size_t chunk = 0; chunk < rounds; ++chunk) {
    ReduceScatterRound(gradient, shards, chunk, nullptr);
    AllGatherRound(nullptr, shards, chunk, gradient, Stores::kCached);
  }
  return true;
}

}  // namespace gradagg
