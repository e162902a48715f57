// Whether the largest size of a run fits in this host's memory, asked before anything is allocated, so that a size
// too large is one clear line instead of std::bad_alloc or the OOM killer minutes later.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <string>

#include "apps/gradagg/cli_options.h"

namespace gradagg::cli {

// Roughly what one rank holds in host memory at `bytes` per gradient: the gradient and its pristine copy, the node's
// shared-window segment, the stripe and its residuals; with --check also every rank's inputs gathered and the
// simulation's copies of them. GPU runs keep a pinned staging copy and the check's host copies.
uint64_t HostBytesPerRank(const CliOptions& cli, uint64_t bytes, int ranks, bool onGpu);

// Collective over `world`: "" when the largest size fits everywhere; otherwise, on every rank, the first host's line
// naming the size, the need and what is available (Linux's MemAvailable; a host that cannot tell is not judged).
std::string HostMemoryProblem(MPI_Comm world, const CliOptions& cli, bool onGpu);

}  // namespace gradagg::cli
