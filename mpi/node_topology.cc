#include "mpi/node_topology.h"

#include <algorithm>
#include <stdexcept>

#include "mpi/agreement.h"
#include "mpi/mpi_error.h"

namespace gradagg {
namespace {

void ThrowIfAny(MPI_Comm comm, const std::string& localProblem) {
  const std::string problem = AgreeOnProblem(comm, localProblem);
  if (!problem.empty()) throw std::invalid_argument(problem);
}

int AllreduceInt(MPI_Comm comm, int value, MPI_Op op) {
  int result = 0;
  GRADAGG_MPI_CHECK(MPI_Allreduce(&value, &result, 1, MPI_INT, op, comm));
  return result;
}

}  // namespace

NodeTopology NodeTopology::Discover(MPI_Comm comm, int ranksPerNode) {
  NodeTopology topology;
  topology.world_ = Communicator::Duplicate(comm);
  MPI_Comm world = topology.world_.get();
  topology.rank_ = topology.world_.rank();
  topology.size_ = topology.world_.size();
  const int rank = topology.rank_;
  const int size = topology.size_;

  ThrowIfAny(world, ranksPerNode < 0 ? "ranks per node must be 0 (one node per host) or positive, not " +
                                           std::to_string(ranksPerNode)
                                     : "");
  MPI_Comm sharedComm = MPI_COMM_NULL;
  GRADAGG_MPI_CHECK(MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &sharedComm));
  Communicator host(sharedComm);
  const int hostId = AllreduceInt(host.get(), rank, MPI_MIN);  // the lowest rank on this host names it

  if (ranksPerNode > 0) {
    ThrowIfAny(world, size % ranksPerNode != 0 ? "ranks per node " + std::to_string(ranksPerNode) +
                                                     " does not divide the " + std::to_string(size) + " ranks"
                                               : "");
    topology.emulated_ = true;
    topology.node_ = topology.world_.Split(rank / ranksPerNode, rank);
    const bool oneHost =
        AllreduceInt(topology.node_.get(), hostId, MPI_MIN) == AllreduceInt(topology.node_.get(), hostId, MPI_MAX);
    ThrowIfAny(world, oneHost ? ""
                              : "ranks per node " + std::to_string(ranksPerNode) + " puts ranks of different " +
                                    "hosts into emulated node " + std::to_string(rank / ranksPerNode));
  } else {
    topology.node_ = std::move(host);
  }
  topology.localRank_ = topology.node_.rank();
  topology.ranksPerNode_ = topology.node_.size();

  const int fewest = AllreduceInt(world, topology.ranksPerNode_, MPI_MIN);
  const int most = AllreduceInt(world, topology.ranksPerNode_, MPI_MAX);
  ThrowIfAny(world, fewest != most ? "nodes hold different numbers of ranks (" + std::to_string(fewest) + " to " +
                                         std::to_string(most) + "); gradagg needs the same number on every node"
                                   : "");

  // Number the nodes by their lowest rank, so every local index sees the nodes in the same order.
  const int nodeLeader = AllreduceInt(topology.node_.get(), rank, MPI_MIN);
  std::vector<int> leaders(static_cast<size_t>(size));
  GRADAGG_MPI_CHECK(MPI_Allgather(&nodeLeader, 1, MPI_INT, leaders.data(), 1, MPI_INT, world));
  std::sort(leaders.begin(), leaders.end());
  leaders.erase(std::unique(leaders.begin(), leaders.end()), leaders.end());
  topology.nodeIndex_ =
      static_cast<int>(std::lower_bound(leaders.begin(), leaders.end(), nodeLeader) - leaders.begin());
  topology.nodeCount_ = static_cast<int>(leaders.size());

  topology.cross_ = topology.world_.Split(topology.localRank_, topology.nodeIndex_);
  return topology;
}

std::vector<RankPlacement> NodeTopology::GatherPlacements() const {
  const int mine[2] = {nodeIndex_, localRank_};
  std::vector<int> all(2 * static_cast<size_t>(size_));
  GRADAGG_MPI_CHECK(MPI_Allgather(mine, 2, MPI_INT, all.data(), 2, MPI_INT, world()));
  std::vector<RankPlacement> placements(static_cast<size_t>(size_));
  for (size_t r = 0; r < placements.size(); ++r) placements[r] = {all[2 * r], all[2 * r + 1]};
  return placements;
}

std::string NodeTopology::Describe() const {
  return std::to_string(size_) + " ranks as " + std::to_string(nodeCount_) + " nodes x " +
         std::to_string(ranksPerNode_) + " ranks per node" + (emulated_ ? " (emulated)" : "");
}

}  // namespace gradagg
