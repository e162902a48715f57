// Line packets: 128-byte lines of 30 data words and two flag words (the call's number, the last word of each 64-byte
// half), each line written by eight lanes of one warp in one 16-byte store apiece and read the same way, as NCCL's
// LL128 protocol does, but with a flag in each half. One flag a line trusts NVLink to deliver a warp's aligned 128-byte
// store whole and in address order; on 4 H100s a reader now and then saw the flag half of a line while the first half
// still held an earlier call's data (bench/results/nvlink_allreduce/h100x4/torn_lines/), as NCCL reports of the two
// 64-byte halves on GH200's PCIe to NVLink-C2C path. So each half is trusted on its own flag. Against packets.cuh (4
// data bytes per 4 flag bytes, safe even when a 16-byte store splits) a line carries 30 data words in 32 instead of 4
// in 8.
//
// Lanes 8k .. 8k + 7 of a warp handle one line (k = 0..3: a warp covers 4 lines at a time); lane 8k + v holds the
// line's 16-byte vector v, and the last word of vectors 3 and 7 is a flag: vectors 0-3 carry data words 0-14, vectors
// 4-7 words 15-29. Every loop over lines must be warp-uniform: waits decide with the whole warp.
#pragma once

#include <cstddef>
#include <cstdint>

#include "intra_node/cuda/packets.cuh"
#include "intra_node/cuda/peer_order.h"

namespace gradagg::nvlink::device {

constexpr int kLineVectors = 8;                                           // 16-byte vectors in a line
constexpr int kFlagEvery = 4;                                             // vectors per flag: one in each 64-byte half
constexpr int kLineWords = 4 * kLineVectors - kLineVectors / kFlagEvery;  // data words in a line
constexpr int kLinesPerWarp = 32 / kLineVectors;                          // lines a warp covers at a time
// The line kernels' blocks: 4 warps, and up to 8 of them on a multiprocessor at once (64 registers a thread at most).
constexpr int kLineThreads = 128;
constexpr int kLineBlocksPerMultiprocessor = 8;
static_assert(kLineVectors % kFlagEvery == 0, "a line ends with a flag");
constexpr unsigned kFullWarp = 0xffffffffu;

__device__ inline int LineVector() { return static_cast<int>(threadIdx.x % kLineVectors); }
__device__ inline int LineOfLane() { return static_cast<int>(threadIdx.x % 32) / kLineVectors; }

// Whether this lane's last word is a flag (the last vector of each half).
__device__ inline bool IsFlagLane() { return LineVector() % kFlagEvery == kFlagEvery - 1; }
// How many of this lane's 4 words carry data (a flag lane: 3).
__device__ inline int LaneDataWords() { return IsFlagLane() ? 3 : 4; }
// The line's data word this lane's first word holds: 4 per vector before it, less the flags among them.
__device__ inline int LaneFirstWord() { return 4 * LineVector() - LineVector() / kFlagEvery; }

__device__ inline void StoreLineVector(uint4* at, uint4 v) {
  asm volatile("st.volatile.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(at), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
               : "memory");
}

__device__ inline uint4 LoadLineVector(const uint4* at) {
  uint4 v;
  asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(at)
               : "memory");
  return v;
}

// Spins until both halves of every valid line of the warp carry `flag` (v: this lane's vector of it). Warp-uniform:
// true on every lane, or false on every lane once the deadline has passed.
__device__ inline bool WaitLine(const uint4* at, bool valid, uint32_t flag, uint64_t deadline, uint4& v) {
  for (int spins = 0;; ++spins) {
    if (valid) v = LoadLineVector(at);
    const bool late = valid && IsFlagLane() && v.w != flag;
    if (!__any_sync(kFullWarp, late)) return true;
    if ((spins & 1023) == 1023 && __any_sync(kFullWarp, GlobalTimerNs() > deadline)) return false;
  }
}

// WaitLine for local rank `peer`'s line at `at`; when it does not come in time, the failure recorded (as at
// `barrier`, by the warp's first lane). Warp-uniform.
__device__ inline bool ReceiveLine(const PacketArgs& args, const uint4* at, bool valid, uint32_t flag,
                                   uint64_t deadline, int peer, int barrier, uint4& v) {
  if (WaitLine(at, valid, flag, deadline, v)) return true;
  if (threadIdx.x % 32 == 0) RecordFailure(args.barrier, BarrierFailure::kTimeout, peer, barrier, 0);
  return false;
}

