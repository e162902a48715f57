// The Aggregator's state, shared by aggregator.cc (construction and the blocking calls) and
// background_aggregation.cc (AggregateGradientsAsync and the double-buffered mode).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "aggregator/background_call.h"
#include "aggregator/cross_node_phase.h"
#include "aggregator/device_call_order.h"
#include "aggregator/device_handoff.h"
#include "aggregator/device_path.h"
#include "gradagg/aggregator.h"
#include "mpi/node_topology.h"
#include "intra_node/flat_buffers.h"
#include "intra_node/intra_node_phase.h"
#include "quantize/bucket_layout.h"

namespace gradagg {

// CNTK's double-buffered mode: slot `filling` takes this call's gradients; the other slot holds the aggregation
// started by the previous call.
struct DoubleBuffer {
  int filling = 0;
  bool resultWaiting = false;  // the other slot's aggregation was started and its result not handed out yet
  BucketLayout layouts[2];     // each slot's tensors
  GradientHeader headers[2];
  bool hasHeader[2] = {};
  std::vector<float> hostSlots[2];
};

struct Aggregator::Impl {
  AggregatorOptions options;
  NodeTopology topology;
  struct RankedLevel {  // MPI_2INT
    int level = 0;
    int rank = 0;
  };
  RankedLevel lowestThreadLevel;  // the lowest MPI thread level of all ranks, and a rank that has it
  std::unique_ptr<IntraNodePhase> intraNode;
  std::unique_ptr<CrossNodePhase> crossNode;  // only with more than one node
  std::unique_ptr<DevicePath> device;         // from the first device call on
  std::unique_ptr<DeviceHandoff> handoff;     // from the first background device call on
  bool shaped = false;
  BucketLayout layout;  // of the last call
  std::vector<ElementRange> shards;
  BucketLayout stripeLayout;
  std::vector<float> stripe;
  AggregationStats stats;       // of the last call that finished and was settled
  BucketLayout lastCallLayout;  // of the last call that finished (ExportResiduals), and where it ran
  bool lastCallOnDevice = false;
  std::unique_ptr<Residuals> imported;  // ImportResiduals: for the next call, which must have their layout
  // What failed in a call after the ranks had agreed on it ("" while none did): from then on this rank is out of
  // step with the others, calls refuse at once and destruction frees nothing collectively.
  std::string failure;
  DoubleBuffer buffered;
  std::shared_ptr<detail::BackgroundCall> pending;  // the last background call, until settled
  detail::BackgroundThread background;              // last: joined before the phases it uses are destroyed

  void Reshape(const BucketLayout& callLayout);
  // What is wrong with a call of `callLayout` given an import waiting ("" if nothing); and, once the ranks agreed on
  // the call, hands the import to `phase` (null on one node).
  std::string ImportProblem(const BucketLayout& callLayout) const;
  void InstallImport(CrossNodePhase* phase);

  // One whole call on the calling thread, host or device alike: the ranks agree on it (or all throw alike), then
  // `prepare` (if any) readies what the call runs on, as every rank does alike, and `phases(contributes)` runs it;
  // a failure in the phases may be this rank's alone, so it is kept in `failure`. `problem` is this rank's own
  // complaint ("" if none).
  AggregationStats RunCall(const BucketLayout& callLayout, GradientHeader* header, const std::string& problem,
                           bool onDevice, const std::function<void()>& prepare,
                           const std::function<AggregationStats(bool contributes)>& phases);
  // RunCall of host buffers (`keepStripe`: a reduce-scatter, see RunHostPhases) and of device tensors.
  AggregationStats RunHost(const FlatBuffers& flat, const BucketLayout& callLayout, GradientHeader* header,
                           const std::string& problem, ElementRange* keepStripe = nullptr);
  // `keepStripe`: a reduce-scatter; *keepStripe gets this rank's shard.
  AggregationStats RunHostPhases(const FlatBuffers& flat, const BucketLayout& callLayout, bool contributes,
                                 ElementRange* keepStripe = nullptr);
  // Device calls take turns with every Aggregator of the process (device_call_order.h) where a node has several
  // ranks: `turn` is the one issued when the call was made, or null to issue it now.
  AggregationStats RunDevice(const std::vector<DeviceGradient>& gradients, CudaStream stream, GradientHeader* header,
                             const std::string& problem, std::shared_ptr<DeviceCallTurn> turn = nullptr);
  // The next device turn where the NVLink phase runs (several ranks per node), else null.
  std::shared_ptr<DeviceCallTurn> IssueDeviceTurn() const;

  // Waits for the pending background call, keeps its stats, and throws its error unless a PendingAggregation
  // already did; then refuses (throws) if an earlier call failed. Every call but LastStats starts here: calls never
  // overlap.
  void Settle();
  // Throws UsageError (the same on every rank) unless background calls are possible.
  void RequireBackground(const char* call) const;
  // The GPU a device call must run on: the one of earlier device calls, or -1 before the first.
  int BoundDevice() const;

  // The start of every AggregateGradientsAsync call: settles, and refuses what cannot run in the background.
  void BeginAsyncCall();

  // The double-buffered form of AggregateGradients, and its steps: settle the previous call (true when its result
  // waits to be handed out), keep this call's header in `slot`, start the aggregation of `slot`.
  void DoubleBufferedCall(const std::vector<GradientBuffer>& gradients, GradientHeader* header);
  void DoubleBufferedCall(const std::vector<DeviceGradient>& gradients, CudaStream stream, GradientHeader* header);
  bool SettleBuffered();
  void CaptureHeader(int slot, const GradientHeader* header);
  void StartBuffered(int slot, std::function<AggregationStats()> job);

  // With traceLevel >= 2: one line of a call's phase times.
  void TraceCall(size_t elements, const AggregationStats& call) const;
};

// The flat view of host buffers; `problem` gets what is wrong with them (and the view is empty then).
FlatBuffers FlattenHostGradients(const std::vector<GradientBuffer>& gradients, std::string* problem);
// The buckets of a call's tensors (host or device).
BucketLayout LayoutOf(const std::vector<GradientBuffer>& gradients, const AggregatorOptions& options);
BucketLayout LayoutOf(const std::vector<DeviceGradient>& gradients, const AggregatorOptions& options);

}  // namespace gradagg
