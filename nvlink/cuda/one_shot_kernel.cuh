// One-shot allreduce, the low-latency path for small messages: one barrier per call.
//
// 1. each block pushes its slice of the local input into every peer's inbox, in the slot of this rank;
// 2. barrier with the same block of every peer (their slices have landed here);
// 3. each block sums its slice over local ranks 0, 1, ..., G-1 (own input read locally, the others from the
//    local inbox) and writes it to the local output.
// Inboxes alternate between two halves by call parity: a peer writes half p again two calls later, and by then it
// has passed a barrier of the call in between with this rank, so this rank has finished reading half p.
#pragma once

#include "nvlink/cuda/peer_barrier.cuh"
#include "nvlink/cuda/vector_math.cuh"

namespace gradagg::nvlink::device {

struct OneShotArgs {
  const void* input;
  void* output;
  size_t count;
  void* peerInbox[kMaxLocalRanks];  // rank p's inbox half for this call, mapped here (own one at [rank])
  size_t slotElements;              // elements between two senders' slots in an inbox
  bool vector;                      // input and output are 16-byte aligned
  BarrierContext barrier;
};

template <typename T>
__global__ void __launch_bounds__(512) OneShotAllReduceKernel(OneShotArgs args) {
  constexpr int kE = Vector<T>::kElements;
  const int rank = args.barrier.rank, ranks = args.barrier.ranks;
  const T* input = static_cast<const T*>(args.input);
  T* output = static_cast<T*>(args.output);
  const BlockRange range = RangeOfBlock(args.count, kE);
  const size_t vectorEnd = args.vector ? range.begin + (range.end - range.begin) / kE * kE : range.begin;
  const size_t stride = static_cast<size_t>(blockDim.x) * kE;
  const size_t mySlot = static_cast<size_t>(rank) * args.slotElements;

  // 1. Push.
  for (size_t i = range.begin + threadIdx.x * kE; i < vectorEnd; i += stride) {
    const uint4 v = LoadVector(input + i);
    for (int p = 0; p < ranks; ++p)
      if (p != rank) StoreVector(static_cast<T*>(args.peerInbox[p]) + mySlot + i, v);
  }
  for (size_t i = vectorEnd + threadIdx.x; i < range.end; i += blockDim.x) {
    const T v = input[i];
    for (int p = 0; p < ranks; ++p)
      if (p != rank) static_cast<T*>(args.peerInbox[p])[mySlot + i] = v;
  }

  // 2. Wait for every peer's slice.
  if (!NodeBarrier(args.barrier, 1)) return;

  // 3. Sum in local-rank order.
  const T* inbox = static_cast<const T*>(args.peerInbox[rank]);
  for (size_t i = range.begin + threadIdx.x * kE; i < vectorEnd; i += stride) {
    float acc[kE];
    for (int p = 0; p < ranks; ++p)
      Accumulate<T>(acc, p == rank ? LoadVector(input + i) : LoadVector(inbox + p * args.slotElements + i), p == 0);
    StoreVector(output + i, Round<T>(acc));
  }
  for (size_t i = vectorEnd + threadIdx.x; i < range.end; i += blockDim.x) {
    float acc = 0.0f;
    for (int p = 0; p < ranks; ++p) {
      const float x = ToFloat(p == rank ? input[i] : LoadScalar(inbox + p * args.slotElements + i));
      acc = p == 0 ? x : __fadd_rn(acc, x);
    }
    output[i] = FromFloat<T>(acc);
  }
}

}  // namespace gradagg::nvlink::device
