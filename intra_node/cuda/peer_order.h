// The order in which a block visits the ranks when it writes to several of them (pushes, results stored to every
// output). Sums never follow it: they always run in local-rank order. Plain C++ for the host's configuration; the
// device function is compiled by nvcc only.
#pragma once

namespace gradagg::nvlink {

enum class PeerOrder : int {
  kByGroupSize = -1,     // a PeerGroup's default: by group size (tuning.h)
  kRankOrder = 0,        // 0, 1, ..., G-1 on every rank: every rank writes to rank 0 first (a hot receiver)
  kRotated = 1,          // me, me + 1, ... (mod G): at step j rank r writes to r + j, a permutation, as in a ring
  kRotatedPerBlock = 2,  // me, then the peers rotated by the block too, so each step spreads over all peers
};

#ifdef __CUDACC__
namespace device {

// The j-th rank (0 <= j < ranks) that block blockIdx.x of rank `me` visits; j = 0 is `me` unless kRankOrder.
__device__ inline int PeerAt(PeerOrder order, int me, int ranks, int j) {
  if (order == PeerOrder::kRankOrder) return j;
  if (order == PeerOrder::kRotatedPerBlock && j > 0) j = 1 + static_cast<int>((j - 1 + blockIdx.x) % (ranks - 1));
  const int r = me + j;
  return r < ranks ? r : r - ranks;
}

// The k-th peer (0 <= k < ranks - 1, `me` left out) that block blockIdx.x of rank `me` pushes to.
__device__ inline int PushPeerAt(PeerOrder order, int me, int ranks, int k) {
  if (order == PeerOrder::kRankOrder) return k < me ? k : k + 1;
  return PeerAt(order, me, ranks, k + 1);
}

}  // namespace device
#endif

}  // namespace gradagg::nvlink
