#include "gradagg/aggregator.h"

#include <cstdio>
#include <exception>
#include <functional>
#include <stdexcept>
#include <string>

#include "aggregator/aggregator_impl.h"
#include "aggregator/aggregator_topology.h"
#include "aggregator/call_agreement.h"
#include "aggregator/option_agreement.h"
#include "aggregator/host_cross_node_backend.h"
#include "aggregator/partition.h"
#include "aggregator/stopwatch.h"
#include "aggregator/three_phases.h"
#include "common/call_timeline.h"
#include "mpi/agreement.h"
#include "mpi/mpi_error.h"
#include "mpi/node_topology.h"
#include "intra_node/shared_window_phase.h"

namespace gradagg {

FlatBuffers FlattenHostGradients(const std::vector<GradientBuffer>& gradients, std::string* problem) {
  std::vector<FloatSpan> spans;
  spans.reserve(gradients.size());
  for (const GradientBuffer& buffer : gradients) spans.push_back({buffer.data, buffer.count});
  try {
    return FlatBuffers(std::move(spans));
  } catch (const std::invalid_argument& error) {
    *problem = error.what();
  }
  return FlatBuffers();
}

namespace {

// Host buffers and device tensors alike: one segment per tensor, empty ones dropped.
template <typename Tensor>
BucketLayout LayoutOfTensors(const std::vector<Tensor>& tensors, const AggregatorOptions& options) {
  std::vector<size_t> lengths;
  lengths.reserve(tensors.size());
  for (const Tensor& tensor : tensors) lengths.push_back(tensor.count);
  return BucketLayout(lengths, options.bucketSize);
}

}  // namespace

BucketLayout LayoutOf(const std::vector<GradientBuffer>& gradients, const AggregatorOptions& options) {
  return LayoutOfTensors(gradients, options);
}

BucketLayout LayoutOf(const std::vector<DeviceGradient>& gradients, const AggregatorOptions& options) {
  return LayoutOfTensors(gradients, options);
}

void Aggregator::Impl::Reshape(const BucketLayout& callLayout) {
  if (shaped && callLayout == layout) return;
  // A new layout starts fresh residuals on every rank, also where this rank's stripe happens to keep its shape.
  if (shaped && crossNode) crossNode->ResetResiduals();
  shaped = true;
  layout = callLayout;
  shards = SplitIntoBucketRuns(layout, static_cast<size_t>(topology.ranksPerNode()));
  const ElementRange mine = shards[static_cast<size_t>(topology.localRank())];
  stripeLayout = layout.Slice(mine.begin, mine.count);
  stripe.assign(mine.count, 0.0f);
}

Aggregator::Aggregator(MPI_Comm comm, const AggregatorOptions& options) : impl_(std::make_unique<Impl>()) {
  impl_->options = options;
  AgreeOnOptions(comm, options, "Aggregator");
  try {
    impl_->topology = NodeTopology::Discover(comm, options.ranksPerNode);
  } catch (const std::invalid_argument& error) {
    throw UsageError(std::string("Aggregator: ") + error.what());
  }
  Impl::RankedLevel mine;
  mine.rank = impl_->topology.rank();
  GRADAGG_MPI_CHECK(MPI_Query_thread(&mine.level));
  GRADAGG_MPI_CHECK(MPI_Allreduce(&mine, &impl_->lowestThreadLevel, 1, MPI_2INT, MPI_MINLOC, comm));
  if (options.doubleBuffered) impl_->RequireBackground("the double-buffered mode");
  impl_->intraNode = std::make_unique<SharedWindowPhase>(impl_->topology.node(), options.timeoutSeconds);
  if (impl_->topology.nodeCount() > 1) {
    impl_->crossNode =
        std::make_unique<CrossNodePhase>(impl_->topology.cross(), options, MakeHostCrossNodeBackend(options));
  }
  if (options.traceLevel >= 1 && impl_->topology.rank() == 0) {
    std::fprintf(stderr, "# gradagg: %s; %s\n", impl_->topology.Describe().c_str(), Describe(options).c_str());
  }
}

Aggregator::~Aggregator() {
  if (impl_->pending) impl_->pending->WaitUntilDone();  // a destructor never throws: its error goes unreported
  // Out of step with the node's other ranks (a failed call, or an exception passing through): free nothing
  // collectively, so destruction cannot wait for ranks that are elsewhere.
  if (!impl_->failure.empty() || std::uncaught_exceptions() > 0) {
    impl_->intraNode->Abandon();
    if (impl_->device) impl_->device->Abandon();
  }
}

void Aggregator::AggregateGradients(float* gradient, size_t count, GradientHeader* header) {
  AggregateGradients(std::vector<GradientBuffer>{{gradient, count}}, header);
}

void Aggregator::AggregateGradients(const std::vector<GradientBuffer>& gradients, GradientHeader* header) {
  Impl& self = *impl_;
  if (self.options.doubleBuffered) return self.DoubleBufferedCall(gradients, header);
  self.Settle();
  std::string problem;
  const FlatBuffers flat = FlattenHostGradients(gradients, &problem);
  self.stats = self.RunHost(flat, LayoutOf(gradients, self.options), header, problem);
}

ShardRange Aggregator::ReduceScatterGradients(const std::vector<GradientBuffer>& gradients, GradientHeader* header) {
  Impl& self = *impl_;
  self.Settle();
  std::string problem;
  const FlatBuffers flat = FlattenHostGradients(gradients, &problem);
  if (self.options.doubleBuffered) problem = "ReduceScatterGradients: not with the double-buffered mode";
  ElementRange shard;
  self.stats = self.RunHost(flat, LayoutOf(gradients, self.options), header, problem, &shard);
  return {shard.begin, shard.count};
}

AggregationStats Aggregator::Impl::RunCall(const BucketLayout& callLayout, GradientHeader* header,
                                           const std::string& problem, bool onDevice,
                                           const std::function<void()>& prepare,
                                           const std::function<AggregationStats(bool contributes)>& phases) {
  Stopwatch totalClock;
  Stopwatch clock;
  // 0. Every rank has checked its arguments; all ranks agree on sizes and memory and sum the header (or all throw).
  if (options.traceLevel >= 3) call_timeline::Begin();
  const bool contributes =
      AgreeOnCall(topology.world(), callLayout, header, problem.empty() ? ImportProblem(callLayout) : problem,
                  onDevice ? CallMemory::kDevice : CallMemory::kHost, options.timeoutSeconds);
  call_timeline::Note("agreed");
  const double agreement = clock.Lap();
  if (prepare) prepare();  // not kept in `failure`: MakeDevicePath agrees on its refusals, every rank throws alike
  AggregationStats call;
  try {
    call = phases(contributes);
    lastCallLayout = callLayout;
    lastCallOnDevice = onDevice;
  } catch (const std::exception& error) {  // past the agreement, a failure may be this rank's alone
    failure = error.what();
    throw;
  }
  if (options.timing) call.times.agreement = agreement;
  call.times.total = totalClock.Lap();
  TraceCall(callLayout.elements(), call);
  return call;
}

AggregationStats Aggregator::Impl::RunHost(const FlatBuffers& flat, const BucketLayout& callLayout,
                                           GradientHeader* header, const std::string& problem,
                                           ElementRange* keepStripe) {
  return RunCall(callLayout, header, problem, false, nullptr, [&](bool contributes) {
    InstallImport(crossNode.get());
    return RunHostPhases(flat, callLayout, contributes, keepStripe);
  });
}

AggregationStats Aggregator::Impl::RunHostPhases(const FlatBuffers& flat, const BucketLayout& callLayout,
                                                 bool contributes, ElementRange* keepStripe) {
  AggregationStats call;
  if (!contributes) flat.Zero();
  // One rank per node and one buffer: phases 1 and 3 are the identity, so phase 2 works on the gradient itself.
  const bool inPlace = topology.ranksPerNode() == 1 && flat.Contiguous() != nullptr;
  if (!inPlace && flat.size() != 0) Reshape(callLayout);
  if (keepStripe) *keepStripe = inPlace || flat.size() == 0 ? ElementRange{0, flat.size()}
                                                            : shards[static_cast<size_t>(topology.localRank())];
  const ThreePhases phases{inPlace ? nullptr : intraNode.get(), crossNode.get(), topology.node(), options.timing, {},
                           keepStripe};
  RunThreePhases(phases, flat, callLayout, shards, stripe.data(), stripeLayout, call);
  return call;  // RunCall times the whole call
}

void Aggregator::RegisterDeviceBuffer(void* data, size_t bytes) {
  InitializeDevice();
  impl_->device->RegisterBuffer(data, bytes);
}

void Aggregator::DeregisterDeviceBuffer(void* data) {
  InitializeDevice();
  impl_->device->DeregisterBuffer(data);
}

std::string Aggregator::InitializeDevice() {
  impl_->Settle();
  if (!impl_->device) impl_->device = MakeDevicePath(impl_->topology, impl_->options);
  return impl_->device->Describe();
}

void Aggregator::AggregateGradients(const std::vector<DeviceGradient>& gradients, CudaStream stream,
                                    GradientHeader* header) {
  Impl& self = *impl_;
  if (self.options.doubleBuffered) return self.DoubleBufferedCall(gradients, stream, header);
  self.Settle();
  self.stats = self.RunDevice(gradients, stream, header, DeviceGradientProblem(gradients, self.BoundDevice()));
}

std::shared_ptr<DeviceCallTurn> Aggregator::Impl::IssueDeviceTurn() const {
  return topology.ranksPerNode() > 1 ? DeviceCallTurn::Issue(options.timeoutSeconds) : nullptr;
}

AggregationStats Aggregator::Impl::RunDevice(const std::vector<DeviceGradient>& gradients, CudaStream stream,
                                             GradientHeader* header, const std::string& problem,
                                             std::shared_ptr<DeviceCallTurn> turn) {
  if (turn == nullptr) turn = IssueDeviceTurn();
  if (turn != nullptr) {
    try {
      turn->Wait();
    } catch (const std::exception& error) {  // this rank's alone: its peers wait for it in the agreement
      failure = error.what();
      throw;
    }
  }
  struct EndTurn {
    DeviceCallTurn* turn;
    ~EndTurn() {
      if (turn != nullptr) turn->End();
    }
  } endTurn{turn.get()};
  const BucketLayout callLayout = LayoutOf(gradients, options);
  const auto makePath = [&] {
    if (!device) device = MakeDevicePath(topology, options);
  };
  return RunCall(callLayout, header, problem, true, makePath, [&](bool contributes) {
    InstallImport(device->crossNode());
    AggregationStats call;
    device->Aggregate(gradients, callLayout, contributes, stream, call);
    return call;
  });
}

int Aggregator::Impl::BoundDevice() const {
  if (device) return device->device();
  return handoff ? handoff->device() : -1;
}

void Aggregator::Impl::TraceCall(size_t elements, const AggregationStats& call) const {
  if (options.traceLevel >= 2) {
    const PhaseTimes& times = call.times;
    std::fprintf(stderr,
                 "# gradagg rank %d: %zu elements, total %.1f us (agreement %.1f, reduce-scatter %.1f, quantize %.1f, "
                 "exchange %.1f, decode %.1f, all-gather %.1f), %zu bytes across nodes\n",
                 topology.rank(), elements, times.total * 1e6, times.agreement * 1e6, times.reduceScatter * 1e6,
                 times.quantize * 1e6, times.exchange * 1e6, times.decode * 1e6, times.allGather * 1e6,
                 call.interNodeBytesSent);
  }
  if (options.traceLevel >= 3) {
    std::fprintf(stderr, "# gradagg rank %d: timeline (us): %s\n", topology.rank(), call_timeline::End().c_str());
  }
}

void Aggregator::ResetResiduals() {
  impl_->Settle();
  if (impl_->crossNode) impl_->crossNode->ResetResiduals();
  if (impl_->device && impl_->device->crossNode()) impl_->device->crossNode()->ResetResiduals();
}

namespace {

// The element counts of a layout's tensors (its segments: empty tensors are not in it).
std::vector<size_t> TensorSizes(const BucketLayout& layout) {
  std::vector<size_t> sizes;
  for (const BucketSegment& segment : layout.segments()) sizes.push_back(segment.count);
  return sizes;
}

std::string Sizes(const std::vector<size_t>& sizes) {
  std::string text;
  for (size_t size : sizes) text += (text.empty() ? "" : ", ") + std::to_string(size);
  return "[" + text + "]";
}

}  // namespace

Residuals Aggregator::ExportResiduals() {
  Impl& self = *impl_;
  self.Settle();
  Residuals residuals;
  residuals.tensorSizes = TensorSizes(self.lastCallLayout);
  CrossNodePhase* phase = self.lastCallOnDevice ? self.device->crossNode() : self.crossNode.get();
  if (phase != nullptr) phase->ExportResiduals(&residuals.stripe, &residuals.own);
  return residuals;
}

void Aggregator::ImportResiduals(Residuals residuals) {
  Impl& self = *impl_;
  self.Settle();
  const NodeTopology& topology = self.topology;
  const BucketLayout layout(residuals.tensorSizes, self.options.bucketSize);
  size_t stripe = 0;
  size_t own = 0;
  if (topology.nodeCount() > 1 && layout.elements() > 0) {
    const ElementRange shard =
        SplitIntoBucketRuns(layout, static_cast<size_t>(topology.ranksPerNode()))[topology.localRank()];
    stripe = shard.count;
    own = SplitIntoBucketRuns(layout.Slice(shard.begin, shard.count),
                              static_cast<size_t>(topology.nodeCount()))[topology.nodeIndex()]
              .count;
  }
  if (residuals.stripe.size() != stripe || residuals.own.size() != own) {
    throw UsageError(
        "Aggregator::ImportResiduals: residuals of " + std::to_string(residuals.stripe.size()) + " + " +
        std::to_string(residuals.own.size()) + " elements cannot be rank " + std::to_string(topology.rank()) +
        "'s for tensors of sizes " + Sizes(residuals.tensorSizes) + " on " + std::to_string(topology.nodeCount()) +
        " node(s) of " + std::to_string(topology.ranksPerNode()) + " rank(s), which carries " + std::to_string(stripe) +
        " + " + std::to_string(own) + ": they come from another rank, topology or options (" + RankAndHost() + ")");
  }
  self.imported = std::make_unique<Residuals>(std::move(residuals));
}

std::string Aggregator::Impl::ImportProblem(const BucketLayout& callLayout) const {
  if (!imported || BucketLayout(imported->tensorSizes, options.bucketSize) == callLayout) return "";
  return "the residuals imported on rank " + std::to_string(topology.rank()) + " are for tensors of sizes " +
         Sizes(imported->tensorSizes) + ", not this call's " + Sizes(TensorSizes(callLayout));
}

void Aggregator::Impl::InstallImport(CrossNodePhase* phase) {
  if (!imported) return;
  const std::unique_ptr<Residuals> residuals = std::move(imported);
  if (phase != nullptr) phase->ImportResiduals(std::move(residuals->stripe), std::move(residuals->own));
}

const AggregationStats& Aggregator::LastStats() const {
  if (impl_->pending && impl_->pending->Done()) return impl_->pending->stats();
  return impl_->stats;
}
const AggregatorOptions& Aggregator::options() const { return impl_->options; }
int Aggregator::rank() const { return impl_->topology.rank(); }
int Aggregator::size() const { return impl_->topology.size(); }
int Aggregator::nodeCount() const { return impl_->topology.nodeCount(); }
int Aggregator::ranksPerNode() const { return impl_->topology.ranksPerNode(); }
int Aggregator::nodeIndex() const { return impl_->topology.nodeIndex(); }
int Aggregator::localRank() const { return impl_->topology.localRank(); }

const NodeTopology& TopologyOf(const Aggregator& aggregator) { return aggregator.impl_->topology; }

}  // namespace gradagg
