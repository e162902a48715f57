// One link of the chain between two consecutive NVLink groups (intra_node/group_chain.h): member k of group g and
// member k of group g + 1, the same column of both. Where the two GPUs have peer access, the link is a peer group of
// two and a forward is one kernel writing straight into the other GPU's memory; where they do not, it goes through
// pinned host memory and MPI point-to-point messages (the only pairs that take the host route). MPI side; the peer
// memory is intra_node/cuda/peer_group.h.
#pragma once

#include <cuda_runtime_api.h>

#include <memory>
#include <string>
#include <vector>

#include "common/cuda/device_memory.h"
#include "common/element_range.h"
#include "mpi/communicator.h"
#include "intra_node/cuda/peer_group.h"

namespace gradagg {

class GroupLink {
 public:
  // Collective over `pair` (two ranks: 0 in the lower group, 1 in the upper). `names` name both in messages;
  // `direct`: both GPUs reach each other (else the host route). Keeps its own duplicate of `pair`.
  GroupLink(MPI_Comm pair, std::vector<std::string> names, bool direct, const nvlink::PeerGroupConfig& config);
  ~GroupLink();
  GroupLink(const GroupLink&) = delete;
  GroupLink& operator=(const GroupLink&) = delete;

  bool direct() const { return static_cast<bool>(peers_); }

  // Collective over the pair: both pass their own buffer of the same size and the same range; the sender's
  // elements [range) arrive in the receiver's. Upward: from the lower group's member to the upper's. Stream-ordered
  // on the direct route (both buffers registered); the host route synchronises `stream` and waits for the other
  // rank at most the peer group's timeout (TimeoutError naming it).
  void Forward(float* buffer, ElementRange range, bool upward, cudaStream_t stream);

  // Collective over the pair (no-ops on the host route): see PeerGroup::Register.
  void Register(void* buffer, size_t bytes);
  void Deregister(void* buffer);
  // See PeerGroup::UnmapPeers and ThrowIfFailed.
  void UnmapPeers();
  void ThrowIfFailed() const;
  uint64_t FailedAtNs() const { return peers_ ? peers_->FailedAtNs() : 0; }
  // The other rank is out of step: leaves this rank's peer memory to the process's end (see GpuNode::Abandon).
  void Abandon() noexcept;

 private:
  void ForwardThroughHost(float* buffer, ElementRange range, bool sending, cudaStream_t stream);

  Communicator pair_;
  std::vector<std::string> names_;
  nvlink::PeerGroupConfig config_;
  std::unique_ptr<nvlink::PeerGroup> peers_;     // the direct route
  std::unique_ptr<float, CudaFreeHost> pinned_;  // the host route's staging
  size_t pinnedElements_ = 0;
};

}  // namespace gradagg
