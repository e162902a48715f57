// A node barrier alone, as a one-block kernel on the call's stream: where the phases left to the reader and the
// copy-scatter allreduce meet their peers between kernels and copies of their own.
#include "common/cuda/cuda_error.h"
#include "intra_node/cuda/peer_barrier.cuh"
#include "intra_node/cuda/peer_group.h"
#include "intra_node/cuda/peer_group_internal.h"

namespace gradagg::nvlink {
namespace {

// Thread p signals and waits for peer p. Once it returns without a failure, every peer's stream has reached this
// barrier of the call and what each wrote before it is visible here. A rank whose barrier has failed (a peer late past
// the deadline, or another call) never arrives again, so that its peers time out and report as well, as they would at
// a two-shot kernel's second barrier.
__global__ void ArriveKernel(device::BarrierContext context, int barrier) {
  if (*static_cast<volatile int*>(&context.peerControl[context.rank]->failureClaimed) != 0) return;
  device::NodeBarrier(context, barrier);
}

}  // namespace

void PeerGroup::Arrive(int barrier, cudaStream_t stream) {
  ArriveKernel<<<1, kMaxLocalRanks, 0, stream>>>(Barrier(), barrier);
  GRADAGG_CUDA_CHECK_LAUNCH("ArriveKernel");
}

}  // namespace gradagg::nvlink
