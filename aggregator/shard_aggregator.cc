#include "gradagg/shard_aggregator.h"

#include <algorithm>
#include <cstring>
#include <exception>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "aggregator/option_agreement.h"
#include "gradagg/errors.h"
#include "mpi/agreement.h"
#include "mpi/communicator.h"
#include "mpi/mpi_error.h"
#include "mpi/node_topology.h"

namespace gradagg {

struct ShardAggregator::Impl {
  Communicator world;  // a duplicate of the caller's communicator
  Communicator cross;  // the ranks of this rank's local index, one per node, in rank order
  int localRank = 0;
  int ranksPerNode = 1;
  int nodeCount = 1;
  double timeoutSeconds = 0.0;
  std::unique_ptr<Aggregator> across;

  // Runs `call`, then every rank of the communicator learns, within the timeout, whether it failed anywhere: a rank
  // whose own call failed throws its own error; the others throw one of the worst kind seen, with the text of the
  // lowest rank that failed.
  void Agreed(const std::function<void()>& call) const;
};

namespace {

enum Failure { kNone = 0, kUsage = 1, kTimeout = 2, kOther = 3 };

}  // namespace

void ShardAggregator::Impl::Agreed(const std::function<void()>& call) const {
  std::exception_ptr mine;
  int failure = kNone;
  std::string what;
  try {
    call();
  } catch (const UsageError& error) {
    mine = std::current_exception();
    failure = kUsage;
    what = error.what();
  } catch (const TimeoutError& error) {
    mine = std::current_exception();
    failure = kTimeout;
    what = error.what();
  } catch (const std::exception& error) {
    mine = std::current_exception();
    failure = kOther;
    what = error.what();
  } catch (...) {
    mine = std::current_exception();
    failure = kOther;
    what = "an unknown error";
  }
  std::vector<char> all;
  try {  // a rank that stalled (or never called) must not leave the others waiting: the gather has a deadline
    std::vector<char> code(sizeof failure);
    std::memcpy(code.data(), &failure, sizeof failure);
    all = AllGatherBytesWithin(world.get(), code, timeoutSeconds, "ShardAggregator");
  } catch (...) {
    if (mine) std::rethrow_exception(mine);
    throw;
  }
  int worst = kNone;
  for (size_t at = 0; at + sizeof(int) <= all.size(); at += sizeof(int)) {
    int code = kNone;
    std::memcpy(&code, all.data() + at, sizeof code);
    worst = std::max(worst, code);
  }
  if (worst == kNone) return;
  const std::string agreed = AgreeOnProblem(world.get(), what);  // every rank came to the gather: no wait here
  if (mine) std::rethrow_exception(mine);
  const std::string text = "ShardAggregator: the call failed for the ranks of another local index: " + agreed;
  if (worst == kUsage) throw UsageError(text);
  if (worst == kTimeout) throw TimeoutError(text);
  throw std::runtime_error(text);
}

ShardAggregator::ShardAggregator(MPI_Comm comm, const AggregatorOptions& options) : impl_(std::make_unique<Impl>()) {
  AgreeOnOptions(comm, options, "ShardAggregator");
  Impl& self = *impl_;
  self.timeoutSeconds = options.timeoutSeconds;
  self.world = Communicator::Duplicate(comm);
  if (options.ranksPerNode > 0) {
    // Consecutive ranks form a node, wherever they run: a framework's shard group may span hosts, and the shards
    // travel between the nodes only.
    const int size = self.world.size();
    if (size % options.ranksPerNode != 0) {
      throw UsageError("ShardAggregator: ranks per node " + std::to_string(options.ranksPerNode) +
                       " does not divide the " + std::to_string(size) + " ranks (" + RankAndHost() + ")");
    }
    self.ranksPerNode = options.ranksPerNode;
    self.localRank = self.world.rank() % options.ranksPerNode;
    self.nodeCount = size / options.ranksPerNode;
  } else {
    try {
      const NodeTopology topology = NodeTopology::Discover(comm, 0);
      self.ranksPerNode = topology.ranksPerNode();
      self.localRank = topology.localRank();
      self.nodeCount = topology.nodeCount();
    } catch (const std::invalid_argument& error) {
      throw UsageError(std::string("ShardAggregator: ") + error.what());
    }
  }
  self.cross = self.world.Split(self.localRank, self.world.rank());
  AggregatorOptions across = options;
  across.ranksPerNode = 1;  // the ranks of one local index, each a node of its own
  self.Agreed([&] { self.across = std::make_unique<Aggregator>(self.cross.get(), across); });
}

ShardAggregator::~ShardAggregator() = default;

void ShardAggregator::AggregateShard(const std::vector<GradientBuffer>& shard, GradientHeader* header) {
  impl_->Agreed([&] { impl_->across->AggregateGradients(shard, header); });
}

void ShardAggregator::AggregateShard(const std::vector<DeviceGradient>& shard, CudaStream stream,
                                     GradientHeader* header) {
  impl_->Agreed([&] { impl_->across->AggregateGradients(shard, stream, header); });
}

Aggregator& ShardAggregator::acrossNodes() { return *impl_->across; }
int ShardAggregator::localRank() const { return impl_->localRank; }
int ShardAggregator::ranksPerNode() const { return impl_->ranksPerNode; }
int ShardAggregator::nodeCount() const { return impl_->nodeCount; }

}  // namespace gradagg
