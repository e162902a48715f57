// The reduce-scatter left to its reader: instead of summing this rank's shard into its stripe, the call waits for
// every peer to reach it (the two-shot kernel's first barrier, alone) and hands out where every rank's shard lies, so
// that a later kernel (the quantizer) reads and sums the terms itself, in local-rank order.
#include "common/cuda/cuda_error.h"
#include "gradagg/errors.h"
#include "intra_node/cuda/peer_barrier.cuh"
#include "intra_node/cuda/peer_group.h"
#include "intra_node/cuda/peer_group_internal.h"

namespace gradagg::nvlink {
namespace {

static_assert(ValueTerms::kMax >= kMaxLocalRanks, "a term for every local rank");

// One block: thread p waits for peer p. Every peer's stream has reached this call once it returns.
__global__ void ArriveKernel(device::BarrierContext barrier) { device::NodeBarrier(barrier, 1); }

}  // namespace

ValueTerms PeerGroup::ReduceScatterTerms(const void* input, const std::vector<ElementRange>& shards,
                                         cudaStream_t stream) {
  DeviceGuard guard(device_);
  if (static_cast<int>(shards.size()) != ranks()) throw UsageError("reduce-scatter needs one shard per local rank");
  const Located in = Locate(input, shards.back().end() * sizeof(float), "the reduce-scatter input");
  StartCall(Mix(Mix(6, shards.back().end()), in.offset));  // the same on every rank: no shard of its own
  ArriveKernel<<<1, kMaxLocalRanks, 0, stream>>>(Barrier());
  GRADAGG_CUDA_CHECK_LAUNCH("ArriveKernel");
  ValueTerms terms;
  terms.count = ranks();
  for (int p = 0; p < ranks(); ++p)
    terms.at[p] = reinterpret_cast<const float*>(in.registration->peer[p] + in.offset) + shards[rank_].begin;
  return terms;
}

}  // namespace gradagg::nvlink
