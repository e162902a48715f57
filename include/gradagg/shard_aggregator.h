// Sharded training's exchange (FSDP2's hybrid sharding, ZeRO inside a node): every rank of a node holds its own
// shard, already reduced over the node by the framework, and gradagg sums each shard across the nodes, quantized
// with error feedback: the cross-node phase alone (docs/DESIGN.md), among the ranks of equal local index.
//
//   gradagg::ShardAggregator shards(MPI_COMM_WORLD, options);   // options.ranksPerNode: the node's ranks
//   shards.AggregateShard(myShard, &header);   // in place: the sum over the nodes of this local index's shard
//
// Shards may differ in size (and be empty) from one local index to the next; the ranks of one local index must
// pass the same sizes. The result is bitwise the serial simulation's of those ranks as nodes of one rank, and the
// same on all of them. A call that fails on any rank (bad input, a timeout) throws on every rank of `comm` within
// options.timeoutSeconds, so that no node is left waiting in the framework's next collective; the other local
// indices' part of it has run then. options.ranksPerNode > 0 makes each run of that many consecutive ranks a node,
// on one host or several (a framework's shard group may span hosts); 0: a node is a host.
#pragma once

#include <mpi.h>

#include <memory>
#include <vector>

#include "gradagg/aggregator.h"
#include "gradagg/device_gradient.h"
#include "gradagg/gradient_buffer.h"
#include "gradagg/gradient_header.h"
#include "gradagg/options.h"

namespace gradagg {

class ShardAggregator {
 public:
  // Collective over `comm`. Throws UsageError on every rank for bad or mismatched options, or nodes of unequal size.
  explicit ShardAggregator(MPI_Comm comm, const AggregatorOptions& options = AggregatorOptions());
  ~ShardAggregator();
  ShardAggregator(const ShardAggregator&) = delete;
  ShardAggregator& operator=(const ShardAggregator&) = delete;

  // Collective over `comm`: each tensor of this rank's shard summed, in place, over the ranks of its local index
  // (one per node); `header` (nullptr on every rank, or on none) is summed the same way.
  void AggregateShard(const std::vector<GradientBuffer>& shard, GradientHeader* header = nullptr);
  void AggregateShard(const std::vector<DeviceGradient>& shard, CudaStream stream, GradientHeader* header = nullptr);

  // The Aggregator across the nodes (its communicator: the ranks of this local index, as nodes of one rank): its
  // LastStats, residuals (export and import for a checkpoint, reset) and options.
  Aggregator& acrossNodes();
  int localRank() const;
  int ranksPerNode() const;
  int nodeCount() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gradagg
