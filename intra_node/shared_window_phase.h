// The host-memory twin of the NVLink phase: ranks of one node share an MPI window (MPI_Win_allocate_shared) and
// read each other's slots directly, as GPUs read each other's memory over NVLink. Shard l of the gradient is local
// rank l's to sum; only the parts a peer must read pass through the window, a chunk at a time, through a small ring
// of slots per rank that stays in the cache the cores share.
//
// A round moves one chunk (the same offset into every shard): rank l
//   1. fills its slot of the round and publishes it (advances its count: intra_node/shared_count.h);
//   2. waits until every peer has published this round;
//   3. reads what it needs from the peers' slots of the round.
// Two slots per rank are enough, with no "done reading" count: a rank fills round r + 2's slot (round r's again)
// only after it saw every peer publish round r + 1, which each peer does after it read round r.
// Reduce-scatter round: 1. every other shard's chunk of our gradient; 3. our shard's chunk summed in local-rank order
//   from our own gradient and the peers' slots, into the stripe.
// All-gather round: 1. our aggregated chunk, into our slot and our gradient; 3. every peer's chunk into our gradient
//   (streamed past the cache when the gradient is too large to stay there between the phases).
// Where our shard lies in one buffer, the stripe is that shard of the gradient itself (StripeInPlace): the sum is
// made in place, phase 2 works there, and step 1 of the all-gather only fills the slot.
// ReduceScatter and AllGather run every round of one phase; AllReduce (one node) runs each chunk's two rounds in
// turn, summing in place, so that the chunk is still in cache when it goes out again.
//
// The rounds are numbered across calls, so the argument holds whatever the shards of the next call; every rank runs
// the same rounds, since the shards (and so the chunks) are the same on every rank.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <vector>

#include "intra_node/intra_node_phase.h"
#include "intra_node/ordered_sum.h"
#include "intra_node/shared_count.h"

namespace gradagg {

class SharedWindowPhase : public IntraNodePhase {
 public:
  // Collective over the node; does not take ownership of `node`. Waits for peers give up after `timeoutSeconds`
  // (0: no limit): inside a call with a TimeoutError naming the late rank; when freeing the window by leaving it to
  // MPI_Finalize or MPI_Abort. `chunkElements` (per shard and round; 0: about 256 KiB a slot) is for tests.
  SharedWindowPhase(MPI_Comm node, double timeoutSeconds, size_t chunkElements = 0);
  // Never blocks for ever: during unwinding, or after Abandon, the window is left to MPI (no collective free).
  ~SharedWindowPhase() override;
  SharedWindowPhase(const SharedWindowPhase&) = delete;
  SharedWindowPhase& operator=(const SharedWindowPhase&) = delete;

  void ReduceScatter(const FlatBuffers& gradient, const std::vector<ElementRange>& shards, float* stripe) override;
  void AllGather(const float* stripe, const std::vector<ElementRange>& shards, const FlatBuffers& gradient) override;
  bool AllReduce(const FlatBuffers& gradient) override;
  float* StripeInPlace(const FlatBuffers& gradient, const std::vector<ElementRange>& shards) override;
  void Abandon() noexcept override { abandoned_ = true; }

 private:
  // One round of the header's steps: fill(slot) writes our slot, read(round) reads the peers' slots of that round.
  template <typename Fill, typename Read>
  void RunRound(Fill fill, Read read);
  // The two kinds of round for chunk `chunk` of `shards`. A null `stripe`: our shard of the gradient stands in for
  // it (the sum in place, the all-gather from there).
  void ReduceScatterRound(const FlatBuffers& gradient, const std::vector<ElementRange>& shards, size_t chunk,
                          float* stripe);
  void AllGatherRound(const float* stripe, const std::vector<ElementRange>& shards, size_t chunk,
                      const FlatBuffers& gradient, Stores stores);
  // Our gradient's `range` summed in local-rank order with the same elements of every peer's slot `sub` of `round`
  // (which holds them from its start), piece by piece into out(piece, offset of the piece in the range).
  template <typename Out>
  void SumWithPeers(const FlatBuffers& gradient, ElementRange range, uint64_t round, int sub, Out out);
  size_t Rounds(const FlatBuffers& gradient, const std::vector<ElementRange>& shards) const;
  // Slot `sub` (a local rank's part) of `owner`'s ring for `round`.
  float* Slot(int owner, uint64_t round, int sub) const;
  // Waits until `count` (local rank `peer`'s) reaches `value`, within the timeout.
  void WaitFor(const SharedCount& count, uint64_t value, int peer, const char* what);
  // The collective free, after a node barrier that completes in time; returns false (the window left as it is) when
  // it does not.
  bool FreeWindow() noexcept;

  MPI_Comm node_;
  double timeoutSeconds_;
  bool abandoned_ = false;
  int localRank_ = 0;
  int localSize_ = 1;
  size_t chunk_ = 0;  // elements per shard and round
  MPI_Win window_ = MPI_WIN_NULL;
  std::vector<float*> rings_;            // every local rank's ring of slots, mapped into this process
  std::vector<SharedCount*> published_;  // every local rank's count of rounds whose slot it filled
  uint64_t rounds_ = 0;                  // ours, since the window was made
  unsigned polls_ = 0;                   // before a wait sleeps
  std::vector<const float*> terms_;      // the sum's terms, reused
};

}  // namespace gradagg
