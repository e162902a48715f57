// The node's phases 1 and 3 when its GPUs form several fully connected groups (the MXNet and Blink pattern: reduce
// inside each group, forward across). Groups are runs of consecutive local ranks of one size s (intra_node/peer_groups.h);
// each group cuts the gradient into s columns, and member k of group g owns column k in its group. Member k of
// group g and member k of group g + 1 are joined by a link (intra_node/group_link.h): over peer memory where they reach
// each other, else through pinned host memory.
//
// The summation order is the node's local-rank order, whatever the grouping, so results are bitwise those of one
// group (and of the serial simulation). A sum passes along the chain instead of being combined at the end:
//   reduce   for g = 0 .. m-1: group g reduce-scatters the gradient into its columns, member k starting from the
//            carry (group g-1's column k, forwarded over link k) and adding its group's ranks in order; group m-1
//            then holds the node's sum, column by column;
//   spread   the allreduce: group m-1 all-gathers its columns; for g = m-2 .. 0 each member of group g+1 forwards
//            its column down its link and group g all-gathers the columns. Phase 1 (the reduce-scatter) needs
//            only each group's own shards down there: link g carries its column of [0, end of group g's shards),
//            and each group then gathers its shards' range.
// Phase 3 gathers the owners' stripes the same way: inside each group, up the chain, then down it, each link
// carrying only what lies beyond it.
// The groups run one after the other, so a reduction costs about m times one group's; the allreduce moves every
// byte across a link once each way. Everything is stream-ordered except host-route links, which synchronise the
// stream.
#pragma once

#include <cuda_runtime_api.h>
#include <mpi.h>

#include <memory>
#include <string>
#include <vector>

#include "common/cuda/device_memory.h"
#include "common/element_range.h"
#include "common/element_type.h"
#include "mpi/communicator.h"
#include "intra_node/cuda/peer_group.h"
#include "intra_node/group_link.h"
#include "intra_node/peer_groups.h"

namespace gradagg {

class GroupChain {
 public:
  // Collective over `node`: `groups` equal-sized runs of consecutive local ranks, more than one; `access` the
  // node's (which links are direct); `names[l]` names local rank l in messages.
  GroupChain(MPI_Comm node, const std::vector<std::vector<int>>& groups, const PeerAccessMatrix& access,
             const std::vector<std::string>& names, const nvlink::PeerGroupConfig& config);
  ~GroupChain();
  GroupChain(const GroupChain&) = delete;
  GroupChain& operator=(const GroupChain&) = delete;

  // Whether `groups` can form a chain: more than one, all of one size.
  static bool Fits(const std::vector<std::vector<int>>& groups);

  // Collective over the node, as GpuNode's: any device buffers (the chain copies into its own), every element type.
  void AllReduce(const void* input, void* output, size_t count, ElementType type, cudaStream_t stream);
  void ReduceScatter(const float* input, const std::vector<ElementRange>& shards, float* stripe, cudaStream_t stream);
  void AllGather(const float* stripe, const std::vector<ElementRange>& shards, float* output, cudaStream_t stream);

  // How many of this rank's links (at most two) run over peer memory and how many through the host.
  int directLinks() const;
  int hostLinks() const;

  void UnmapPeers();
  void ThrowIfFailed() const;
  void Abandon() noexcept;

 private:
  // Collective over the node: full_ holds `count` floats and partial_ a column, registered with every peer group.
  void Reserve(size_t count);
  std::vector<ElementRange> Columns(size_t count) const;
  // The columns of [lo, hi): column k's part of it (empty ranges clamped into it).
  std::vector<ElementRange> ColumnsOf(const std::vector<ElementRange>& columns, size_t lo, size_t hi) const;
  // Where the shards of group g's members end (shards are in local-rank order, one after the other).
  size_t ShardsEnd(const std::vector<ElementRange>& shards, size_t group) const;
  // Link g forwards [range) of `buffer` (full_ or partial_) between groups g and g+1, if this rank is on it.
  void Forward(size_t link, float* buffer, ElementRange range, bool upward, cudaStream_t stream);
  // Group g all-gathers `parts` (one per member) of full_, if this rank is in it.
  void GatherInGroup(size_t group, const std::vector<ElementRange>& parts, cudaStream_t stream);
  // Up the chain: from full_ (every rank's float32 gradient, `count` elements) to the node's sum, which member k of
  // the last group then holds as column k, in partial_.
  void ReduceUp(size_t count, cudaStream_t stream);
  // Down the chain, after ReduceUp: the whole sum into full_ on every rank (the allreduce)...
  void SpreadWhole(size_t count, cudaStream_t stream);
  // ... or only what each group owns (phase 1): full_ holds at least the shards of this rank's group.
  void SpreadShards(const std::vector<ElementRange>& shards, cudaStream_t stream);

  size_t groupCount_ = 0, groupSize_ = 0, group_ = 0, column_ = 0;
  nvlink::PeerGroupConfig config_;
  Communicator groupComm_;
  std::unique_ptr<nvlink::PeerGroup> peers_;  // this rank's group
  std::unique_ptr<GroupLink> below_, above_;  // to the group before and after (none at the ends)
  DeviceBuffer full_, partial_;
  size_t capacity_ = 0;  // floats of full_
};

}  // namespace gradagg
