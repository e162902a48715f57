// All-push kernels, the bandwidth path that only writes over NVLink: every rank reads its own input and pushes each
// peer's part of it into that peer's inbox; the owner of a shard sums what arrived locally and pushes the result.
// Two operations share one kernel:
//   reduce-scatter (own output):  my stripe[i] = sum over ranks of input_p[shard + i]
//   allreduce      (all outputs): output_p[i] = sum over ranks of input_p[i], i in my shard
//
// Every shard is cut into chunks of the same length (set per call so that every block gets work, up to the inbox
// slot; a call of one round may take chunks of up to two slots, the rest in the other parity's slot: a wide round);
// block b takes chunks b, b + B, ... of every shard, one chunk a round. Round s of block b:
// 1. push: once peer r has consumed round s - 2 (the inbox has two slots, by round parity; a call's first round waits
//    for s - 1, all of the block's earlier rounds, so that a wide round finds both slots free and the round after one
//    finds its second half read), copy chunk c of shard r of my input into r's inbox (a run of it to each peer in
//    turn), then raise pushReady on r (system-scope release, with the call's signature);
// 2. reduce: once every peer's round s has arrived, sum chunk c of my shard in local-rank order (mine read from my
//    input, the others from my inbox, all local reads), store the result to my stripe or to every rank's output, then
//    raise pushConsumed on every peer.
// A block pushes round s + 1 before it reduces round s, so the links carry data while it waits. Allreduce ends once
// every peer has consumed this block's last round: their results for these chunks are then in my output.
// Rounds are counted per block across calls (ControlBlock::pushRounds), the same on every rank since every rank
// makes the same calls, so flags only grow and nothing is reset.
#pragma once

#include "intra_node/cuda/dependent_launch.cuh"
#include "intra_node/cuda/peer_barrier.cuh"
#include "intra_node/cuda/peer_order.h"
#include "intra_node/cuda/vector_math.cuh"

