#include "nvlink/shared_window_phase.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <exception>
#include <stdexcept>

#include "gradagg/errors.h"
#include "mpi_glue/deadline.h"
#include "mpi_glue/mpi_error.h"

namespace gradagg {
namespace {

// Elements summed per pass over the peers: small enough that the partial stripe stays in cache.
constexpr size_t kReduceBlock = 16384;

}  // namespace

SharedWindowPhase::SharedWindowPhase(MPI_Comm node, double timeoutSeconds)
    : node_(node), timeoutSeconds_(timeoutSeconds) {
  GRADAGG_MPI_CHECK(MPI_Comm_rank(node_, &localRank_));
  GRADAGG_MPI_CHECK(MPI_Comm_size(node_, &localSize_));
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
  segments_.clear();
  capacity_ = 0;
  return true;
}

void SharedWindowPhase::EnsureCapacity(size_t elements) {
  if (window_ != MPI_WIN_NULL && elements <= capacity_) return;
  if (!FreeWindow())
    throw TimeoutError("the node's ranks did not come to resize the shared window (" + RankAndHost() + ")");
  const size_t capacity = std::max<size_t>(elements, 1);
  float* mine = nullptr;
  GRADAGG_MPI_CHECK(MPI_Win_allocate_shared(static_cast<MPI_Aint>(capacity * sizeof(float)), sizeof(float),
                                            MPI_INFO_NULL, node_, &mine, &window_));
  GRADAGG_MPI_CHECK(MPI_Win_set_errhandler(window_, MPI_ERRORS_RETURN));
  GRADAGG_MPI_CHECK(MPI_Win_lock_all(MPI_MODE_NOCHECK, window_));
  segments_.assign(static_cast<size_t>(localSize_), nullptr);
  for (int peer = 0; peer < localSize_; ++peer) {
    MPI_Aint bytes = 0;
    int unit = 0;
    void* base = nullptr;
    GRADAGG_MPI_CHECK(MPI_Win_shared_query(window_, peer, &bytes, &unit, &base));
    segments_[static_cast<size_t>(peer)] = static_cast<float*>(base);
  }
  capacity_ = capacity;
}

void SharedWindowPhase::NodeBarrier() {
  GRADAGG_MPI_CHECK(MPI_Win_sync(window_));
  GRADAGG_MPI_CHECK(MPI_Barrier(node_));
  GRADAGG_MPI_CHECK(MPI_Win_sync(window_));
}

void SharedWindowPhase::ReduceScatter(const FlatBuffers& gradient, const std::vector<ElementRange>& shards,
                                      float* stripe) {
  if (shards.size() != static_cast<size_t>(localSize_)) {
    throw std::invalid_argument("ReduceScatter: need one shard per local rank");
  }
  EnsureCapacity(gradient.size());

  // 1. Publish our gradient.
  gradient.CopyOut({0, gradient.size()}, segments_[static_cast<size_t>(localRank_)]);
  NodeBarrier();

  // 2. Sum our shard over the node in local-rank order, a cache-sized block at a time.
  const ElementRange shard = shards[static_cast<size_t>(localRank_)];
  for (size_t blockStart = 0; blockStart < shard.count; blockStart += kReduceBlock) {
    const size_t length = std::min(kReduceBlock, shard.count - blockStart);
    float* out = stripe + blockStart;
    std::memcpy(out, segments_[0] + shard.begin + blockStart, length * sizeof(float));
    for (int peer = 1; peer < localSize_; ++peer) {
      const float* in = segments_[static_cast<size_t>(peer)] + shard.begin + blockStart;
      for (size_t i = 0; i < length; ++i) out[i] += in[i];
    }
  }
}

void SharedWindowPhase::AllGather(const float* stripe, const std::vector<ElementRange>& shards,
                                  const FlatBuffers& gradient) {
  if (shards.size() != static_cast<size_t>(localSize_)) {
    throw std::invalid_argument("AllGather: need one shard per local rank");
  }
  EnsureCapacity(gradient.size());  // a no-op after ReduceScatter of the same gradient

  // 4. Publish our aggregated stripe where only we read in phase 1, then gather everyone's.
  const ElementRange mine = shards[static_cast<size_t>(localRank_)];
  if (mine.count > 0) {  // an empty stripe may come as a null pointer
    std::memcpy(segments_[static_cast<size_t>(localRank_)] + mine.begin, stripe, mine.count * sizeof(float));
  }
  NodeBarrier();
  for (int owner = 0; owner < localSize_; ++owner) {
    const ElementRange shard = shards[static_cast<size_t>(owner)];
    gradient.CopyIn(shard, segments_[static_cast<size_t>(owner)] + shard.begin);
  }
  NodeBarrier();
}

}  // namespace gradagg
