// AggregateGradients on device memory: the three phases on GPUs (intra_node/gpu_node.h for phases 1 and 3, the CUDA
// quantizer and a DeviceExchange for phase 2). Built from aggregator/cuda/ when CUDA is there; without it every
// call reports that the build has no CUDA.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "gradagg/aggregation_stats.h"
#include "gradagg/errors.h"
#include "gradagg/options.h"
#include "gradagg/residuals.h"
#include "mpi/node_topology.h"
#include "quantize/bucket_layout.h"

namespace gradagg {

class CrossNodePhase;

class DevicePath {
 public:
  virtual ~DevicePath() = default;

  // Collective over the node topology's world. `gradients` are checked (DeviceGradientProblem) and agreed on;
  // `layout` is their buckets; a rank that does not contribute sends zeros. Stream-ordered on `stream`; returns when
  // the result is in place. Fills `stats`.
  virtual void Aggregate(const std::vector<DeviceGradient>& gradients, const BucketLayout& layout, bool contributes,
                         CudaStream stream, AggregationStats& stats) = 0;
  // Collective over the world: Aggregator::RegisterDeviceBuffer and DeregisterDeviceBuffer (UsageError on every
  // rank for bad input).
  virtual void RegisterBuffer(void* data, size_t bytes) = 0;
  virtual void DeregisterBuffer(void* data) = 0;
  // Phase 2 on this path (its residuals: Aggregator::ResetResiduals, ExportResiduals), or null on one node.
  virtual CrossNodePhase* crossNode() = 0;
  // Local: the ranks are out of step (a failed call, an exception passing), so destruction must free nothing that
  // waits for peers; what peers may still map is left to the process's end.
  virtual void Abandon() noexcept = 0;
  virtual int device() const = 0;
  // "GPU 0 (0000:18:00.0); node: one NVLink group of 4; inter-node transport: staged through ... (auto: ...)".
  virtual std::string Describe() const = 0;
};

// What is wrong with this rank's device gradients ("" if nothing): not device memory of the current GPU, running
// past the end of its allocation, an unknown type; or (device >= 0) a current GPU other than `device`.
std::string DeviceGradientProblem(const std::vector<DeviceGradient>& gradients, int device);

// Collective over topology.world(); uses the calling rank's current GPU. Throws UsageError on every rank when the
// build has no CUDA or a rank has no GPU.
std::unique_ptr<DevicePath> MakeDevicePath(const NodeTopology& topology, const AggregatorOptions& options);

}  // namespace gradagg