namespace gradagg::nvlink::device {

// Vectors a thread handles at a time, their loads issued together: one at a time, a block's round waited on memory
// latency once per vector and a block moved only about 10 GB/s (bench/NOTES.md). Summing loads a vector from every
// rank for each into float32 sums, so it takes fewer where the ranks are many or the elements small (registers).
constexpr int kPushUnroll = 8;
// Vectors a thread pushes to one peer before the next, so that its vectors in flight go to two peers: 4 H100s, 1 GiB
// 4571-4573 us against 4604-4612 pushing the whole chunk to one peer at a time, 256-512 MiB 0.4-0.5% faster, the
// rest the same; 8 (all to one peer) no faster than whole chunks (bench/results/nvlink_allreduce/h100x4/push_runs/).
constexpr int kPushRun = kPushUnroll / 2;
template <typename T, int kRanks>
constexpr int kReduceUnroll = kRanks > 0 && kRanks <= 4 && sizeof(T) == 4 ? 4 : 2;

struct AllPushArgs {
  const void* input;                  // my input, indexed like the full gradient; 16-byte aligned at every shard
  void* peerOutput[kMaxLocalRanks];   // rank p's output, mapped here; only [rank] (my stripe) without kPushToAll
  uint4* peerInbox[kMaxLocalRanks];   // rank p's push inbox, mapped here
  size_t shardBegin[kMaxLocalRanks];  // rank p's shard, in elements of the full gradient; 16-byte multiples
  size_t shardCount[kMaxLocalRanks];
  size_t outputShift;   // output index = full index - outputShift (reduce-scatter writes a stripe)
  size_t chunkVectors;  // vectors in a chunk: a multiple of blockDim.x, at most slotVectors (2 x in a wide round)
  size_t slotVectors;   // vectors in an inbox slot
  size_t chunks;        // chunks in the largest shard (>= gridDim.x)
  int inboxBlocks;      // blocks the inboxes are laid out for (>= gridDim.x)
  PeerOrder order;      // in which order a block pushes to its peers and stores to every output
  BarrierContext barrier;
};

// Where round s of block b from `sender` lies in `receiver`'s inbox: [parity][block][sender, receiver left out].
__device__ inline size_t InboxSlot(const AllPushArgs& args, uint64_t round, int sender, int receiver) {
  const int ranks = args.barrier.ranks;
  const size_t slot = static_cast<size_t>(sender < receiver ? sender : sender - 1);
  return (((round & 1) * args.inboxBlocks + blockIdx.x) * (ranks - 1) + slot) * args.slotVectors;
}

// Vector v of a shard of `count` elements at `shard`: zero past the end.
template <typename T>
__device__ inline uint4 LoadShardVector(const T* shard, size_t count, size_t v) {
  constexpr int kE = Vector<T>::kElements;
  if ((v + 1) * kE <= count) return LoadVector(shard + v * kE);
  uint4 bits = make_uint4(0, 0, 0, 0);
  T* elements = reinterpret_cast<T*>(&bits);
  for (size_t k = 0; v * kE + k < count; ++k) elements[k] = shard[v * kE + k];
  return bits;
}

template <typename T>
__device__ inline void StoreShardVector(T* shard, size_t count, size_t v, uint4 bits) {
  constexpr int kE = Vector<T>::kElements;
  if ((v + 1) * kE <= count) {
    StoreVector(shard + v * kE, bits);
    return;
  }
  const T* elements = reinterpret_cast<const T*>(&bits);
  for (size_t k = 0; v * kE + k < count; ++k) shard[v * kE + k] = elements[k];
}

// Thread p, for each peer p of mine, waits until flags[p] >= target. False on every thread when one timed out.
__device__ inline bool EveryPeerReached(const BarrierContext& context, int ranks, const uint64_t* flags,
                                        uint64_t target, int barrier) {
  const int peer = static_cast<int>(threadIdx.x);
  bool failed = false;
  if (peer < ranks && peer != context.rank) failed = !WaitAtLeast(context, &flags[peer], target, peer, barrier);
  return !__syncthreads_or(failed);
}

// Step 1 for round `round`, chunk `chunk` (`callsFirst`: the call's first round). False on every thread when a peer did
// not free its inbox in time.
template <typename T, int kRanks>
__device__ inline bool PushRound(const AllPushArgs& args, uint64_t round, size_t chunk, bool callsFirst) {
  constexpr int kE = Vector<T>::kElements;
  const BarrierContext& context = args.barrier;
  const int me = context.rank, ranks = kRanks > 0 ? kRanks : context.ranks, peer = static_cast<int>(threadIdx.x);
  const uint64_t* consumed = context.peerControl[me]->pushConsumed[blockIdx.x];
  if (!EveryPeerReached(context, ranks, consumed, callsFirst ? round - 1 : round - 2, 4)) return false;

  // The chunk goes out in runs of kPushRun vectors a thread, to the peers in turn (run k of the chunk to peer
  // k % peers, from vector k / peers x runVectors), so that a thread's vectors in flight go to two peers and no SM
  // feeds one peer alone. The runs are counted on, not divided out: a division per vector made 8-16 MiB 2% slower.
  const T* input = static_cast<const T*>(args.input);
  const size_t chunkVectors = args.chunkVectors, slotVectors = args.slotVectors, runVectors = kPushRun * blockDim.x;
  constexpr int kRunsAtOnce = kPushUnroll / kPushRun;
  const int peers = ranks - 1;
  size_t nextBase = 0;  // the next run: its first vector in the chunk and its peer's place in PushPeerAt
  int nextPeer = 0;
  while (nextBase < chunkVectors) {
    size_t base[kRunsAtOnce];
    int rank[kRunsAtOnce];
#pragma unroll
    for (int h = 0; h < kRunsAtOnce; ++h) {
      base[h] = nextBase;
      rank[h] = PushPeerAt(args.order, me, ranks, nextPeer);
      if (++nextPeer == peers) nextPeer = 0, nextBase += runVectors;
    }
    uint4 data[kPushUnroll];
#pragma unroll
    for (int u = 0; u < kPushUnroll; ++u) {
      const int r = rank[u / kPushRun];
      const size_t i = base[u / kPushRun] + (u % kPushRun) * blockDim.x + threadIdx.x, v = chunk * chunkVectors + i;
      if (i < chunkVectors && v * kE < args.shardCount[r])
        data[u] = LoadShardVector(input + args.shardBegin[r], args.shardCount[r], v);
    }
#pragma unroll
    for (int u = 0; u < kPushUnroll; ++u) {
      const int r = rank[u / kPushRun];
      const size_t i = base[u / kPushRun] + (u % kPushRun) * blockDim.x + threadIdx.x, v = chunk * chunkVectors + i;
      if (i < chunkVectors && v * kE < args.shardCount[r]) {
        *(args.peerInbox[r] + (i < slotVectors ? InboxSlot(args, round, me, r) + i
                                               : InboxSlot(args, round + 1, me, r) + (i - slotVectors))) = data[u];
      }
    }
  }

  __syncthreads();
  if (peer < ranks && peer != me) {
    ControlBlock* theirs = context.peerControl[peer];
    __threadfence_system();
    theirs->pushSignature[round & 1][blockIdx.x][me] = context.signature;
    StoreRelease(&theirs->pushReady[blockIdx.x][me], round);
  }
  return true;
}

// Step 2 for round `round`, chunk `chunk`. False on every thread when a peer's data did not arrive in time or came
// from another kind of call.
template <typename T, int kRanks, bool kPushToAll>
__device__ inline bool ReduceRound(const AllPushArgs& args, uint64_t round, size_t chunk) {
  constexpr int kE = Vector<T>::kElements;
  const BarrierContext& context = args.barrier;
  const int me = context.rank, ranks = kRanks > 0 ? kRanks : context.ranks, peer = static_cast<int>(threadIdx.x);
  ControlBlock* mine = context.peerControl[me];
  bool failed = false;
  if (peer < ranks && peer != me) {
    failed = !WaitAtLeast(context, &mine->pushReady[blockIdx.x][peer], round, peer, 3);
    if (!failed) {
      const uint64_t theirs = *static_cast<volatile uint64_t*>(&mine->pushSignature[round & 1][blockIdx.x][peer]);
      if (theirs != context.signature) {
        RecordFailure(context, BarrierFailure::kMismatch, peer, 3, theirs);
        failed = true;
      }
    }
  }
  if (__syncthreads_or(failed)) return false;

  const T* shard = static_cast<const T*>(args.input) + args.shardBegin[me];
  const size_t count = args.shardCount[me];
  const size_t outputAt = args.shardBegin[me] - args.outputShift;
  const uint4* inbox = args.peerInbox[me];
  const size_t chunkVectors = args.chunkVectors, slotVectors = args.slotVectors;
  constexpr int kU = kReduceUnroll<T, kRanks>;
  for (size_t first = threadIdx.x; first < chunkVectors; first += kU * blockDim.x) {
    bool active[kU];
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const size_t i = first + u * blockDim.x;
      active[u] = i < chunkVectors && (chunk * chunkVectors + i) * kE < count;
    }
    float acc[kU][kE];
#pragma unroll
    for (int p = 0; p < (kRanks > 0 ? kRanks : kMaxLocalRanks); ++p) {
      if (kRanks == 0 && p >= ranks) break;
      const uint4* from = p == me ? nullptr : inbox + InboxSlot(args, round, p, me);
      const uint4* spill = p == me ? nullptr : inbox + InboxSlot(args, round + 1, p, me);
      uint4 terms[kU];
#pragma unroll
      for (int u = 0; u < kU; ++u) {
        const size_t i = first + u * blockDim.x;
        terms[u] = !active[u] ? make_uint4(0, 0, 0, 0)
                   : p == me  ? LoadShardVector(shard, count, chunk * chunkVectors + i)
                              : __ldcg(i < slotVectors ? from + i : spill + (i - slotVectors));
      }
#pragma unroll
      for (int u = 0; u < kU; ++u) Accumulate<T>(acc[u], terms[u], p == 0);
    }
    // Output by output, each getting its kU vectors in a run (4 H100s: 128 MiB 341 GB/s against 338-339 with the
    // outputs taken in turn per vector, 1 GiB 0.4% slower, the sizes between alike; bench/NOTES.md).
    uint4 sums[kU];
#pragma unroll
    for (int u = 0; u < kU; ++u) sums[u] = Round<T>(acc[u]);
#pragma unroll
    for (int j = 0; j < (kPushToAll ? (kRanks > 0 ? kRanks : kMaxLocalRanks) : 1); ++j) {
      if (kPushToAll && kRanks == 0 && j >= ranks) break;
      const int q = kPushToAll ? PeerAt(args.order, me, ranks, j) : me;
      T* const output = static_cast<T*>(args.peerOutput[q]) + outputAt;
#pragma unroll
      for (int u = 0; u < kU; ++u) {
        if (active[u]) StoreShardVector(output, count, chunk * chunkVectors + first + u * blockDim.x, sums[u]);
      }
    }
  }

