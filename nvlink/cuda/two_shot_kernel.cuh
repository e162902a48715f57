// Two-shot kernels, the bandwidth path: every rank works only on its own shard, reading peers' registered buffers
// directly with 16-byte loads and writing into them with 16-byte stores. Three operations share one kernel:
//   reduce-scatter (kReduce, own output):  my stripe[i] = sum over ranks of input_p[shard + i]
//   all-gather     (copy,    all outputs): output_p[shard + i] = my stripe[i] for every rank p
//   allreduce      (kReduce, all outputs): output_p[i] = sum over ranks of input_p[i], i in my shard
//
// 1. barrier with the same block of every peer: their streams have reached this call, so their inputs are ready
//    and their outputs are free to overwrite;
// 2. each block takes its slice of my shard, sums it over local ranks 0, 1, ..., G-1 (or copies it) and stores
//    the result to my output, or to every rank's output;
// 3. barrier again: no peer still reads or writes this rank's memory for this slice when the kernel ends.
// Peers' block b touch only slice b of each shard, so per-block barriers suffice; no grid-wide sync is needed.
#pragma once

#include "nvlink/cuda/peer_barrier.cuh"
#include "nvlink/cuda/vector_math.cuh"

namespace gradagg::nvlink::device {

struct TwoShotArgs {
  const void* peerInput[kMaxLocalRanks];  // rank p's input, mapped here (own at [rank]); only [rank] without kReduce
  void* peerOutput[kMaxLocalRanks];       // rank p's output, mapped here; only [rank] without kPushToAll
  size_t shardBegin;                      // my shard, in the index space of the full gradient
  size_t shardCount;
  size_t inputShift;   // input index = full index - inputShift (all-gather reads a stripe)
  size_t outputShift;  // output index = full index - outputShift (reduce-scatter writes a stripe)
  bool vector;         // every pointer used is 16-byte aligned at the shard's start
  BarrierContext barrier;
};

// kRanks > 0 fixes the rank count at compile time, so the loads from all peers are issued together.
template <typename T, int kRanks, bool kReduce, bool kPushToAll>
__global__ void __launch_bounds__(512) TwoShotKernel(TwoShotArgs args) {
  constexpr int kE = Vector<T>::kElements;
  const int rank = args.barrier.rank;
  const int ranks = kRanks > 0 ? kRanks : args.barrier.ranks;
  const BlockRange slice = RangeOfBlock(args.shardCount, kE);
  const size_t begin = args.shardBegin + slice.begin, end = args.shardBegin + slice.end;
  const size_t vectorEnd = args.vector ? begin + (end - begin) / kE * kE : begin;
  const size_t stride = static_cast<size_t>(blockDim.x) * kE;

  // 1. Peers have reached this call.
  if (!NodeBarrier(args.barrier, 1)) return;

  // 2. Sum (or copy) my shard's slice and store it.
  for (size_t i = begin + threadIdx.x * kE; i < vectorEnd; i += stride) {
    uint4 v;
    if constexpr (kReduce) {
      float acc[kE];
      uint4 in[kRanks > 0 ? kRanks : 1];
      if constexpr (kRanks > 0) {
#pragma unroll
        for (int p = 0; p < kRanks; ++p) in[p] = LoadVector(static_cast<const T*>(args.peerInput[p]) + i);
#pragma unroll
        for (int p = 0; p < kRanks; ++p) Accumulate<T>(acc, in[p], p == 0);
      } else {
        for (int p = 0; p < ranks; ++p)
          Accumulate<T>(acc, LoadVector(static_cast<const T*>(args.peerInput[p]) + i), p == 0);
      }
      v = Round<T>(acc);
    } else {
      v = LoadVector(static_cast<const T*>(args.peerInput[rank]) + (i - args.inputShift));
    }
    if constexpr (kPushToAll) {
#pragma unroll
      for (int p = 0; p < (kRanks > 0 ? kRanks : ranks); ++p)
        StoreVector(static_cast<T*>(args.peerOutput[p]) + (i - args.outputShift), v);
    } else {
      StoreVector(static_cast<T*>(args.peerOutput[rank]) + (i - args.outputShift), v);
    }
  }
  for (size_t i = vectorEnd + threadIdx.x; i < end; i += blockDim.x) {
    T v;
    if constexpr (kReduce) {
      float acc = 0.0f;
      for (int p = 0; p < ranks; ++p) {
        const float x = ToFloat(LoadScalar(static_cast<const T*>(args.peerInput[p]) + i));
        acc = p == 0 ? x : __fadd_rn(acc, x);
      }
      v = FromFloat<T>(acc);
    } else {
      v = static_cast<const T*>(args.peerInput[rank])[i - args.inputShift];
    }
    if constexpr (kPushToAll) {
      for (int p = 0; p < ranks; ++p) static_cast<T*>(args.peerOutput[p])[i - args.outputShift] = v;
    } else {
      static_cast<T*>(args.peerOutput[rank])[i - args.outputShift] = v;
    }
  }

  // 3. Every peer is done with this slice of my memory.
  NodeBarrier(args.barrier, 2);
}

}  // namespace gradagg::nvlink::device
