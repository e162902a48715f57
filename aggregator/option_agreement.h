// The options' check at construction, shared by Aggregator and ShardAggregator: every rank validates its own, and all
// must pass the ones that shape the algorithm identically.
#pragma once

#include <mpi.h>

#include "gradagg/options.h"

namespace gradagg {

// Collective over `comm`: throws UsageError on every rank ("`who`: ...") when some rank's options are invalid or the
// ranks disagree on one that shapes the algorithm.
void AgreeOnOptions(MPI_Comm comm, const AggregatorOptions& options, const char* who);

}  // namespace gradagg
