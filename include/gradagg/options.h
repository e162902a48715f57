// gradagg's configuration: one struct, filled once. Defaults, overridden by GRADAGG_* environment variables
// (ApplyEnvironment), overridden by explicit settings (the CLI's flags, or a trainer's own code).
#pragma once

#include <cstddef>
#include <string>

#include "gradagg/device_gradient.h"

namespace gradagg {

struct AggregatorOptions {
  int bits = 1;                   // GRADAGG_BITS: 1, 2, 4, 8 bits per element across nodes; 32 sends raw floats
  size_t bucketSize = 512;        // GRADAGG_BUCKET: elements per quantization bucket (1 .. 2^24)
  bool errorFeedback = true;      // GRADAGG_ERROR_FEEDBACK: carry quantization error into the next call
  bool meanThreshold = false;     // GRADAGG_MEAN_THRESHOLD: 1-bit threshold at the bucket mean instead of zero
  bool quantizeOwnStripe = true;  // GRADAGG_QUANTIZE_OWN_STRIPE: an owner quantizes its own part too (CNTK default)
  int ranksPerNode = 0;           // GRADAGG_RANKS_PER_NODE: 0 = one node per host; N = emulate nodes of N ranks
  MpiTransport transport = MpiTransport::kAuto;  // GRADAGG_CUDA_AWARE_MPI: auto, on (CUDA-aware) or off (staged)
  size_t stagingChunkBytes = 4 << 20;  // GRADAGG_STAGING_CHUNK: staged transport pipelines messages in chunks of this
  // GRADAGG_PIECE: phase 2 cuts each node's part into pieces of about this many bytes of codes, quantized, sent,
  // summed and re-quantized one after another so that the codec overlaps the network; 0 = one piece per part.
  size_t pieceBytes = 1 << 20;
  // GRADAGG_DOUBLE_BUFFERED: CNTK's one-step-stale mode. AggregateGradients hands this step's gradients to a
  // background thread and returns the previous step's aggregate (zeros and numSamples 0 on the first call), so the
  // aggregation overlaps the next step's computation. Needs MPI_THREAD_SERIALIZED or higher.
  bool doubleBuffered = false;
  // GRADAGG_TIMEOUT: seconds a rank waits in phase 2 for a peer before throwing TimeoutError naming it; 0 = for ever.
  double timeoutSeconds = 300.0;
  bool timing = false;  // GRADAGG_TIMING: measure per-phase times (LastStats)
  int traceLevel = 0;   // GRADAGG_TRACE: 0 quiet, 1 configuration at start, 2 per-call phase times,
                        // 3 also each call's host timeline of steps
};

// The largest AggregatorOptions::pieceBytes (1 TiB: no message is larger; the ranks compare it as a signed count).
inline constexpr size_t kMaxPieceBytes = size_t{1} << 40;

// Returns `options` with every GRADAGG_* variable that is set applied. Throws UsageError for an unparsable value.
AggregatorOptions ApplyEnvironment(AggregatorOptions options);

// Throws UsageError naming the first bad field.
void Validate(const AggregatorOptions& options);

// One line: "bits=1 bucket=512 error_feedback=on threshold=zero quantize_own_stripe=on ...".
// "auto", "on" or "off".
const char* ToString(MpiTransport transport);
std::string Describe(const AggregatorOptions& options);

}  // namespace gradagg
