// The GPUs of one node, one rank per GPU: which can reach which, the fully connected groups they form, and the
// node-wide allreduce on device buffers. This is the MPI side (handle exchange over the node communicator); the
// peer memory and kernels are intra_node/cuda/peer_group.h.
//
//   1. every rank names its GPU by PCI bus id; the node all-gathers them and every rank's row of direct access;
//   2. the ranks split into fully connected groups (intra_node/peer_groups.h);
//   3. one group (an NVSwitch node): a PeerGroup over all of them, kernels only;
//      several groups of one size: a GroupChain (intra_node/group_chain.h): each group reduces inside itself and the sum
//      passes from group to group over links between them, peer memory where a pair has it, host memory where not;
//      otherwise (groups of unequal sizes, no pair across groups with peer access, or forced): the allreduce stages
//      through pinned host memory and the node's shared window, with a warning.
// Whatever the layout, the node's sums add the local ranks in rank order: results are bitwise the same.
#pragma once

#include <cuda_runtime_api.h>
#include <mpi.h>

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "common/element_type.h"
#include "mpi/communicator.h"
#include "intra_node/cuda/peer_group.h"
#include "intra_node/group_chain.h"
#include "intra_node/intra_node_phase.h"
#include "intra_node/peer_groups.h"
#include "intra_node/shared_window_phase.h"

namespace gradagg {

struct GpuNodeConfig {
  nvlink::PeerGroupConfig group;
  int forcedGroupSize = 0;  // GRADAGG_NVLINK_GROUP_SIZE: 0 = from peer access; N = consecutive groups of N
  // GRADAGG_NVLINK_TOPOLOGY (a file, intra_node/peer_groups.h ParsePeerAccess): the access to use, narrowing the measured
  // one, so that any partially connected node can be laid out on a fully connected machine. Empty: as measured.
  PeerAccessMatrix accessOverride;
  // GRADAGG_NVLINK_HOST_BETWEEN_GROUPS=1: several groups reduce through host memory, never forward between groups
  // (the fallback before group chains; for comparison).
  bool hostBetweenGroups = false;
  int traceLevel = 0;  // >= 1: local rank 0 prints the access matrix and the groups on stderr
  // GRADAGG_NVLINK_SHARE_GPUS=1: let several local ranks share a GPU, so the kernels for G ranks can be tested on
  // fewer GPUs. Their kernels then time-slice (they spin on each other's flags): correct, but no measure of speed.
  bool shareGpus = false;
  // GRADAGG_NVLINK_SUM_IN_READER=0: phases 1 and 3 run on a stripe, instead of phase 2's quantizer summing the node's
  // terms as it reads them and its decode writing every rank's gradient (LeavePhasesToPhase2; for comparison).
  bool sumInReader = true;
};

// Defaults overridden by GRADAGG_NVLINK_ONE_SHOT_MAX (bytes), GRADAGG_NVLINK_PACKET_MAX (bytes, 0: off),
// GRADAGG_NVLINK_LINE_MAX (bytes, 0: off), GRADAGG_NVLINK_ONE_SHOT_LINES_ABOVE (bytes),
// GRADAGG_NVLINK_DEPENDENT_LAUNCH_MAX (bytes, 0: none; with GRADAGG_NVLINK_SHARE_GPUS none unless set),
// GRADAGG_NVLINK_STAGING (bytes), GRADAGG_NVLINK_TIMEOUT (seconds), GRADAGG_NVLINK_BLOCKS, GRADAGG_NVLINK_THREADS
// (per block), GRADAGG_NVLINK_INTERLEAVED (0: one slice per block), GRADAGG_NVLINK_ALL_PUSH (1: all-push, 0: owners
// pull; unset: by group size), GRADAGG_NVLINK_PUSH_CHUNK (bytes), GRADAGG_NVLINK_PEER_ORDER (0, 1, 2: PeerOrder),
// GRADAGG_NVLINK_GROUP_SIZE, GRADAGG_NVLINK_TOPOLOGY, GRADAGG_NVLINK_HOST_BETWEEN_GROUPS, GRADAGG_NVLINK_SHARE_GPUS
// (tests only), GRADAGG_NVLINK_SUM_IN_READER and GRADAGG_TRACE. Throws UsageError for a value that does not parse or
// a topology file that cannot be read. GpuNode refuses, on every rank, settings that differ between its ranks (all
// but the timeout, the dependent launches, the trace and GRADAGG_NVLINK_SUM_IN_READER, taken where all have it on).
GpuNodeConfig GpuNodeConfigFromEnvironment(GpuNodeConfig config = {});

class GpuNode : public IntraNodePhase {
 public:
  // Collective over `node` (one rank per GPU; each rank's current device is its GPU). Keeps its own duplicate.
  GpuNode(MPI_Comm node, const GpuNodeConfig& config);
  ~GpuNode() override;
  // Local: the node's ranks are out of step (a failed call, an exception passing). Unmaps the peers' memory and
  // leaves this rank's own (which peers may still map) to the process's end: destruction then waits for no one.
  void Abandon() noexcept override;

