#include "gradagg/shard_aggregator.h"

#include <exception>
#include <functional>
#include <stdexcept>
#include <string>

#include "aggregator/option_agreement.h"
#include "gradagg/errors.h"
#include "mpi/agreement.h"
#include "mpi/mpi_error.h"
#include "mpi/node_topology.h"

namespace gradagg {

struct ShardAggregator::Impl {
  NodeTopology topology;
  std::unique_ptr<Aggregator> across;

  // Runs `call`, then the ranks of the whole communicator agree on whether it failed anywhere: a rank whose own call
  // failed throws its own error, the others an error of the same kind naming the first rank that failed.
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
  }
  int worst = kNone;
  GRADAGG_MPI_CHECK(MPI_Allreduce(&failure, &worst, 1, MPI_INT, MPI_MAX, topology.world()));
  if (worst == kNone) return;
  const std::string agreed = AgreeOnProblem(topology.world(), what);
  if (mine) std::rethrow_exception(mine);
  const std::string text = "ShardAggregator: the call failed on another node's shard group: " + agreed;
  if (worst == kUsage) throw UsageError(text);
  if (worst == kTimeout) throw TimeoutError(text);
  throw std::runtime_error(text);
}

ShardAggregator::ShardAggregator(MPI_Comm comm, const AggregatorOptions& options) : impl_(std::make_unique<Impl>()) {
  AgreeOnOptions(comm, options, "ShardAggregator");
  try {
    impl_->topology = NodeTopology::Discover(comm, options.ranksPerNode);
  } catch (const std::invalid_argument& error) {
    throw UsageError(std::string("ShardAggregator: ") + error.what());
  }
  AggregatorOptions across = options;
  across.ranksPerNode = 1;  // the ranks of one local index, each a node of its own
  impl_->Agreed([&] { impl_->across = std::make_unique<Aggregator>(impl_->topology.cross(), across); });
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
int ShardAggregator::localRank() const { return impl_->topology.localRank(); }
int ShardAggregator::ranksPerNode() const { return impl_->topology.ranksPerNode(); }
int ShardAggregator::nodeCount() const { return impl_->topology.nodeCount(); }

}  // namespace gradagg
