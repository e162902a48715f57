// Two-shot kernels, the bandwidth path: every rank works only on its own shard, reading peers' registered buffers
// directly with 16-byte loads and writing into them with 16-byte stores. Three operations share one kernel:
//   reduce-scatter (kReduce, own output):  my stripe[i] = sum over ranks of input_p[shard + i]
//                                          (with a carry, float32: carry[i] + that sum, the carry the first term)
//   all-gather     (copy,    all outputs): output_p[shard + i] = my stripe[i] for every rank p
//   allreduce      (kReduce, all outputs): output_p[i] = sum over ranks of input_p[i], i in my shard
//
// 1. barrier with the same block of every peer: their streams have reached this call, so their inputs are ready
//    and their outputs are free to overwrite;
// 2. each block takes its part of my shard, sums it over local ranks 0, 1, ..., G-1 (or copies it) and stores
//    the result to my output, or to every rank's output;
// 3. barrier again: no peer still reads or writes this rank's memory for this part when the kernel ends.
// Which part of a shard block b takes is the same function of b on every rank, so per-block barriers suffice; no
// grid-wide sync is needed.
#pragma once

#include <type_traits>

#include "intra_node/cuda/dependent_launch.cuh"
#include "intra_node/cuda/peer_barrier.cuh"
#include "intra_node/cuda/peer_order.h"
#include "intra_node/cuda/vector_math.cuh"

