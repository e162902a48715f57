// The reduce-scatter and all-gather left to phase 2: instead of summing this rank's shard into a stripe and copying
// the stripe back, the node waits for every peer to reach the call (the two-shot kernel's first barrier, alone) and
// hands out where every rank's shard lies, so that the quantizer reads and sums the terms itself, in local-rank order,
// and the decoder writes the result into every rank's gradient; a second barrier ends the call.
#include <algorithm>
#include <cstring>

#include "common/cuda/cuda_error.h"
#include "gradagg/errors.h"
#include "intra_node/cuda/peer_barrier.cuh"
#include "intra_node/cuda/peer_group.h"
#include "intra_node/cuda/peer_group_internal.h"

namespace gradagg::nvlink {
namespace {

static_assert(ValueTerms::kMax >= kMaxLocalRanks, "an array for every local rank");

// One block: thread p signals and waits for peer p. Once it returns without a failure, every peer's stream has reached
// this call and what each wrote before it is visible here. A rank whose barrier has failed (a peer late past the
// deadline, or another call) never arrives again, so that its peers time out and report as well, as they would at
// a two-shot kernel's second barrier: nobody passes FinishGather after the fused work ran on a failed start.
__global__ void ArriveKernel(device::BarrierContext barrier) {
  if (*static_cast<volatile int*>(&barrier.peerControl[barrier.rank]->failureClaimed) != 0) return;
  device::NodeBarrier(barrier, 1);
}

}  // namespace

void PeerGroup::LeaveToReader(const void* gradient, const std::vector<ElementRange>& shards,
                              const std::vector<ElementRange>& readOrder, void* inbox, cudaStream_t stream,
                              ValueTerms& terms, ValueCopies& copies) {
  DeviceGuard guard(device_);
  if (static_cast<int>(shards.size()) != ranks()) throw UsageError("reduce-scatter needs one shard per local rank");
  const Located in = Locate(gradient, shards.back().end() * sizeof(float), "the reduce-scatter input");
  const bool push = inbox != nullptr && pushesTerms();
  const Located box = push ? Locate(inbox, TermsInboxBytes(shards), "the terms inbox") : Located{nullptr, 0};
  const uint64_t boxAt = push ? Mix(box.offset, static_cast<uint64_t>(box.registration - registrations_.data())) : 0;
  StartCall(Mix(Mix(Mix(8, shards.back().end()), in.offset), boxAt));  // the same on every rank: no shard of its own
  ArriveKernel<<<1, kMaxLocalRanks, 0, stream>>>(Barrier());
  GRADAGG_CUDA_CHECK_LAUNCH("ArriveKernel");
  terms = ValueTerms();
  terms.count = copies.count = ranks();
  const size_t largest = LargestShard(shards);
  for (int p = 0; p < ranks(); ++p) {
    copies.at[p] = reinterpret_cast<float*>(in.registration->peer[p] + in.offset) + shards[rank_].begin;
    terms.at[p] = copies.at[p];
    if (push && p != rank_)  // slot p of this rank's inbox (its own has none)
      terms.at[p] = reinterpret_cast<const float*>(box.registration->local + box.offset) + (p < rank_ ? p : p - 1) * largest;
  }
  if (!push) return;
  PushTerms(in, box, shards, readOrder, stream);
  auto* control = reinterpret_cast<ControlBlock*>(scratch_.local);
  TermArrival& arrival = terms.arrival;
  arrival.flags = reinterpret_cast<const unsigned long long*>(&control->termsDelivered[0][0]);
  arrival.stride = kMaxTermChunks;
  arrival.self = rank_;
  arrival.epoch = calls_;
  arrival.chunk = TermChunkElements(largest);
  arrival.timeoutNs = static_cast<uint64_t>(config_.timeoutSeconds * 1e9);
  arrival.failedClaim = &control->termsFailed;
  arrival.failure = termPusher_->failureOnDevice();
}

size_t PeerGroup::TermsInboxBytes(const std::vector<ElementRange>& shards) const {
  return pushesTerms() ? static_cast<size_t>(ranks() - 1) * LargestShard(shards) * sizeof(float) : 0;
}

size_t PeerGroup::TermChunkElements(size_t largestShard) const {
  const size_t fewest = (largestShard + kMaxTermChunks - 1) / kMaxTermChunks;
  return RoundUp(std::max(config_.termChunkBytes / sizeof(float), fewest), 32);  // whole 128-byte lines
}

void PeerGroup::PushTerms(const Located& gradient, const Located& inbox, const std::vector<ElementRange>& shards,
                          const std::vector<ElementRange>& readOrder, cudaStream_t stream) {
  const size_t largest = LargestShard(shards);
  const size_t chunk = TermChunkElements(largest);
  // Every rank's order of reading its chunks, gathered whenever the shards change (alike on every rank).
  if (shards != orderShards_) {
    const size_t count = shards[rank_].count;
    const int chunks = static_cast<int>((count + chunk - 1) / chunk);
    std::vector<int> mine;
    std::vector<char> taken(static_cast<size_t>(chunks), 0);
    const auto take = [&](size_t c) {
      if (taken[c] == 0) mine.push_back(static_cast<int>(c));
      taken[c] = 1;
    };
    for (const ElementRange& range : readOrder) {
      if (range.count == 0 || range.end() > count) continue;
      for (size_t c = range.begin / chunk; c <= (range.end() - 1) / chunk; ++c) take(c);
    }
    for (int c = 0; c < chunks; ++c) take(static_cast<size_t>(c));
    mine.resize(kMaxTermChunks, -1);
    const std::vector<char> all = AllGatherRecord(mine.data(), mine.size() * sizeof(int));
    chunkOrders_.assign(ranks(), std::vector<int>(kMaxTermChunks));
    for (int p = 0; p < ranks(); ++p)
      std::memcpy(chunkOrders_[p].data(), all.data() + p * mine.size() * sizeof(int), mine.size() * sizeof(int));
    orderShards_ = shards;
  }
  // Chunk i of every peer's order, then chunk i + 1: the first chunk every reader waits for goes first.
  termPusher_->Begin(stream);
  for (int i = 0; i < kMaxTermChunks; ++i) {
    for (int step = 1; step < ranks(); ++step) {
      const int reader = (rank_ + step) % ranks();
      const int c = chunkOrders_[reader][i];
      if (c < 0) continue;
      const ElementRange shard = shards[reader];
      const size_t begin = static_cast<size_t>(c) * chunk;
      const size_t count = std::min(chunk, shard.count - begin);
      const int slot = rank_ < reader ? rank_ : rank_ - 1;
      char* to = inbox.registration->peer[reader] + inbox.offset + (slot * largest + begin) * sizeof(float);
      const char* from = gradient.registration->local + gradient.offset + (shard.begin + begin) * sizeof(float);
      termPusher_->Copy(to, from, count * sizeof(float));
      auto* control = reinterpret_cast<ControlBlock*>(scratch_.peer[reader]);
      termPusher_->Flag(&control->termsDelivered[rank_][c], calls_);
    }
  }
  termPusher_->End();
}

void PeerGroup::FinishGather(cudaStream_t stream) {
  DeviceGuard guard(device_);
  if (termPusher_) termPusher_->Join(stream);
  StartCall(9);
  ArriveKernel<<<1, kMaxLocalRanks, 0, stream>>>(Barrier());
  GRADAGG_CUDA_CHECK_LAUNCH("ArriveKernel");
}

}  // namespace gradagg::nvlink
