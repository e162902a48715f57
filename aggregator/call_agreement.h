// The start of every AggregateGradients call: one small all-gather over all ranks that checks that every rank
// passes the same sizes, and sums the gradient header. Ranks that disagree all throw the same UsageError, before
// any gradient byte moves, so a mismatch never hangs or corrupts memory.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "gradagg/gradient_header.h"
#include "quantize/bucket_layout.h"

namespace gradagg {

// Collective over `world`. `localProblem` is what this rank found wrong with its own arguments ("" if nothing); any
// rank's problem is thrown on every rank. Sums `header` (when not null) over all ranks in rank order, in place, so
// every rank gets the same bits. Returns whether this rank's gradients count: false when numSamples == 0.
// Ranks must also agree on where the gradients live and on the tensors' sizes (`layout`: the buckets follow them).
enum class CallMemory : uint64_t { kHost = 0, kDevice = 1 };

// With timeoutSeconds > 0, a rank that waits longer than that for the others throws TimeoutError naming the ranks
// that never came (a roll call through rank 0 after the wait).
bool AgreeOnCall(MPI_Comm world, const BucketLayout& layout, GradientHeader* header, const std::string& localProblem,
                 CallMemory memory, double timeoutSeconds);

}  // namespace gradagg
