// Large allreduces with the reduce-scatter on the copy engines. On 4 H100s the copy engines move ~386 GB/s out of
// each GPU to all three peers at once, where stores from the multiprocessors stop near 352 (all-push, NCCL's ring
// ~355); but copies running beside the multiprocessors' stores slow both (bench/results/nvlink_allreduce/h100x4/
// phase_split/). So the two never overlap: first the copies put every peer's terms of this rank's shard into its copy
// inbox, then one kernel sums and stores the result into every output (copy_scatter_kernel.cuh), at the speed of
// all-push's own result stores. The price is the inbox: while a buffer of at least the threshold is registered, the
// group keeps (G - 1) / G of the largest such buffer, made and resized when registering (a collective call already),
// so that no call ever needs the host to meet its peers.
//
// In place is safe: a peer's kernel writes this rank's output (its input) only after the first barrier, which this
// rank passes once its own copies out of that input are done; the next call's copies into a peer's inbox start only
// after the last barrier, which the peer passes once its kernel has read its inbox.
#include <algorithm>
#include <cstdlib>

#include "common/cuda/cuda_error.h"
#include "intra_node/cuda/copy_scatter_kernel.cuh"
#include "intra_node/cuda/dependent_launch.cuh"
#include "intra_node/cuda/peer_group.h"
#include "intra_node/cuda/peer_group_internal.h"

namespace gradagg::nvlink {

// Where each slot of the copy inbox starts: 2 MiB, a large page.
constexpr size_t kCopySlotAlignment = 2 << 20;

size_t DefaultCopyScatterMinBytes(int ranks) {
  (void)ranks;
  return kNever;
}

size_t PeerGroup::CopyInboxSlotWanted() const {
  if (config_.copyScatterMinBytes == kNever) return 0;
  size_t largest = 0;  // the largest registration of at least the threshold, on any rank: the same on every rank
  for (const Registration& registration : registrations_) {
    size_t bytes = 0;
    for (const ExportedBuffer& exported : registration.exported) bytes = std::max(bytes, exported.bytes);
    if (bytes >= config_.copyScatterMinBytes) largest = std::max(largest, bytes);
  }
  // A call's largest shard is count / G rounded up to whole 16-byte vectors.
  return largest == 0 ? 0 : RoundUp((largest + ranks() - 1) / ranks() + 16, kCopySlotAlignment);
}

void PeerGroup::UpdateCopyInbox() {
  const size_t slotBytes = CopyInboxSlotWanted();
  if (slotBytes == copyInboxSlotBytes_) return;
  // Collective (registering is): once this rank's stream has passed the last call's barriers, no copy into anyone's
  // old inbox and no kernel reading one runs any more; once every rank has unmapped its peers' old inboxes (the
  // all-gather), each may free its own.
  GRADAGG_CUDA_CHECK(cudaDeviceSynchronize());
  char flag = 1;
  if (copyInboxMemory_) {
    Unmap(copyInbox_);
    copyInbox_ = Registration{};
    copyInboxSlotBytes_ = 0;
    AllGatherRecord(&flag, 1);
    copyInboxMemory_.reset();
  }
  if (slotBytes == 0) return;
  void* memory = nullptr;
  const cudaError_t status = cudaMalloc(&memory, slotBytes * (ranks() - 1));
  if (status == cudaErrorMemoryAllocation) {
    cudaGetLastError();  // a failed allocation leaves nothing behind but the error: cleared
    flag = 0;
  } else {
    GRADAGG_CUDA_CHECK(status);
  }
  const std::vector<char> all = AllGatherRecord(&flag, 1);
  if (std::count(all.begin(), all.end(), 0) > 0) {  // on every rank alike: all-push instead, until the next try
    if (memory != nullptr) GRADAGG_CUDA_CHECK(cudaFree(memory));
    return;
  }
  copyInboxMemory_.reset(memory);
  copyInbox_ = Share(memory, slotBytes * (ranks() - 1));
  copyInboxSlotBytes_ = slotBytes;
}

bool PeerGroup::CopyScatterAllReduce(const TwoShotCall& call, const std::vector<ElementRange>& shards, ElementType type,
                                     cudaStream_t stream) {
  const size_t elementBytes = ElementBytes(type);
  if (call.largestShard * elementBytes > copyInboxSlotBytes_) return false;
  while (static_cast<int>(copyStreams_.size()) < ranks() - 1) copyStreams_.push_back(MakeNonBlockingStream());

  // 1. At step j every rank copies to rank + j, so that each receives from one sender a step.
  const char* const input = call.input.registration->local + call.input.offset;
  const cudaEvent_t start = copyEvents_[0];
  GRADAGG_CUDA_CHECK(cudaEventRecord(start, stream));
  for (int step = 1; step < ranks(); ++step) {
    const int peer = (rank_ + step) % ranks();
    const ElementRange& theirs = shards[peer];
    cudaStream_t copier = copyStreams_[step - 1].get();
    GRADAGG_CUDA_CHECK(cudaStreamWaitEvent(copier, start, 0));
    if (theirs.count > 0 && !(std::getenv("GRADAGG_EXPERIMENT") && std::atoi(std::getenv("GRADAGG_EXPERIMENT")) == 1)) {
      char* const slot = copyInbox_.peer[peer] + (rank_ < peer ? rank_ : rank_ - 1) * copyInboxSlotBytes_;
      GRADAGG_CUDA_CHECK(cudaMemcpyAsync(slot, input + theirs.begin * elementBytes, theirs.count * elementBytes,
                                         cudaMemcpyDeviceToDevice, copier));
    }
    const cudaEvent_t copied = copyEvents_[step];
    GRADAGG_CUDA_CHECK(cudaEventRecord(copied, copier));
    GRADAGG_CUDA_CHECK(cudaStreamWaitEvent(stream, copied, 0));
  }
  // 2. Every rank's copies into this rank's inbox have landed (and every rank makes this call: signatures compared).
  Arrive(1, stream);

  // 3. Sum this rank's shard and store it into every output.
  device::CopyScatterArgs args{};
  args.input = input;
  for (int p = 0; p < ranks(); ++p) args.peerOutput[p] = call.output.registration->peer[p] + call.output.offset;
  args.inbox = copyInbox_.local;
  args.slotBytes = copyInboxSlotBytes_;
  args.shardBegin = call.shard.begin;
  args.shardCount = call.shard.count;
  args.order = config_.peerOrder;
  args.barrier = Barrier();
  if (call.shard.count > 0 &&
      !(std::getenv("GRADAGG_EXPERIMENT") && std::atoi(std::getenv("GRADAGG_EXPERIMENT")) == 2)) {
    const size_t vectors = (call.shard.count * elementBytes + 15) / 16;
    const size_t perBlock = static_cast<size_t>(config_.threads) * 4;
    const int blocks = static_cast<int>(std::min<size_t>(multiprocessors_, (vectors + perBlock - 1) / perBlock));
    cuda_detail::WithElementType(type, [&](auto element) {
      using T = decltype(element);
      WithRankCount(ranks(), [&](auto count) {
        LaunchNodeKernel(device::CopyScatterGatherKernel<T, decltype(count)::value>, blocks, config_.threads, stream,
                         false, "CopyScatterGatherKernel", args);
      });
    });
  }
  // 4. Every rank's results are in this rank's output.
  Arrive(2, stream);
  return true;
}

}  // namespace gradagg::nvlink
