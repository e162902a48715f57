// Large allreduces with the all-gather on the copy engines. On 4 H100s the copy engines push to all three peers at
// once at ~385 GB/s per GPU where stores from every multiprocessor reach ~335-360 (bench/results/nvlink_allreduce/
// h100x4/copy_gather/), and they need no multiprocessor. So the call is cut into pieces; for each, the all-push
// kernel sums this rank's shard of the piece into its own output (a reduce-scatter: the multiprocessors push only the
// peers' terms), and then a stream per peer step copies that result into the peer's output while the kernel reduces
// the next piece. A barrier ends the call once every stream has copied: a rank passes it only when every peer has
// passed its own copies, so everything written into its output has landed.
//
// In place is safe: a piece's copy into rank q's output overwrites q's input only where q pushed it to the owner
// before the owner's kernel for that piece could end.
#include <algorithm>

#include "common/cuda/cuda_error.h"
#include "intra_node/cuda/peer_group.h"
#include "intra_node/cuda/peer_group_internal.h"

namespace gradagg::nvlink {

size_t DefaultCopyGatherMinBytes(int ranks) {
  (void)ranks;
  return kNever;
}

int DefaultCopyGatherPieces(int ranks) {
  (void)ranks;
  return 4;
}

void PeerGroup::CopyGatherAllReduce(const TwoShotCall& call, const std::vector<ElementRange>& shards, ElementType type,
                                    cudaStream_t stream) {
  const int pieces = config_.copyGatherPieces;
  const size_t elementBytes = ElementBytes(type);
  // Every piece of every shard starts 16-byte aligned where the shard does: pieces are whole 16-byte vectors.
  const size_t pieceCount = RoundUp((call.largestShard + pieces - 1) / pieces, 16 / elementBytes);
  while (static_cast<int>(gatherStreams_.size()) < ranks() - 1) gatherStreams_.push_back(MakeNonBlockingStream());

  char* const mine = call.output.registration->local + call.output.offset;
  for (int k = 0; k < pieces; ++k) {
    std::vector<ElementRange> piece;
    size_t largest = 0;
    for (const ElementRange& shard : shards) {
      const size_t skip = std::min(shard.count, k * pieceCount);
      piece.push_back({shard.begin + skip, std::min(pieceCount, shard.count - skip)});
      largest = std::max(largest, piece.back().count);
    }
    if (largest == 0) break;  // the same on every rank: the pieces are cut from the same shards
    const ElementRange own = piece[rank_];
    LaunchAllPush({call.input, call.output, own, largest, 0, 0, true, false}, piece, type, stream);
    if (own.count == 0) continue;
    const cudaEvent_t reduced = gatherEvents_[k];
    GRADAGG_CUDA_CHECK(cudaEventRecord(reduced, stream));
    for (int step = 1; step < ranks(); ++step) {
      // At step j every rank writes to rank + j: each receives from one peer per step.
      const int peer = (rank_ + step) % ranks();
      cudaStream_t copier = gatherStreams_[step - 1].get();
      GRADAGG_CUDA_CHECK(cudaStreamWaitEvent(copier, reduced, 0));
      const size_t at = own.begin * elementBytes;
      GRADAGG_CUDA_CHECK(cudaMemcpyAsync(call.output.registration->peer[peer] + call.output.offset + at, mine + at,
                                         own.count * elementBytes, cudaMemcpyDeviceToDevice, copier));
    }
  }
  for (int step = 1; step < ranks(); ++step) {
    const cudaEvent_t copied = gatherEvents_[pieces + step - 1];
    GRADAGG_CUDA_CHECK(cudaEventRecord(copied, gatherStreams_[step - 1].get()));
    GRADAGG_CUDA_CHECK(cudaStreamWaitEvent(stream, copied, 0));
  }
  Arrive(2, stream);
}

}  // namespace gradagg::nvlink
