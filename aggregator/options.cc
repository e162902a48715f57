#include "gradagg/options.h"

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <string>

#include "gradagg/errors.h"
#include "quantize/quantizer_config.h"

namespace gradagg {
namespace {

const char* Lookup(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : nullptr;
}

// An integer in [lowest, highest]; anything else is a UsageError naming the variable (never a silent truncation).
long long ParseInteger(const char* name, const char* text, long long lowest = INT_MIN, long long highest = INT_MAX) {
  errno = 0;
  char* end = nullptr;
  const long long value = std::strtoll(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0') {
    throw UsageError(std::string(name) + "=" + text + " is not an integer");
  }
  if (value < lowest || value > highest) {
    throw UsageError(std::string(name) + "=" + text + " is out of range (" + std::to_string(lowest) + " to " +
                     std::to_string(highest) + ")");
  }
  return value;
}

double ParseSeconds(const char* name, const char* text) {
  errno = 0;
  char* end = nullptr;
  const double value = std::strtod(text, &end);
  if (errno != 0 || end == text || *end != '\0' || !(value >= 0.0) || value > 1e9) {
    throw UsageError(std::string(name) + "=" + text + " is not a number of seconds (0 = no limit)");
  }
  return value;
}

bool ParseSwitch(const char* name, const char* text) {
  const std::string value(text);
  if (value == "1" || value == "on" || value == "true" || value == "yes") return true;
  if (value == "0" || value == "off" || value == "false" || value == "no") return false;
  throw UsageError(std::string(name) + "=" + text + " is not one of on/off, 1/0, true/false, yes/no");
}

const char* OnOff(bool value) { return value ? "on" : "off"; }

MpiTransport ParseTransport(const char* text) {
  const std::string value(text);
  if (value == "auto") return MpiTransport::kAuto;
  if (value == "on" || value == "1" || value == "yes" || value == "true") return MpiTransport::kCudaAware;
  if (value == "off" || value == "0" || value == "no" || value == "false") return MpiTransport::kStaged;
  throw UsageError(std::string("GRADAGG_CUDA_AWARE_MPI=") + text + " is not one of auto, on, off");
}

}  // namespace

AggregatorOptions ApplyEnvironment(AggregatorOptions options) {
  if (const char* text = Lookup("GRADAGG_BITS")) options.bits = static_cast<int>(ParseInteger("GRADAGG_BITS", text));
  if (const char* text = Lookup("GRADAGG_BUCKET")) {
    const long long bucket = ParseInteger("GRADAGG_BUCKET", text, LLONG_MIN, LLONG_MAX);
    if (bucket <= 0) throw UsageError(std::string("GRADAGG_BUCKET=") + text + " must be positive");
    options.bucketSize = static_cast<size_t>(bucket);
  }
  if (const char* text = Lookup("GRADAGG_ERROR_FEEDBACK")) {
    options.errorFeedback = ParseSwitch("GRADAGG_ERROR_FEEDBACK", text);
  }
  if (const char* text = Lookup("GRADAGG_MEAN_THRESHOLD")) {
    options.meanThreshold = ParseSwitch("GRADAGG_MEAN_THRESHOLD", text);
  }
  if (const char* text = Lookup("GRADAGG_QUANTIZE_OWN_STRIPE")) {
    options.quantizeOwnStripe = ParseSwitch("GRADAGG_QUANTIZE_OWN_STRIPE", text);
  }
  if (const char* text = Lookup("GRADAGG_RANKS_PER_NODE")) {
    options.ranksPerNode = static_cast<int>(ParseInteger("GRADAGG_RANKS_PER_NODE", text));
  }
  if (const char* text = Lookup("GRADAGG_CUDA_AWARE_MPI")) options.transport = ParseTransport(text);
  if (const char* text = Lookup("GRADAGG_STAGING_CHUNK")) {
    const long long bytes = ParseInteger("GRADAGG_STAGING_CHUNK", text, LLONG_MIN, LLONG_MAX);
    if (bytes <= 0) throw UsageError(std::string("GRADAGG_STAGING_CHUNK=") + text + " must be positive");
    options.stagingChunkBytes = static_cast<size_t>(bytes);
  }
  if (const char* text = Lookup("GRADAGG_PIECE")) {
    const long long bytes = ParseInteger("GRADAGG_PIECE", text, LLONG_MIN, LLONG_MAX);
    if (bytes < 0) throw UsageError(std::string("GRADAGG_PIECE=") + text + " must be 0 (one piece) or positive");
    options.pieceBytes = static_cast<size_t>(bytes);
  }
  if (const char* text = Lookup("GRADAGG_DOUBLE_BUFFERED")) {
    options.doubleBuffered = ParseSwitch("GRADAGG_DOUBLE_BUFFERED", text);
  }
  if (const char* text = Lookup("GRADAGG_TIMEOUT")) options.timeoutSeconds = ParseSeconds("GRADAGG_TIMEOUT", text);
  if (const char* text = Lookup("GRADAGG_TIMING")) options.timing = ParseSwitch("GRADAGG_TIMING", text);
  if (const char* text = Lookup("GRADAGG_TRACE")) {
    options.traceLevel = static_cast<int>(ParseInteger("GRADAGG_TRACE", text));
  }
  return options;
}

void Validate(const AggregatorOptions& options) {
  if (!IsSupportedBits(options.bits)) {
    throw UsageError("bits must be 1, 2, 4, 8 or 32, not " + std::to_string(options.bits));
  }
  if (options.bucketSize == 0 || options.bucketSize > kMaxBucketSize) {
    throw UsageError("bucket size must be between 1 and " + std::to_string(kMaxBucketSize) + ", not " +
                     std::to_string(options.bucketSize));
  }
  if (options.ranksPerNode < 0) {
    throw UsageError("ranks per node must be 0 (one node per host) or positive, not " +
                     std::to_string(options.ranksPerNode));
  }
  if (options.stagingChunkBytes < kMinStagingChunkBytes) {
    throw UsageError("staging chunk must be at least " + std::to_string(kMinStagingChunkBytes) + " bytes, not " +
                     std::to_string(options.stagingChunkBytes));
  }
  if (options.pieceBytes > kMaxPieceBytes) {
    throw UsageError("piece must be at most " + std::to_string(kMaxPieceBytes) + " bytes (0: one piece), not " +
                     std::to_string(options.pieceBytes));
  }
  if (options.traceLevel < 0) throw UsageError("trace level must be >= 0, not " + std::to_string(options.traceLevel));
  if (!(options.timeoutSeconds >= 0.0)) {
    throw UsageError("timeout must be 0 (no limit) or a positive number of seconds, not " +
                     std::to_string(options.timeoutSeconds));
  }
}

const char* ToString(MpiTransport transport) {
  switch (transport) {
    case MpiTransport::kCudaAware:
      return "on";
    case MpiTransport::kStaged:
      return "off";
    case MpiTransport::kAuto:
      break;
  }
  return "auto";
}

std::string Describe(const AggregatorOptions& options) {
  return "bits=" + std::to_string(options.bits) + " bucket=" + std::to_string(options.bucketSize) +
         " error_feedback=" + OnOff(options.errorFeedback) + " threshold=" + (options.meanThreshold ? "mean" : "zero") +
         " quantize_own_stripe=" + OnOff(options.quantizeOwnStripe) +
         " ranks_per_node=" + (options.ranksPerNode == 0 ? std::string("host") : std::to_string(options.ranksPerNode)) +
         " cuda_aware_mpi=" + ToString(options.transport) +
         " staging_chunk=" + std::to_string(options.stagingChunkBytes) +
         " piece=" + std::to_string(options.pieceBytes) + " double_buffered=" + OnOff(options.doubleBuffered) +
         " timeout=" + std::to_string(static_cast<long long>(options.timeoutSeconds)) +
         "s timing=" + OnOff(options.timing) + " trace=" + std::to_string(options.traceLevel);
}

}  // namespace gradagg
