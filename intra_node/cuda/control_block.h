// What the ranks of one node share for synchronisation, laid out identically in every rank's peer memory, and the
// status a kernel leaves for the host when a barrier fails. Plain C++: included by kernels and host code alike.
#pragma once

#include <cstdint>

namespace gradagg::nvlink {

constexpr int kMaxLocalRanks = 16;
constexpr int kMaxBlocks = 512;

// In rank r's peer memory: arrived[b][p] is the last barrier epoch that local rank p's block b signalled to r, and
// signature[b][p] what p's call looked like (size, type, operation), so a mismatched call is caught at the first
// barrier instead of corrupting memory. Epochs only grow, so nothing is ever reset.
//
// The all-push kernels count rounds instead (all_push_kernel.cuh): pushReady[b][p] is the last round local rank p's
// block b put into r's inbox, pushConsumed[b][p] the last round of r's data that p's block b has summed (and whose
// results it has stored), pushSignature[s % 2][b][p] the call that round s belongs to. pushRounds[b] is r's own
// count of rounds that its block b has run so far; only r touches it. failureClaimed is set by the first of r's
// blocks that records a barrier failure (an atomic in r's own device memory: host memory may not take atomics).
struct ControlBlock {
  uint64_t arrived[kMaxBlocks][kMaxLocalRanks];
  uint64_t signature[kMaxBlocks][kMaxLocalRanks];
  uint64_t pushReady[kMaxBlocks][kMaxLocalRanks];
  uint64_t pushConsumed[kMaxBlocks][kMaxLocalRanks];
  uint64_t pushSignature[2][kMaxBlocks][kMaxLocalRanks];
  uint64_t pushRounds[kMaxBlocks];
  int failureClaimed;
};

enum class BarrierFailure : int { kNone = 0, kTimeout = 1, kMismatch = 2 };

// In pinned, mapped host memory: the first failure of any block of any call, written once by the device.
struct BarrierStatus {
  int failure;  // BarrierFailure
  int peer;     // local rank that never arrived or called differently
  int block;
  int barrier;    // 1: start of the call, 2: end; all-push: 3 waiting for a round's data, 4 for its consumption
  uint64_t call;  // the call's number
  uint64_t mine;  // signatures, for kMismatch
  uint64_t theirs;
  uint64_t timeNs;  // the GPU's global timer when it was seen: which of several groups failed first
};

// Barrier epochs of call n: n * kBarriersPerCall + k for barrier k.
constexpr uint64_t kBarriersPerCall = 4;

namespace device {

// What a kernel needs to meet its peers, passed by value in the kernel's arguments.
struct BarrierContext {
  ControlBlock* peerControl[kMaxLocalRanks];  // each rank's ControlBlock, mapped here (own one at [rank])
  BarrierStatus* status;                      // host-mapped
  uint64_t call;
  uint64_t signature;
  uint64_t timeoutNs;
  int rank;
  int ranks;
};

}  // namespace device

}  // namespace gradagg::nvlink
