// The three phases on GPUs, composed (docs/DESIGN.md):
//
//   0. gather the caller's tensors into one float32 flat buffer (registered for peer access), or zeros; a single
//      float32 tensor is worked on in place where that needs no copy (InPlaceTensor);
//   1. intra-node reduce-scatter over NVLink: local rank l gets stripe l, summed in local-rank order;
//   2. the quantized exchange of the stripe across nodes (CrossNodePhase over the device backend);
//   3. intra-node all-gather over NVLink into the flat buffer;
//   4. scatter the flat buffer back into the caller's tensors, rounded to their types.
//
// One rank per node: the stripe is the flat buffer. One node: phase 2 is skipped, and phases 1 and 3 are the fused
// allreduce.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "aggregator/cross_node_phase.h"
#include "aggregator/cuda/device_checks.h"
#include "aggregator/cuda/device_cross_node_backend.h"
#include "aggregator/device_path.h"
#include "aggregator/partition.h"
#include "aggregator/stopwatch.h"
#include "aggregator/three_phases.h"
#include "common/call_timeline.h"
#include "common/cuda/cuda_error.h"
#include "common/cuda/device_memory.h"
#include "mpi/agreement.h"
#include "mpi/cuda/device_exchange.h"
#include "mpi/cuda_support.h"
#include "mpi/mpi_error.h"
#include "intra_node/cuda/float32_conversion.h"
#include "intra_node/cuda/ipc_memory.h"
#include "intra_node/gpu_node.h"

namespace gradagg {
namespace {

class GpuPath final : public DevicePath {
 public:
  GpuPath(const NodeTopology& topology, const AggregatorOptions& options);
  ~GpuPath() override {
    if (!abandoned_) ReleaseBuffers();
  }
  void Abandon() noexcept override {
    abandoned_ = true;
    if (node_) node_->Abandon();
  }

  void Aggregate(const std::vector<DeviceGradient>& gradients, const BucketLayout& layout, bool contributes,
                 CudaStream stream, AggregationStats& stats) override;
  void RegisterBuffer(void* data, size_t bytes) override;
  void DeregisterBuffer(void* data) override;
  CrossNodePhase* crossNode() override { return cross_.get(); }
  int device() const override { return device_; }
  std::string Describe() const override;

 private:
  void Run(const std::vector<DeviceGradient>& gradients, const BucketLayout& layout, bool contributes,
           CudaStream stream, AggregationStats& stats);
  void Reshape(const BucketLayout& layout);
  float* InPlaceTensor(const std::vector<DeviceGradient>& gradients, size_t elements);
  void ReleaseBuffers() noexcept;
  // With timing on: waits for the stream, then returns the seconds since the last lap.
  double Lap(cudaStream_t stream, Stopwatch& clock) const {
    if (!options_.timing) return 0.0;
    GRADAGG_CUDA_CHECK(cudaStreamSynchronize(stream));
    return clock.Lap();
  }

  AggregatorOptions options_;
  const NodeTopology& topology_;  // the Aggregator's, which outlives this path
  int device_ = 0;
  TransportChoice transport_;
  std::unique_ptr<GpuNode> node_;                   // more than one rank per node
  std::unique_ptr<CrossNodePhase> cross_;           // more than one node
  DeviceCrossNodeBackend* crossBackend_ = nullptr;  // cross_'s