  // IntraNodePhase on float32 device memory (the gradient one buffer), ordered on the stream of UseStream.
  void UseStream(cudaStream_t stream) { stream_ = stream; }
  void ReduceScatter(const FlatBuffers& gradient, const std::vector<ElementRange>& shards, float* stripe) override {
    ReduceScatter(gradient.Contiguous(), shards, stripe, stream_);
  }
  void AllGather(const float* stripe, const std::vector<ElementRange>& shards, const FlatBuffers& gradient) override {
    AllGather(stripe, shards, gradient.Contiguous(), stream_);
  }
  // On one fully connected group, unless GpuNodeConfig::sumInReader is off (LeavesPhasesToPhase2).
  bool LeavesPhasesToPhase2() const { return fullyConnected() && config_.sumInReader; }
  bool LeavePhasesToPhase2(const FlatBuffers& gradient, const std::vector<ElementRange>& shards, ValueTerms& terms,
                           ValueCopies& copies) override;
  void FinishGather() override;
  bool AllReduce(const FlatBuffers& gradient) override {
    AllReduce(gradient.Contiguous(), gradient.Contiguous(), gradient.size(), ElementType::kFloat32, stream_);
    return true;
  }

  int localRank() const { return node_.rank(); }
  int localRanks() const { return node_.size(); }
  const PeerAccessMatrix& access() const { return access_; }
  const std::vector<std::vector<int>>& groups() const { return groups_; }
  bool fullyConnected() const { return groups_.size() == 1; }
  // Several groups that forward to each other (else, with several groups, the host path).
  bool chained() const { return static_cast<bool>(chain_); }
  // "one NVLink group of 4", "2 NVLink groups of 2, chained over 2 peer-memory links and 0 host links", ...
  std::string Describe() const;
  const GpuNodeConfig& config() const { return config_; }
  // The node's peer group, when it is one fully connected group (else UsageError): reduce-scatter and all-gather
  // of registered buffers (phases 1 and 3) run there.
  nvlink::PeerGroup& peers();

  // Collective: zero-copy buffers for the two-shot path (see PeerGroup::Register). No-ops across groups.
  void Register(void* buffer, size_t bytes);
  void Deregister(void* buffer);
  // Collective over the node: whether [buffer, buffer + bytes) lies, on every rank, in the same registration at the
  // same offset, so that registered-buffer calls may use it (false across groups; buffer may be null).
  bool RegisteredAlike(const void* buffer, size_t bytes);
  // Allreduces of at most this many bytes take any buffer, registered or not (the one-shot and the packet and line
  // two-shots; across groups, the host path takes any buffer at every size).
  size_t AnyBufferMaxBytes() const;
  // Whether every call takes any device buffers, registered or not (a chain of groups and the host path copy into
  // their own), so that the caller never needs to gather a tensor into a registered one.
  bool TakesAnyBuffer() const { return !fullyConnected(); }

  // Collective over the node: output = sum over local ranks, in local-rank order, of input; stream-ordered when
  // the node is one group or a chain of groups (save links through host memory, which synchronise `stream`); on
  // the host path (float32 only) it synchronises `stream` and stages through host memory.
  void AllReduce(const void* input, void* output, size_t count, ElementType type, cudaStream_t stream);

  // Phases 1 and 3 on float32 device buffers (see PeerGroup::ReduceScatter and AllGather), registered when the node
  // is one group; a chain of groups takes any buffers; the host path stages through host memory and synchronises
  // `stream`.
  void ReduceScatter(const float* input, const std::vector<ElementRange>& shards, float* stripe, cudaStream_t stream);
  void AllGather(const float* stripe, const std::vector<ElementRange>& shards, float* output, cudaStream_t stream);

  // Throws PeerGroupError naming the peer if a barrier of an earlier call failed (see PeerGroup::ThrowIfFailed).
  void ThrowIfFailed() const;

 private:
  void AllReduceThroughHost(const void* input, void* output, size_t count, ElementType type, cudaStream_t stream);
  float* Pinned(size_t count);  // at least `count` floats of pinned host memory, kept

  GpuNodeConfig config_;
  Communicator node_;
  PeerAccessMatrix access_;
  std::vector<std::vector<int>> groups_;
  std::string hostWhy_;                          // why several groups take the host path
  size_t directLinks_ = 0;                       // of the chain, over the whole node
  std::unique_ptr<nvlink::PeerGroup> peers_;     // one group: the whole node
  std::unique_ptr<GroupChain> chain_;            // several groups, forwarding
  std::unique_ptr<SharedWindowPhase> hostTwin_;  // several groups: the host path
  float* pinned_ = nullptr;
  size_t pinnedElements_ = 0;
  cudaStream_t stream_ = nullptr;  // of the IntraNodePhase calls (UseStream)
};

}  // namespace gradagg
