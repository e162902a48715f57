// Phase 2 of docs/DESIGN.md on the GPU: the CPU CrossNodePhase's steps, with the CUDA quantizer (the same bytes) and the
// MPI traffic through a DeviceExchange (CUDA-aware or staged):
//
//   1. quantize the stripe (+ residual r1), one run of whole buckets per owning node;
//   2. send sub-stripe j to node j, receive ours from every node, and sum them in source-node order;
//   3. re-quantize our sum (+ residual r2);
//   4. all-gather the quantized sums; every node, the owner too, decodes every one into the stripe.
//
// Stream-ordered on the caller's stream; returns with the stream idle.
#pragma once

#include <cuda_runtime_api.h>
#include <mpi.h>

#include <cstddef>
#include <memory>
#include <vector>

#include "aggregator/exchange_plan.h"
#include "gradagg/aggregator.h"
#include "mpi_glue/cuda/device_exchange.h"
#include "quantize/cuda/cuda_quantizer.h"
#include "quantize/cuda/device_memory.h"

namespace gradagg {

class DeviceCrossNodePhase {
 public:
  // `cross` joins one rank per node, ordered by node index; not owned.
  DeviceCrossNodePhase(MPI_Comm cross, const AggregatorOptions& options, std::unique_ptr<DeviceExchange> exchange);

  // Collective over `cross`: `stripe` (device, float32) of the same layout on every node. On return it holds the
  // aggregate over all nodes, bitwise the same on every node and as the CPU phase computes. `times` may be null.
  void Aggregate(float* stripe, const BucketLayout& layout, cudaStream_t stream, PhaseTimes* times);

  void ResetResiduals();  // synchronous
  size_t lastBytesSent() const { return lastBytesSent_; }
  size_t lastFloatBytes() const { return lastFloatBytes_; }
  // Buckets of the stripe that came out non-finite in the last call (the same on every node).
  size_t lastNonFiniteBuckets() const { return lastNonFiniteBuckets_; }
  const char* transport() const { return exchange_->name(); }

 private:
  void Reshape(const BucketLayout& layout);

  MPI_Comm cross_;
  NodePosition position_;
  CudaQuantizer quantizer_;
  bool errorFeedback_;
  bool quantizeOwnStripe_;
  std::unique_ptr<DeviceExchange> exchange_;

  bool shaped_ = false;
  ExchangePlan plan_;
  std::vector<DeviceBucketLayout> subLayouts_;  // plan_.subLayouts, for the kernels
  size_t ownSlotBytes_ = 0;                     // received_ slot per node, 16-byte aligned
  DeviceBuffer stripeResidual_;                 // r1, over the stripe
  DeviceBuffer ownResidual_;                    // r2, over the sub-stripe we own
  DeviceBuffer ownSum_;
  DeviceBuffer stripeWire_;  // our quantized stripe; then everyone's quantized sums
  DeviceBuffer ownWire_;     // our quantized sum
  DeviceBuffer received_;    // one slot per node for the parts of our sub-stripe
  DeviceBuffer nonFinite_;   // the count of non-finite buckets the all-gather's decodes met
  size_t lastBytesSent_ = 0;
  size_t lastFloatBytes_ = 0;
  size_t lastNonFiniteBuckets_ = 0;
};

}  // namespace gradagg
