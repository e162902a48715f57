// The copy-scatter allreduce's kernel (copy_scatter_allreduce.cu): once the copy engines have put every peer's terms
// of this rank's shard into its copy inbox (a slot per sender) and a barrier has seen all of them land, it sums the
// shard in local-rank order (its own terms from its input, the rest from the inbox, all local reads) and stores the
// result into every rank's output:
//   output_q[i] = input_0[i] + ... + input_{G-1}[i], i in my shard, for every rank q.
// Block b takes a contiguous slice of the shard, in parts of kU vectors a thread; each part's sums go to every output
// in turn, kU vectors a run, from the block's own first peer (PeerOrder), as all-push's results do.
#pragma once

#include "intra_node/cuda/control_block.h"
#include "intra_node/cuda/peer_order.h"
#include "intra_node/cuda/vector_math.cuh"

namespace gradagg::nvlink::device {

struct CopyScatterArgs {
  const void* input;                 // my input, indexed like the full gradient
  void* peerOutput[kMaxLocalRanks];  // rank p's output, mapped here, indexed like the full gradient
  const char* inbox;                 // my copy inbox: [sender, me left out] slots of slotBytes
  size_t slotBytes;                  // a multiple of 16
  size_t shardBegin;                 // my shard, in elements; 16-byte aligned in input and every output
  size_t shardCount;
  PeerOrder order;
  BarrierContext barrier;  // for this rank and the group size; the kernel only reads whether it failed
};

// Vectors a thread sums at a time, their loads issued together (registers, as all-push's kReduceUnroll).
template <typename T, int kRanks>
constexpr int kCopyScatterUnroll = kRanks > 0 && kRanks <= 4 && sizeof(T) == 4 ? 4 : 2;

template <typename T, int kRanks>
__global__ void __launch_bounds__(512) CopyScatterGatherKernel(CopyScatterArgs args) {
  const BarrierContext& context = args.barrier;
  // After a failed barrier the inbox may hold anything: nothing is summed, and the call's last barrier never comes.
  if (*static_cast<volatile int*>(&context.peerControl[context.rank]->failureClaimed) != 0) return;
  constexpr int kE = Vector<T>::kElements;
  constexpr int kU = kCopyScatterUnroll<T, kRanks>;
  const int me = context.rank, ranks = kRanks > 0 ? kRanks : context.ranks;
  const T* shard = static_cast<const T*>(args.input) + args.shardBegin;
  const size_t count = args.shardCount;
  const size_t vectors = DivUp(count, kE), part = kU * blockDim.x;
  for (size_t first = blockIdx.x * part + threadIdx.x; first < vectors; first += gridDim.x * part) {
    float acc[kU][kE];
#pragma unroll
    for (int p = 0; p < (kRanks > 0 ? kRanks : kMaxLocalRanks); ++p) {
      if (kRanks == 0 && p >= ranks) break;
      const uint4* slot = reinterpret_cast<const uint4*>(args.inbox + (p < me ? p : p - 1) * args.slotBytes);
      uint4 terms[kU];
#pragma unroll
      for (int u = 0; u < kU; ++u) {
        const size_t v = first + u * blockDim.x;
        terms[u] = v >= vectors ? make_uint4(0, 0, 0, 0)
                   : p == me    ? LoadShardVector(shard, count, v)
                                : __ldcg(slot + v);  // past the shard's end: never stored
      }
#pragma unroll
      for (int u = 0; u < kU; ++u) Accumulate<T>(acc[u], terms[u], p == 0);
    }
    uint4 sums[kU];
#pragma unroll
    for (int u = 0; u < kU; ++u) sums[u] = Round<T>(acc[u]);
#pragma unroll
    for (int j = 0; j < (kRanks > 0 ? kRanks : kMaxLocalRanks); ++j) {
      if (kRanks == 0 && j >= ranks) break;
      T* const output = static_cast<T*>(args.peerOutput[PeerAt(args.order, me, ranks, j)]) + args.shardBegin;
#pragma unroll
      for (int u = 0; u < kU; ++u) {
        const size_t v = first + u * blockDim.x;
        if (v < vectors) StoreShardVector(output, count, v, sums[u]);
      }
    }
  }
}

}  // namespace gradagg::nvlink::device
