// What an Aggregator's last call cost and sent (Aggregator::LastStats), apart from the Aggregator so that the
// phases that fill it need not include the public API above them.
#pragma once

#include <cstddef>

namespace gradagg {

// Seconds spent by this rank in the last call, per phase (filled when options.timing is on; total always). Where a
// node of GPUs leaves phases 1 and 3 to phase 2 (docs/DESIGN.md), reduceScatter and allGather are its barriers alone
// and the NVLink traffic is timed with quantize (reading the peers' terms) and decode (writing every rank's copy).
struct PhaseTimes {
  double agreement = 0.0;      // size check and header sum
  double reduceScatter = 0.0;  // phase 1
  double quantize = 0.0;       // phase 2: every encode
  double exchange = 0.0;       // phase 2: the rest of the phase, waiting on MPI traffic (encodes overlap it)
  double decode = 0.0;         // phase 2: decodes and sums
  double allGather = 0.0;      // phase 3
  double total = 0.0;
};

struct AggregationStats {
  PhaseTimes times;
  size_t interNodeBytesSent = 0;   // bytes this rank sent across nodes in the last call
  size_t interNodeFloatBytes = 0;  // what the same exchange would send as float32
  bool inPlace = false;            // device calls: the tensor was reduced where it lies, not copied (see
                                   // RegisterDeviceBuffer)
  // Quantization buckets that came out non-finite in the last call, the same number on every rank: buckets whose
  // input across nodes (gradient + carried error) held a NaN or Inf, or whose statistics overflowed float32. 0 when
  // nothing crossed nodes quantized (one node, or bits 32, where NaN and Inf pass through element by element).
  size_t nonFiniteBuckets = 0;
};

}  // namespace gradagg
