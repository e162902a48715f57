// gradagg's public API: sum data-parallel gradients over all ranks of an MPI communicator.
//
//   gradagg::Aggregator agg(MPI_COMM_WORLD, options);
//   agg.AggregateGradients(buffers, &header);   // in place; every rank ends with bitwise the same sum
//   agg.AggregateGradients(deviceTensors, stream, &header);   // the same on GPUs (one GPU per rank)
//   gradagg::PendingAggregation done = agg.AggregateGradientsAsync(buffers, &header);   // in the background
//   ...; done.Wait();
//
// Three phases (docs/DESIGN.md): an intra-node reduce-scatter through shared memory, a 1-bit-SGD-style quantized
// exchange across nodes with error feedback, and an intra-node all-gather. On one node the result is the exact
// float32 sum, added in local-rank order. All ranks must call with the same tensor sizes (and header shape); a
// mismatch throws UsageError on every rank.
//
// Quantization statistics are taken per bucket of options.bucketSize elements, each tensor cut into buckets of its
// own (a bucket never spans two tensors). A NaN or Inf in a gradient never poisons later calls: the bucket that holds
// it comes out non-finite in that call's result on every rank (a loss scaler sees the overflow and skips the step),
// the carried quantization error of that bucket keeps its value from before the call, LastStats().nonFiniteBuckets
// counts such buckets, and the next finite call is clean. With a momentum optimizer, aggregate beta * m * numSamples
// + the gradient sum and take the result / total samples as the new momentum m (docs/DESIGN.md, "Momentum and
// Adam"): at 1 bit, the gradient aggregated with the momentum applied afterwards diverged. Not thread-safe: call an
// Aggregator from one thread. Calls never overlap: each one first waits for a background call still running.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <memory>
#include <vector>

#include "gradagg/aggregation_stats.h"
#include "gradagg/device_gradient.h"
#include "gradagg/errors.h"
#include "gradagg/gradient_buffer.h"
#include "gradagg/gradient_header.h"
#include "gradagg/options.h"
#include "gradagg/pending_aggregation.h"
#include "gradagg/residuals.h"

namespace gradagg {

class NodeTopology;  // internal: where the ranks sit (the project's own tools read it through TopologyOf)

// A rank's shard of a call's elements (its tensors end to end): ReduceScatterGradients.
struct ShardRange {
  size_t begin = 0;
  size_t count = 0;
};

class Aggregator {
 public:
  // Collective over `comm` (which it duplicates). Throws UsageError on every rank for bad or mismatched options.
  explicit Aggregator(MPI_Comm comm, const AggregatorOptions& options = AggregatorOptions());
  ~Aggregator();
  Aggregator(const Aggregator&) = delete;
  Aggregator& operator=(const Aggregator&) = delete;

  // Collective. The buffers are the call's tensors, in order; on return they hold the aggregate over all ranks.
  // `header` (nullptr on every rank, or on none) is summed over all ranks; a rank whose header says
  // numSamples == 0 contributes zero gradients. With options.doubleBuffered, the buffers and header get the previous
  // call's aggregate instead (device results queued on `stream`), and a call's errors are thrown by the next call.
  void AggregateGradients(const std::vector<GradientBuffer>& gradients, GradientHeader* header = nullptr);
  void AggregateGradients(float* gradient, size_t count, GradientHeader* header = nullptr);

  // Collective, on host buffers: phases 1 and 2 alone (a reduce-scatter). Returns this rank's shard of the call's
  // elements, which then holds bitwise what AggregateGradients would put there; the rest of the buffers keeps this
  // rank's input. The shards are whole quantization buckets split over the node's ranks (docs/DESIGN.md,
  // Partitioning; with one rank per node, everything). Residuals carry over as for AggregateGradients, with which
  // calls of the same sizes may alternate. Not with options.doubleBuffered (UsageError on every rank).
  ShardRange ReduceScatterGradients(const std::vector<GradientBuffer>& gradients, GradientHeader* header = nullptr);

