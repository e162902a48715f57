#include "intra_node/group_link.h"

#include <algorithm>
#include <climits>
#include <utility>

#include "gradagg/errors.h"
#include "common/cuda/cuda_error.h"
#include "mpi/agreement.h"
#include "mpi/deadline.h"
#include "mpi/mpi_error.h"
#include "intra_node/group_all_gather.h"

namespace gradagg {
namespace {

// Host-route messages carry at most this many floats each, so that a count always fits MPI's int.
constexpr size_t kMessageElements = size_t{1} << 28;
constexpr int kTag = 0x6c6b;  // "lk"

}  // namespace

GroupLink::GroupLink(MPI_Comm pair, std::vector<std::string> names, bool direct, const nvlink::PeerGroupConfig& config)
    : pair_(Communicator::Duplicate(pair)), names_(std::move(names)), config_(config) {
  if (pair_.size() != 2) throw UsageError("a group link joins two ranks, not " + std::to_string(pair_.size()));
  if (!direct) return;
  // Forwards only: no one-shot inboxes, no push inbox, the smallest staging area.
  nvlink::PeerGroupConfig linkConfig = config;
  linkConfig.oneShotMaxBytes = 0;
  linkConfig.packetMaxBytes = 0;
  linkConfig.lineMaxBytes = 0;
  linkConfig.stagingBytes = 0;
  linkConfig.reduction = nvlink::Reduction::kPull;
  peers_ = std::make_unique<nvlink::PeerGroup>(pair_.rank(), names_,
                                               BoundedAllGather(pair_.get(), config.timeoutSeconds), linkConfig);
}

GroupLink::~GroupLink() = default;

void GroupLink::Register(void* buffer, size_t bytes) {
  if (peers_) peers_->Register(buffer, bytes);
}

void GroupLink::Deregister(void* buffer) {
  if (peers_) peers_->Deregister(buffer);
}

void GroupLink::UnmapPeers() {
  if (peers_) peers_->UnmapPeers();
}

void GroupLink::ThrowIfFailed() const {
  if (peers_) peers_->ThrowIfFailed();
}

void GroupLink::Abandon() noexcept {
  if (!peers_) return;
  try {
    peers_->UnmapPeers();
  } catch (...) {  // the GPU may have failed already; nothing more to undo here
  }
  peers_.release();  // leaked on purpose: the other rank may still map this rank's memory
  pair_.Release();
}

void GroupLink::Forward(float* buffer, ElementRange range, bool upward, cudaStream_t stream) {
  const int sender = upward ? 0 : 1;
  if (!peers_) return ForwardThroughHost(buffer, range, pair_.rank() == sender, stream);
  // An all-gather in which only the sender has a part: it writes its elements into both buffers (its own in place).
  std::vector<ElementRange> shards(2, ElementRange{upward ? range.end() : range.begin, 0});
  shards[sender] = range;
  // An empty part names the buffer's start: a pointer at its end may lie past the allocation.
  peers_->AllGather(range.count > 0 ? buffer + range.begin : buffer, shards, buffer, ElementType::kFloat32, stream);
}

void GroupLink::ForwardThroughHost(float* buffer, ElementRange range, bool sending, cudaStream_t stream) {
  if (range.count == 0) return;
  if (range.count > pinnedElements_) {
    pinned_.reset();
    pinnedElements_ = 0;
    void* memory = nullptr;
    GRADAGG_CUDA_CHECK(cudaMallocHost(&memory, range.count * sizeof(float)));
    pinned_.reset(static_cast<float*>(memory));
    pinnedElements_ = range.count;
  }
  float* host = pinned_.get();
  const int other = 1 - pair_.rank();
  if (sending) {
    GRADAGG_CUDA_CHECK(
        cudaMemcpyAsync(host, buffer + range.begin, range.count * sizeof(float), cudaMemcpyDeviceToHost, stream));
    GRADAGG_CUDA_CHECK(cudaStreamSynchronize(stream));
  }
  std::vector<MPI_Request> requests;
  for (size_t begin = 0; begin < range.count; begin += kMessageElements) {
    const int count = static_cast<int>(std::min(kMessageElements, range.count - begin));
    requests.emplace_back(MPI_REQUEST_NULL);
    if (sending) {
      GRADAGG_MPI_CHECK(MPI_Isend(host + begin, count, MPI_FLOAT, other, kTag, pair_.get(), &requests.back()));
    } else {
      GRADAGG_MPI_CHECK(MPI_Irecv(host + begin, count, MPI_FLOAT, other, kTag, pair_.get(), &requests.back()));
    }
  }
  if (!WaitAllBefore(Deadline(config_.timeoutSeconds), requests)) {
    AbandonRequests(requests);
    throw TimeoutError(names_[other] + " never " + (sending ? "took" : "sent") +
                       " its part of a forward between "
                       "NVLink groups within " +
                       std::to_string(config_.timeoutSeconds) + " s (seen by " + names_[pair_.rank()] + ")");
  }
  if (!sending) {
    GRADAGG_CUDA_CHECK(
        cudaMemcpyAsync(buffer + range.begin, host, range.count * sizeof(float), cudaMemcpyHostToDevice, stream));
    GRADAGG_CUDA_CHECK(cudaStreamSynchronize(stream));  // the staging is reused by the next forward
  }
}

}  // namespace gradagg