namespace gradagg::nvlink::device {

struct TwoShotArgs {
  const void* peerInput[kMaxLocalRanks];  // rank p's input, mapped here (own at [rank]); only [rank] without kReduce
  void* peerOutput[kMaxLocalRanks];       // rank p's output, mapped here; only [rank] without kPushToAll
  size_t shardBegin;                      // my shard, in the index space of the full gradient
  size_t shardCount;
  size_t inputShift;   // input index = full index - inputShift (all-gather reads a stripe)
  size_t outputShift;  // output index = full index - outputShift (reduce-scatter writes a stripe)
  // Reduce-scatter of float32 only, or null: this rank's running sum of its shard over the ranks before the group
  // (indexed like the output, may be the output), added first. How a sum passes from group to group in rank order.
  const float* carry;
  bool vector;       // every pointer used is 16-byte aligned at the shard's start
  bool interleaved;  // blocks take interleaved chunks of the shard instead of one slice each
  PeerOrder order;   // in which order a block stores to every rank's output
  BarrierContext barrier;
};

// The vectors one thread handles: base, base + step, ... below limit (full-gradient indices).
struct ThreadVectors {
  size_t base;
  size_t step;
  size_t limit;
};

// Sums (or copies) the vector at full-gradient index i and stores it to my output or to every rank's.
template <typename T, int kRanks, bool kReduce>
__device__ inline uint4 ReduceVector(const TwoShotArgs& args, int ranks, size_t i) {
  constexpr int kE = Vector<T>::kElements;
  if constexpr (kReduce) {
    float acc[kE];
    bool fresh = true;  // no carry: the first rank's term is assigned
    if constexpr (std::is_same_v<T, float>) {
      if (args.carry != nullptr) {
        Accumulate<float>(acc, LoadVector(args.carry + (i - args.outputShift)), true);
        fresh = false;
      }
    }
    if constexpr (kRanks > 0) {
      uint4 in[kRanks];
#pragma unroll
      for (int p = 0; p < kRanks; ++p) in[p] = LoadVector(static_cast<const T*>(args.peerInput[p]) + i);
#pragma unroll
      for (int p = 0; p < kRanks; ++p) Accumulate<T>(acc, in[p], fresh && p == 0);
    } else {
      for (int p = 0; p < ranks; ++p)
        Accumulate<T>(acc, LoadVector(static_cast<const T*>(args.peerInput[p]) + i), fresh && p == 0);
    }
    return Round<T>(acc);
  } else {
    return LoadVector(static_cast<const T*>(args.peerInput[args.barrier.rank]) + (i - args.inputShift));
  }
}

template <typename T, int kRanks, bool kPushToAll>
__device__ inline void StoreResult(const TwoShotArgs& args, int ranks, size_t i, uint4 v) {
  if constexpr (kPushToAll) {
#pragma unroll
    for (int j = 0; j < (kRanks > 0 ? kRanks : ranks); ++j) {
      const int p = PeerAt(args.order, args.barrier.rank, kRanks > 0 ? kRanks : ranks, j);
      StoreVector(static_cast<T*>(args.peerOutput[p]) + (i - args.outputShift), v);
    }
  } else {
    StoreVector(static_cast<T*>(args.peerOutput[args.barrier.rank]) + (i - args.outputShift), v);
  }
}

// kRanks > 0 fixes the rank count at compile time, so the loads from all peers are issued together. With
// args.interleaved, block b takes chunks b, b + B, ... of blockDim vectors (all blocks work near each other: few
// pages at a time); else one contiguous slice per block.
template <typename T, int kRanks, bool kReduce, bool kPushToAll>
__global__ void __launch_bounds__(512) TwoShotKernel(TwoShotArgs args) {
  StartAfterPriorGrids();
  constexpr int kE = Vector<T>::kElements;
  const int rank = args.barrier.rank;
  const int ranks = kRanks > 0 ? kRanks : args.barrier.ranks;
  size_t begin = args.shardBegin, end = args.shardBegin + args.shardCount;
  if (!args.interleaved) {
    const BlockRange slice = RangeOfBlock(args.shardCount, kE);
    begin = args.shardBegin + slice.begin;
    end = args.shardBegin + slice.end;
  }
  const size_t vectorEnd = args.vector ? begin + (end - begin) / kE * kE : begin;
  const size_t threadsBefore =
      args.interleaved ? static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x : threadIdx.x;
  const size_t threadCount = args.interleaved ? static_cast<size_t>(gridDim.x) * blockDim.x : blockDim.x;
  const ThreadVectors mine{begin + threadsBefore * kE, threadCount * kE, vectorEnd};

  // 1. Peers have reached this call.
  if (!NodeBarrier(args.barrier, 1)) return;

  // 2. Sum (or copy) my vectors and store them.
  for (size_t i = mine.base; i < mine.limit; i += mine.step)
    StoreResult<T, kRanks, kPushToAll>(args, ranks, i, ReduceVector<T, kRanks, kReduce>(args, ranks, i));
  // The elements after the last whole vector (all of them when a pointer is not 16-byte aligned).
  for (size_t i = vectorEnd + threadsBefore; i < end; i += threadCount) {
    T v;
    if constexpr (kReduce) {
      float acc = 0.0f;
      bool fresh = true;
      if constexpr (std::is_same_v<T, float>) {
        if (args.carry != nullptr) {
          acc = LoadScalar(args.carry + (i - args.outputShift));
          fresh = false;
        }
      }
      for (int p = 0; p < ranks; ++p) {
        const float x = ToFloat(LoadScalar(static_cast<const T*>(args.peerInput[p]) + i));
        acc = fresh && p == 0 ? x : __fadd_rn(acc, x);
      }
      v = FromFloat<T>(acc);
    } else {
      v = static_cast<const T*>(args.peerInput[rank])[i - args.inputShift];
    }
    if constexpr (kPushToAll) {
      for (int j = 0; j < ranks; ++j)
        static_cast<T*>(args.peerOutput[PeerAt(args.order, rank, ranks, j)])[i - args.outputShift] = v;
    } else {
      static_cast<T*>(args.peerOutput[rank])[i - args.outputShift] = v;
    }
  }

  // 3. Every peer is done with this block's part of my memory.
  NodeBarrier(args.barrier, 2);
}

}  // namespace gradagg::nvlink::device
