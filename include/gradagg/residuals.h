// What error feedback owes between calls, taken out of an Aggregator and put back (Aggregator::ExportResiduals and
// ImportResiduals), so that a checkpointed run resumes bitwise where it stopped. Usable without MPI's headers.
#pragma once

#include <cstddef>
#include <vector>

namespace gradagg {

// One rank's carried quantization error for one layout of call (docs/DESIGN.md, "Resuming"): r1 over the stripe this
// rank quantizes, r2 over the sub-stripe it owns. Both are empty on one node and before the first call; zeros without
// error feedback. They belong to this rank's place in the topology (rank, nodes, ranks per node) and to the call's
// tensor sizes, which they carry.
struct Residuals {
  std::vector<size_t> tensorSizes;  // the elements of each tensor of the call, in order
  std::vector<float> stripe;        // r1
  std::vector<float> own;           // r2
};

}  // namespace gradagg
