// Who shares a node with whom: the node communicator (phases 1 and 3) and the cross-node communicator that joins
// the ranks of equal local index across nodes (phase 2).
#pragma once

#include <mpi.h>

#include <string>
#include <vector>

#include "mpi/communicator.h"

namespace gradagg {

struct RankPlacement {
  int node = 0;   // index of the node, 0 .. nodeCount-1, ordered by the lowest rank on each node
  int local = 0;  // rank inside the node, ordered by rank
};

class NodeTopology {
 public:
  // Collective over `comm`. ranksPerNode == 0: a node is one of MPI's shared-memory domains (a host).
  // ranksPerNode > 0: consecutive ranks of `comm` form emulated nodes of that many ranks; each must lie on one host.
  // Every node must hold the same number of ranks. Problems throw std::invalid_argument on every rank.
  static NodeTopology Discover(MPI_Comm comm, int ranksPerNode);

  MPI_Comm world() const { return world_.get(); }  // a private duplicate of the caller's communicator
  MPI_Comm node() const { return node_.get(); }
  MPI_Comm cross() const { return cross_.get(); }

  int rank() const { return rank_; }
  int size() const { return size_; }
  int localRank() const { return localRank_; }
  int ranksPerNode() const { return ranksPerNode_; }
  int nodeIndex() const { return nodeIndex_; }
  int nodeCount() const { return nodeCount_; }
  bool emulated() const { return emulated_; }

  // Collective: where every rank of world() sits, indexed by rank.
  std::vector<RankPlacement> GatherPlacements() const;

  // "4 ranks as 2 nodes x 2 ranks per node (emulated)".
  std::string Describe() const;

 private:
  Communicator world_;
  Communicator node_;
  Communicator cross_;
  int rank_ = 0;
  int size_ = 1;
  int localRank_ = 0;
  int ranksPerNode_ = 1;
  int nodeIndex_ = 0;
  int nodeCount_ = 1;
  bool emulated_ = false;
};

}  // namespace gradagg
