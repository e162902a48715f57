// The all-gather that a peer group's setup, Register and Deregister need, over MPI and bounded by the group's
// timeout: a rank that never comes is named in a TimeoutError instead of leaving the others waiting for ever.
#pragma once

#include <mpi.h>

#include <vector>

#include "mpi/agreement.h"
#include "intra_node/cuda/peer_group.h"

namespace gradagg {

inline nvlink::GroupAllGather BoundedAllGather(MPI_Comm comm, double seconds) {
  return [comm, seconds](const std::vector<char>& mine) {
    return AllGatherBytesWithin(comm, mine, seconds, "an NVLink group's setup or registration");
  };
}

}  // namespace gradagg
