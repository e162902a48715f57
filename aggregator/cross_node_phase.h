// Phase 2 of docs/DESIGN.md: the 1-bit-SGD-style exchange among the ranks of equal local index on all M nodes,
// written once over a CrossNodeBackend (host or CUDA memory: cross_node_backend.h).
//
//   1. quantize the stripe (+ residual r1), one run of whole buckets per owning node, each just before it is sent;
//   2. send sub-stripe j to node j, receive ours from every node, and sum them in source-node order
//      (decoded as they arrive, but always added in that order), overlapping 1; our own part is quantized once
//      every other is sent, while they travel;
//   3. re-quantize our sum (+ residual r2);
//   4. all-gather the quantized sums; every node, the owner too, decodes every one into the stripe (its own while
//      the others travel).
// Large sub-stripes are cut into pieces of whole buckets (AggregatorOptions::pieceBytes, exchange_plan.h) that go
// through 1-3 one at a time: a piece is sent while the next is quantized, and summed and re-quantized as soon as
// every node's part of it is in. Every bucket is quantized on its own and every sum keeps its order, so the result
// does not depend on the pieces.
//
// Residuals persist across calls and are reset by ResetResiduals or by a change of the stripe's layout. A bucket whose
// input is not finite leaves both residuals as they were and comes out non-finite on every node (quantizer.h).
#pragma once

#include <mpi.h>

#include <cstddef>
#include <memory>
#include <vector>

#include "aggregator/cross_node_backend.h"
#include "aggregator/exchange_plan.h"
#include "gradagg/aggregation_stats.h"
#include "gradagg/options.h"
#include "gradagg/residuals.h"
#include "quantize/wire_format.h"

namespace gradagg {

class CrossNodePhase {
 public:
  // `cross` joins one rank per node, ordered by node index; not owned.
  CrossNodePhase(MPI_Comm cross, const AggregatorOptions& options, std::unique_ptr<CrossNodeBackend> backend);

  // Collective over `cross`: every node passes its stripe (the backend's memory) of the same layout. On return
  // `stripe` holds the aggregate over all nodes, bitwise the same on every node and on either backend. `times` (may
  // be null) gets the phase's times added.
  // With `values` (where TakesValueTerms), the stripe's values are their sum, read while quantizing and never stored
  // (the node's reduce-scatter, fused); with `copies` too, the aggregate is decoded into every array of them instead
  // of `stripe` (the node's all-gather, fused; `stripe` unused). The same bytes either way.
  void Aggregate(float* stripe, const BucketLayout& layout, PhaseTimes* times, const ValueTerms* values = nullptr,
                 const ValueCopies* copies = nullptr);
  // Whether Aggregate reads the stripe's values only by quantizing them, so that it can take them as a sum of terms:
  // our own sub-stripe is quantized too (no exact term) and the bit width is a quantized one.
  bool TakesValueTerms() const { return quantizeOwnStripe_ && quantizer_.bits != kRawBits; }

  void ResetResiduals();
  // Local. What error feedback owes for the layout of the last call: r1 over the stripe, r2 over the sub-stripe we
  // own (both empty before the first call).
  void ExportResiduals(std::vector<float>* stripe, std::vector<float>* own) const;
  // Local: the next call starts from these instead, once its layout is shaped; their sizes must be that layout's
  // (the Aggregator checks them first: a mismatch here throws std::logic_error).
  void ImportResiduals(std::vector<float> stripe, std::vector<float> own);
  size_t lastBytesSent() const { return lastBytesSent_; }
  size_t lastFloatBytes() const { return lastFloatBytes_; }
  // Buckets of the stripe that came out non-finite in the last call (the same on every node).
  size_t lastNonFiniteBuckets() const { return lastNonFiniteBuckets_; }
  const char* transport() const { return backend_->transport(); }

 private:
  void Reshape(const BucketLayout& layout);
  void InstallImportedResiduals();
  // With two nodes each piece's sum has two terms, which meet only in its re-quantization: no sum is stored.
  bool SumsInEncode() const { return position_.nodes == 2; }

  MPI_Comm cross_;
  NodePosition position_;
  QuantizerConfig quantizer_;
  bool errorFeedback_;
  bool quantizeOwnStripe_;
  size_t pieceBytes_;
  std::unique_ptr<CrossNodeBackend> backend_;

  bool shaped_ = false;
  ExchangePlan plan_;
  size_t ownSlotBytes_ = 0;       // a received part's slot, a multiple of the backend's alignment
  BackendMemory stripeResidual_;  // r1, over the stripe
  BackendMemory ownResidual_;     // r2, over the sub-stripe we own
  BackendMemory ownSum_;          // the sum of our sub-stripe's parts but the last (none with two nodes: SumsInEncode)
  bool ownStripeResidualZero_ = true;  // r1 over our own sub-stripe is all zero (it is, once folded and not imported)
  BackendMemory stripeWire_;    // our quantized stripe; then everyone's quantized sums
  BackendMemory ownWire_;       // our quantized sum
  BackendMemory received_;      // one slot per node for the parts of our sub-stripe
  bool importPending_ = false;  // ImportResiduals was called: the next call starts from these
  std::vector<float> importedStripe_;
  std::vector<float> importedOwn_;
  size_t lastBytesSent_ = 0;
  size_t lastFloatBytes_ = 0;
  size_t lastNonFiniteBuckets_ = 0;
};

}  // namespace gradagg