  __syncthreads();
  if (peer < ranks && peer != me) {
    __threadfence_system();
    StoreRelease(&context.peerControl[peer]->pushConsumed[blockIdx.x][me], round);
  }
  return true;
}

template <typename T, int kRanks, bool kPushToAll>
__global__ void __launch_bounds__(512) AllPushKernel(AllPushArgs args) {
  StartAfterPriorGrids();
  const BarrierContext& context = args.barrier;
  const int ranks = kRanks > 0 ? kRanks : context.ranks;
  ControlBlock* mine = context.peerControl[context.rank];
  const uint64_t before = mine->pushRounds[blockIdx.x];  // read by every thread before thread 0 moves it on
  const size_t rounds = DivUp(args.chunks - blockIdx.x, gridDim.x);
  const auto chunkOf = [&](size_t k) { return blockIdx.x + k * gridDim.x; };

  if (!PushRound<T, kRanks>(args, before + 1, chunkOf(0), true)) return;
  for (size_t k = 0; k < rounds; ++k) {
    if (k + 1 < rounds && !PushRound<T, kRanks>(args, before + k + 2, chunkOf(k + 1), false)) return;
    if (!ReduceRound<T, kRanks, kPushToAll>(args, before + k + 1, chunkOf(k))) return;
  }

  // Allreduce: every peer has stored its results for these chunks into my output.
  if (kPushToAll && !EveryPeerReached(context, ranks, mine->pushConsumed[blockIdx.x], before + rounds, 4)) return;
  if (threadIdx.x == 0) mine->pushRounds[blockIdx.x] = before + rounds;
}

}  // namespace gradagg::nvlink::device