  // Collective, on GPUs: the tensors (device memory of this rank's current GPU, which must stay the same GPU for the
  // Aggregator's life; float32, bfloat16 or float16, mixed as you like) form one flat gradient, in order. The work is
  // queued on `stream` after what is already there; the call returns once the aggregate is in place. Ranks of one
  // node must use distinct GPUs. Results are bitwise the same as the CPU path's on the same float32 values (sums in
  // float32; bfloat16 and float16 results rounded to nearest even). Throws UsageError on every rank for bad input.
  void AggregateGradients(const std::vector<DeviceGradient>& gradients, CudaStream stream,
                          GradientHeader* header = nullptr);

  // Collective, in the background: the same as AggregateGradients, run by the Aggregator's own thread (and, on GPUs,
  // its own stream, after what `stream` holds now), so it overlaps what the caller does next. Returns at once; leave
  // the gradients and the header alone until the handle's Wait() returns. Every error of the aggregation itself,
  // UsageError included, is thrown by Wait() (on every rank, as the blocking call throws it). A call that cannot start
  // throws from here at once: MPI below MPI_THREAD_SERIALIZED on some rank (UsageError, on every rank), an Aggregator
  // with options.doubleBuffered (which does this by itself), or an earlier failed call. While the call runs, other
  // threads may call MPI only under MPI_THREAD_MULTIPLE.
  PendingAggregation AggregateGradientsAsync(const std::vector<GradientBuffer>& gradients,
                                             GradientHeader* header = nullptr);
  PendingAggregation AggregateGradientsAsync(const std::vector<DeviceGradient>& gradients, CudaStream stream,
                                             GradientHeader* header = nullptr);

  // Double-buffered mode: waits for the aggregation the last AggregateGradients call started and writes its result
  // (and summed header) into `gradients`, which must have that call's shapes. Returns false, touching nothing, when
  // no aggregation is waiting. Local; the next AggregateGradients call returns zeros again. Device results are
  // queued on `stream`.
  bool FlushDoubleBuffer(const std::vector<GradientBuffer>& gradients, GradientHeader* header = nullptr);
  bool FlushDoubleBuffer(const std::vector<DeviceGradient>& gradients, CudaStream stream,
                         GradientHeader* header = nullptr);

  // Collective, on GPUs (every rank, in the same order): registers device memory of this rank's GPU, as
  // ncclCommRegister does, so that a call whose gradient is one float32 tensor inside it reduces that tensor in
  // place, through peer memory (CUDA IPC), instead of copying it into the Aggregator's own buffer and back. Calls use
  // it where every rank of the node passes a tensor at the same offset of the same registration; otherwise they copy
  // as before, with the same result. Deregister (collective too) before freeing the memory: freeing memory that
  // peers still map is undefined in CUDA. Throws UsageError on every rank for memory that is not this GPU's, or a
  // pointer that was not registered.
  void RegisterDeviceBuffer(void* data, size_t bytes);
  void DeregisterDeviceBuffer(void* data);

  // Collective: sets up the GPU path now (otherwise the first device call does) and says what it chose: the GPU,
  // the NVLink groups of the node and the inter-node transport (CUDA-aware or staged) with the reason.
  std::string InitializeDevice();

  // Forget the quantization error carried between calls (error feedback). Local; call it on every rank.
  void ResetResiduals();
  // Local: the quantization error carried after the last call that finished (host or device), for that call's
  // tensor sizes; save it beside a checkpoint. Waits for a background call first.
  Residuals ExportResiduals();
  // Local: the next call starts from `residuals` (this rank's own, exported by the same rank of the same topology)
  // instead of what is carried now. Throws UsageError here when they cannot be this rank's for
  // residuals.tensorSizes; that next call must have those tensor sizes, or it throws UsageError on every rank.
  void ImportResiduals(Residuals residuals);

  // Of the last call that finished (a background call counts once it is done).
  const AggregationStats& LastStats() const;
  const AggregatorOptions& options() const;
  int rank() const;
  int size() const;
  int nodeCount() const;
  int ranksPerNode() const;
  // Where this rank sits: its node's index (0 .. nodeCount() - 1, the same on every rank of a node) and its index
  // inside the node (0 .. ranksPerNode() - 1).
  int nodeIndex() const;
  int localRank() const;

 private:
  friend const NodeTopology& TopologyOf(const Aggregator& aggregator);
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gradagg
