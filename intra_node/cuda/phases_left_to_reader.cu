// The reduce-scatter and all-gather left to phase 2: instead of summing this rank's shard into a stripe and copying
// the stripe back, the node waits for every peer to reach the call (the two-shot kernel's first barrier, alone) and
// hands out where every rank's shard lies, so that the quantizer reads and sums the terms itself, in local-rank order,
// and the decoder writes the result into every rank's gradient; a second barrier ends the call.
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

void PeerGroup::LeaveToReader(const void* gradient, const std::vector<ElementRange>& shards, cudaStream_t stream,
                              ValueTerms& terms, ValueCopies& copies) {
  DeviceGuard guard(device_);
  if (static_cast<int>(shards.size()) != ranks()) throw UsageError("reduce-scatter needs one shard per local rank");
  const Located in = Locate(gradient, shards.back().end() * sizeof(float), "the reduce-scatter input");
  StartCall(Mix(Mix(8, shards.back().end()), in.offset));  // the same on every rank: no shard of its own
  ArriveKernel<<<1, kMaxLocalRanks, 0, stream>>>(Barrier());
  GRADAGG_CUDA_CHECK_LAUNCH("ArriveKernel");
  terms.count = copies.count = ranks();
  for (int p = 0; p < ranks(); ++p) {
    copies.at[p] = reinterpret_cast<float*>(in.registration->peer[p] + in.offset) + shards[rank_].begin;
    terms.at[p] = copies.at[p];
  }
}

void PeerGroup::FinishGather(cudaStream_t stream) {
  DeviceGuard guard(device_);
  StartCall(9);
  ArriveKernel<<<1, kMaxLocalRanks, 0, stream>>>(Barrier());
  GRADAGG_CUDA_CHECK_LAUNCH("ArriveKernel");
}

}  // namespace gradagg::nvlink