  bool abandoned_ = false;
  bool shaped_ = false;
  BucketLayout layout_;
  std::vector<ElementRange> shards_;
  BucketLayout stripeLayout_;
  DeviceBuffer flat_;               // float32, registered with the node
  DeviceBuffer stripe_;             // float32, registered with the node
  std::vector<void*> userBuffers_;  // RegisterBuffer's, in order (the same on every rank)
};

GpuPath::GpuPath(const NodeTopology& topology, const AggregatorOptions& options)
    : options_(options), topology_(topology) {
  GRADAGG_CUDA_CHECK(cudaGetDevice(&device_));
  if (topology_.ranksPerNode() > 1) {
    GpuNodeConfig config = GpuNodeConfigFromEnvironment();
    config.traceLevel = std::max(config.traceLevel, options.traceLevel);
    node_ = std::make_unique<GpuNode>(topology.node(), config);
  }
  if (topology_.nodeCount() > 1) {
    transport_ = ChooseTransport(options.transport);
    if (topology.rank() == 0 && transport_.forcedAgainstMpi)
      std::fprintf(stderr, "gradagg: warning: CUDA-aware MPI %s\n", transport_.why.c_str());
    std::unique_ptr<DeviceCrossNodeBackend> backend = MakeDeviceCrossNodeBackend(
        options, MakeDeviceExchange(transport_.cudaAware, options.stagingChunkBytes, options.timeoutSeconds),
        transport_.cudaAware ? nullptr : MakeMappedExchange(options.timeoutSeconds));
    crossBackend_ = backend.get();
    cross_ = std::make_unique<CrossNodePhase>(topology.cross(), options, std::move(backend));
  }
}

std::string GpuPath::Describe() const {
  std::string text = "GPU " + std::to_string(device_);
  if (node_) text += "; node: " + node_->Describe();
  text += topology_.nodeCount() > 1
              ? std::string("; inter-node transport: ") + cross_->transport() + " (" + transport_.why + ")"
              : "; one node: no inter-node phase";
  // As GpuNode::LeavePhasesToPhase2 and RunThreePhases decide (but for reduce-scatter-only calls).
  if (node_ && cross_ && node_->LeavesPhasesToPhase2() && cross_->TakesValueTerms())
    text += "; phases 1 and 3 inside phase 2 (GRADAGG_NVLINK_SUM_IN_READER=0: through a stripe)";
  return text;
}

void GpuPath::ReleaseBuffers() noexcept {
  if (!node_) return;
  try {
    if (flat_.get() != nullptr) node_->Deregister(flat_.get());
    if (stripe_.get() != nullptr) node_->Deregister(stripe_.get());
  } catch (...) {  // a destructor never throws; GpuNode's own shutdown reports a broken node
  }
}

void GpuPath::RegisterBuffer(void* data, size_t bytes) {
  int current = -1;
  std::string problem = CurrentGpuProblem(device_, current);
  if (problem.empty() && bytes == 0) problem = "0 bytes at " + Hex(data);
  if (problem.empty()) problem = MemoryProblem("the buffer", data, bytes, sizeof(float), current, true);
  if (problem.empty() && std::find(userBuffers_.begin(), userBuffers_.end(), data) != userBuffers_.end())
    problem = Hex(data) + " is registered already";
  problem = AgreeOnProblem(topology_.world(), problem);
  if (!problem.empty()) throw UsageError("RegisterDeviceBuffer: " + problem);
  if (node_) node_->Register(data, bytes);
  userBuffers_.push_back(data);
}

void GpuPath::DeregisterBuffer(void* data) {
  const auto found = std::find(userBuffers_.begin(), userBuffers_.end(), data);
  const std::string problem = AgreeOnProblem(
      topology_.world(), found == userBuffers_.end() ? Hex(data) + " was never registered (or is gone)" : "");
  if (!problem.empty()) throw UsageError("DeregisterDeviceBuffer: " + problem);
  if (node_) node_->Deregister(data);
  userBuffers_.erase(found);
}

float* GpuPath::InPlaceTensor(const std::vector<DeviceGradient>& gradients, size_t elements) {
  float* data = nullptr;
  size_t tensors = 0;
  for (const DeviceGradient& tensor : gradients) {
    if (tensor.count == 0) continue;
    ++tensors;
    data = tensor.type == DataType::kFloat32 ? static_cast<float*>(tensor.data) : nullptr;
  }
  if (tensors != 1) data = nullptr;
  // No peers, or a node that copies into its own buffers (groups): the stripe may be any device memory. One node and
  // a small call: the one-shot and the packet and line two-shots take any buffer, and every rank takes it (by size),
  // whatever the others pass.
  if (!node_ || node_->TakesAnyBuffer() || (!cross_ && elements * sizeof(float) <= node_->AnyBufferMaxBytes()))
    return data;
  // Otherwise peers read and write it: only a buffer registered alike on every rank of the node. The question is
  // collective, asked only once the user has registered something (which every rank did alike).
  if (userBuffers_.empty()) return nullptr;
  return node_->RegisteredAlike(data, elements * sizeof(float)) ? data : nullptr;
}

void GpuPath::Reshape(const BucketLayout& layout) {
  if (shaped_ && layout == layout_) return;
  // A new layout starts fresh residuals on every rank, also where this rank's stripe happens to keep its shape.
  if (shaped_ && cross_) cross_->ResetResiduals();
  const size_t elements = layout.elements();
  shards_ = SplitIntoBucketRuns(layout, static_cast<size_t>(topology_.ranksPerNode()));
  const ElementRange mine = shards_[static_cast<size_t>(topology_.localRank())];
  stripeLayout_ = layout.Slice(mine.begin, mine.count);
  size_t largestShard = 0;
  for (const ElementRange& shard : shards_) largestShard = std::max(largestShard, shard.count);
  // Buffers only grow, and every rank decides alike (from the agreed size), so Register stays collective.
  constexpr size_t kMinBytes = 256;
  const size_t flatBytes = std::max(kMinBytes, elements * sizeof(float));
  const size_t stripeBytes = topology_.ranksPerNode() > 1 ? std::max(kMinBytes, largestShard * sizeof(float)) : 0;
  if (flatBytes > flat_.bytes() || stripeBytes > stripe_.bytes()) {
    ReleaseBuffers();
    flat_ = DeviceBuffer();
    stripe_ = DeviceBuffer();
    flat_ = DeviceBuffer(flatBytes);
    if (stripeBytes > 0) stripe_ = DeviceBuffer(stripeBytes);
    if (node_) {
      node_->Register(flat_.get(), flat_.bytes());
      node_->Register(stripe_.get(), stripe_.bytes());
    }
  }
  shaped_ = true;
  layout_ = layout;
}

void GpuPath::Aggregate(const std::vector<DeviceGradient>& gradients, const BucketLayout& layout, bool contributes,
                        CudaStream stream, AggregationStats& stats) {
  // The inputs were checked and agreed on by every rank, so a UsageError from here on is this rank's alone: it must
  // not pass for the agreed kind, which callers report on one rank only.
  try {
    Run(gradients, layout, contributes, stream, stats);
  } catch (const UsageError& error) {
    throw std::runtime_error(std::string("GPU aggregation failed on this rank: ") + error.what());
  }
}

void GpuPath::Run(const std::vector<DeviceGradient>& gradients, const BucketLayout& layout, bool contributes,
                  CudaStream stream, AggregationStats& stats) {
  PhaseTimes& times = stats.times;
  const size_t elements = layout.elements();
  if (elements == 0) return;
  Reshape(layout);
  Stopwatch clock;
  float* const inPlace = InPlaceTensor(gradients, elements);
  stats.inPlace = inPlace != nullptr;
  float* flat = inPlace != nullptr ? inPlace : flat_.as<float>();

  // 0. The caller's tensors, as float32, end to end (in place: nothing to gather, zeros written over it).
  if (inPlace != nullptr) {
    if (!contributes) GRADAGG_CUDA_CHECK(cudaMemsetAsync(flat, 0, elements * sizeof(float), stream));
  } else if (contributes) {
    size_t offset = 0;
    for (const DeviceGradient& tensor : gradients) {
      ConvertToFloat32(tensor.data, tensor.type, tensor.count, flat + offset, stream);
      offset += tensor.count;
    }
  } else {
    GRADAGG_CUDA_CHECK(cudaMemsetAsync(flat, 0, elements * sizeof(float), stream));
  }

  // 1-3. The phases on the float32 flat buffer (aggregator/three_phases.h), ordered on the caller's stream; one
  //      node runs 1 and 3 fused, as the allreduce in place. Phase 2 returns with the stream idle.
  const double convertIn = Lap(stream, clock);  // counted with phase 1, as the copy into its buffer
  call_timeline::Note("converted in");
  if (node_) node_->UseStream(stream);
  if (crossBackend_) crossBackend_->UseStream(stream);
  const ThreePhases phases{node_.get(), cross_.get(), topology_.node(), options_.timing,
                           [stream] { GRADAGG_CUDA_CHECK(cudaStreamSynchronize(stream)); }};
  RunThreePhases(phases, FlatBuffers({{flat, elements}}), layout, shards_, stripe_.as<float>(), stripeLayout_, stats);
  times.reduceScatter += convertIn;
  clock.Lap();

  // 4. Back into the caller's tensors.
  for (size_t i = 0, offset = 0; inPlace == nullptr && i < gradients.size(); offset += gradients[i++].count)
    ConvertFromFloat32(flat + offset, gradients[i].count, gradients[i].data, gradients[i].type, stream);
  GRADAGG_CUDA_CHECK(cudaStreamSynchronize(stream));
  call_timeline::Note("converted out");
  times.allGather += options_.timing ? clock.Lap() : 0.0;  // the copy back counts with phase 3
  if (node_) node_->ThrowIfFailed();
}

}  // namespace

std::unique_ptr<DevicePath> MakeDevicePath(const NodeTopology& topology, const AggregatorOptions& options) {
  const std::string problem = AgreeOnProblem(topology.world(), CudaUnavailableReason());
  if (!problem.empty()) throw UsageError("device gradients: " + problem);
  auto path = std::make_unique<GpuPath>(topology, options);
  if (options.traceLevel >= 1 && topology.rank() == 0)
    std::fprintf(stderr, "# gradagg: device path: %s\n", path->Describe().c_str());
  return path;
}

}  // namespace gradagg