// This lane's words of a line whose first data word is message word `first`: words past `words` read as 0.
template <typename T>
__device__ inline uint4 LoadLaneWords(const T* input, size_t count, size_t words, size_t first) {
  uint32_t w[4] = {0, 0, 0, 0};
  const size_t at = first + static_cast<size_t>(LaneFirstWord());
  for (int k = 0; k < LaneDataWords(); ++k)
    if (at + k < words) w[k] = LoadWord(input, count, at + k);
  return make_uint4(w[0], w[1], w[2], w[3]);
}

// This lane's data words of a line (first data word `first`) stored to output, those below `count` elements.
template <typename T>
__device__ inline void StoreLaneWords(T* output, size_t count, size_t first, uint4 v) {
  constexpr int kPerWord = 4 / static_cast<int>(sizeof(T));
  const uint32_t w[4] = {v.x, v.y, v.z, v.w};
  const size_t at = first + static_cast<size_t>(LaneFirstWord());
  for (int k = 0; k < LaneDataWords(); ++k) {
    const T* elements = reinterpret_cast<const T*>(&w[k]);
#pragma unroll
    for (int e = 0; e < kPerWord; ++e)
      if ((at + k) * kPerWord + e < count) output[(at + k) * kPerWord + e] = elements[e];
  }
}

// The vector to send: the lane's data words, and the flag in a flag lane's last word.
__device__ inline uint4 WithFlag(uint4 v, uint32_t flag) {
  if (IsFlagLane()) v.w = flag;
  return v;
}

// Sender s's lines in an inbox: after its slot's first 128 bytes (the signature pair).
__device__ inline uint4* SlotLines(uint4* inbox, int sender, size_t slotPairs) {
  return inbox + static_cast<size_t>(sender) * slotPairs + kLineVectors;
}

// This lane's vector of line `line` of this rank's slot in `peer`'s inbox, with the flag. Warp-uniform: the line's
// eight lanes store together.
__device__ inline void SendLine(const PacketArgs& args, int peer, size_t line, bool valid, uint4 v, uint32_t flag) {
  __syncwarp();
  if (valid)
    StoreLineVector(
        SlotLines(args.peerInbox[peer], args.barrier.rank, args.slotPairs) + line * kLineVectors + LineVector(),
        WithFlag(v, flag));
}

// The same line to every peer, at step j to rank + j.
__device__ inline void SendLineToPeers(const PacketArgs& args, size_t line, bool valid, uint4 v, uint32_t flag) {
  for (int j = 1; j < args.barrier.ranks; ++j)
    SendLine(args, PeerAt(PeerOrder::kRotated, args.barrier.rank, args.barrier.ranks, j), line, valid, v, flag);
}

// acc = words (first) or acc + words, element by element, for a lane's 4 words.
template <typename T>
__device__ inline void AccumulateWords(float (&acc)[4][4 / sizeof(T)], uint4 v, bool first) {
  const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const T* e = reinterpret_cast<const T*>(&w[k]);
#pragma unroll
    for (int i = 0; i < static_cast<int>(4 / sizeof(T)); ++i)
      acc[k][i] = first ? ToFloat(e[i]) : __fadd_rn(acc[k][i], ToFloat(e[i]));
  }
}

template <typename T>
__device__ inline uint4 RoundWords(const float (&acc)[4][4 / sizeof(T)]) {
  uint32_t w[4];
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    T* e = reinterpret_cast<T*>(&w[k]);
#pragma unroll
    for (int i = 0; i < static_cast<int>(4 / sizeof(T)); ++i) e[i] = FromFloat<T>(acc[k][i]);
  }
  return make_uint4(w[0], w[1], w[2], w[3]);
}

// A line of the message summed over the ranks in local-rank order, float32, rounded to T, into this lane's words of
// `sum`: this rank's words from the input (the line's first data word `first`), every peer p's from its line at
// `at(p)` in this rank's inbox. Warp-uniform; false (the failure recorded, as at `barrier`) when a peer's line does not
// come in time.
template <typename T, typename At>
__device__ inline bool SumLineInRankOrder(const PacketArgs& args, size_t words, size_t first, bool valid, At at,
                                          uint32_t flag, uint64_t deadline, int barrier, uint4& sum) {
  const T* input = static_cast<const T*>(args.input);
  float acc[4][4 / sizeof(T)];
  for (int p = 0; p < args.barrier.ranks; ++p) {
    uint4 in = make_uint4(0, 0, 0, 0);
    if (p == args.barrier.rank) {
      if (valid) in = LoadLaneWords(input, args.count, words, first);
    } else if (!ReceiveLine(args, at(p), valid, flag, deadline, p, barrier, in)) {
      return false;
    }
    AccumulateWords<T>(acc, in, p == 0);
  }
  sum = RoundWords<T>(acc);
  return true;
}

}  // namespace gradagg::nvlink::device
