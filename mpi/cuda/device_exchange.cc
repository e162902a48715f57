#include "mpi/cuda/device_exchange.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

#include "gradagg/device_gradient.h"
#include "gradagg/errors.h"
#include "common/call_timeline.h"
#include "common/cuda/cuda_error.h"
#include "common/cuda/device_memory.h"
#include "common/cuda/event_pool.h"
#include "mpi/deadline.h"
#include "mpi/mpi_error.h"

namespace gradagg {
namespace {

// Returns the pieces (ordered_exchange.h) of the exchange.
size_t CheckShape(MPI_Comm comm, const std::vector<SendBuffer>& sends, const std::vector<ReceiveBuffer>& receives,
                  int& rank, int& size) {
  GRADAGG_MPI_CHECK(MPI_Comm_rank(comm, &rank));
  GRADAGG_MPI_CHECK(MPI_Comm_size(comm, &size));
  return PiecesOf(sends.size(), receives.size(), size, "DeviceExchange");
}

// Host memory that work a run left queued on its stream may still read (a run returns without waiting for its
// stream). Release marks where that work ends; Wait, before anything writes the memory again, blocks until it is done
// (at once where nothing is pending); the destructor waits too.
class ReuseGuard {
 public:
  ReuseGuard() = default;
  ReuseGuard(const ReuseGuard&) = delete;
  ReuseGuard& operator=(const ReuseGuard&) = delete;
  ~ReuseGuard() {
    if (pending_) cudaEventSynchronize(done_);
    if (done_ != nullptr) cudaEventDestroy(done_);
  }
  void Release(cudaStream_t stream) {
    if (done_ == nullptr) GRADAGG_CUDA_CHECK(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming));
    GRADAGG_CUDA_CHECK(cudaEventRecord(done_, stream));
    pending_ = true;
  }
  void Wait() {
    if (!pending_) return;
    GRADAGG_CUDA_CHECK(cudaEventSynchronize(done_));
    pending_ = false;
  }

 private:
  cudaEvent_t done_ = nullptr;
  bool pending_ = false;
};

class CudaAwareExchange final : public DeviceExchange {
 public:
  explicit CudaAwareExchange(double timeoutSeconds) : timeoutSeconds_(timeoutSeconds) {}
  void Run(MPI_Comm comm, int tag, const std::vector<SendBuffer>& sends, const std::vector<ReceiveBuffer>& receives,
           cudaStream_t stream, const std::function<void(int)>& onReady, const char* what,
           const std::function<void(int)>& beforeSend, const std::function<void()>& afterSends) override {
    GRADAGG_CUDA_CHECK(cudaStreamSynchronize(stream));  // what was queued before is complete
    std::function<void(int)> produce;                   // each part complete before MPI reads it
    if (beforeSend) {
      produce = [&](int peer) {
        beforeSend(peer);
        GRADAGG_CUDA_CHECK(cudaStreamSynchronize(stream));
      };
    }
    // Received bytes are in device memory once MPI completes them, so onReady's work needs no wait here.
    ExchangeInRankOrder(comm, tag, sends, receives, onReady, kDefaultMaxMessageBytes, timeoutSeconds_, what, produce,
                        afterSends);
  }
  const char* name() const override { return "CUDA-aware MPI (device buffers)"; }

 private:
  double timeoutSeconds_;
};

class MappedExchange final : public DeviceExchange {
 public:
  explicit MappedExchange(double timeoutSeconds) : timeoutSeconds_(timeoutSeconds) {}

  void Run(MPI_Comm comm, int tag, const std::vector<SendBuffer>& sends, const std::vector<ReceiveBuffer>& receives,
           cudaStream_t stream, const std::function<void(int)>& onReady, const char* what,
           const std::function<void(int)>& beforeSend, const std::function<void()>& afterSends) override {
    int rank = 0, size = 0;
    CheckShape(comm, sends, receives, rank, size);
    receivesRead_.Wait();  // MPI writes the receive buffers only once the last run's queued work has read them
    // 1. Every message produced in sending order, an event after each: it leaves once the event has fired (the
    //    kernels wrote it in place, and an event's completion makes their writes visible to the host).
    std::vector<int> ready;  // the entries whose message has an event, in order
    for (int entry : EntrySendingOrder(rank, size, sends.size())) {
      if (sends[static_cast<size_t>(entry)].bytes == 0) continue;
      if (beforeSend) beforeSend(entry);
      GRADAGG_CUDA_CHECK(cudaEventRecord(events_[ready.size()], stream));
      ready.push_back(entry);
    }
    if (afterSends) afterSends();
    call_timeline::Note("messages queued");
    // 2-3. ExchangeInRankOrder on the host addresses, each send once its event has fired; onReady(p) queues work that
    //      reads p's message in place.
    size_t next = 0;
    const auto produce = [&](int entry) {
      while (ready[next] != entry) ++next;  // sends come in sending order, as the events were recorded
      GRADAGG_CUDA_CHECK(cudaEventSynchronize(events_[next]));
    };
    ExchangeInRankOrder(comm, tag, sends, receives, onReady, kDefaultMaxMessageBytes, timeoutSeconds_, what, produce);
    receivesRead_.Release(stream);
  }
  const char* name() const override {
    return "pinned host memory, mapped: the codec reads and writes messages in place";
  }

 private:
  double timeoutSeconds_;
  EventPool events_;  // one per message, after its producer
  ReuseGuard receivesRead_;
};

class StagedExchange final : public DeviceExchange {
 public:
  StagedExchange(size_t chunkBytes, double timeoutSeconds)
      : chunkBytes_(std::clamp<size_t>(chunkBytes, kMinStagingChunkBytes, static_cast<size_t>(INT32_MAX))),
        timeoutSeconds_(timeoutSeconds) {}

  void Run(MPI_Comm comm, int tag, const std::vector<SendBuffer>& sends, const std::vector<ReceiveBuffer>& receives,
           cudaStream_t stream, const std::function<void(int)>& onReady, const char* what,
           const std::function<void(int)>& beforeSend, const std::function<void()>& afterSends) override;
  const char* name() const override { return "staged through pinned host memory"; }

 private:
  struct Chunk {
    size_t source;  // index into the distinct send buffers
    size_t offset;  // in the buffer
    size_t bytes;
    size_t hostOffset;
  };
  struct PendingReceive {
    int peer;
    size_t entry;
    size_t bytes;
    char* host;
    char* device;
  };
  char* Reserve(size_t bytes);

  size_t chunkBytes_;
  double timeoutSeconds_;
  std::unique_ptr<char, CudaFreeHost> pinned_;
  size_t pinnedBytes_ = 0;
  EventPool events_;  // one per send chunk, after its copy out
  // A run returns with its copies to the device possibly still reading the pool. Declared after pinned_, so that it
  // is destroyed, and waits, before the pool is freed.
  ReuseGuard poolRead_;
  cudaStream_t poolStream_ = nullptr;  // the stream of the last run's copies
};

char* StagedExchange::Reserve(size_t bytes) {
  if (bytes > pinnedBytes_) {
    poolRead_.Wait();
    pinned_.reset();
    pinnedBytes_ = 0;
    void* memory = nullptr;
    GRADAGG_CUDA_CHECK(cudaMallocHost(&memory, bytes));
    pinned_.reset(static_cast<char*>(memory));
    pinnedBytes_ = bytes;
  }
  return pinned_.get();
}

void StagedExchange::Run(MPI_Comm comm, int tag, const std::vector<SendBuffer>& sends,
                         const std::vector<ReceiveBuffer>& receives, cudaStream_t stream,
                         const std::function<void(int)>& onReady, const char* what,
                         const std::function<void(int)>& beforeSend, const std::function<void()>& afterSends) {
  int rank = 0, size = 0;
  const size_t pieces = CheckShape(comm, sends, receives, rank, size);
  const auto peerOf = [size](size_t entry) { return static_cast<int>(entry % static_cast<size_t>(size)); };

  // The entries in sending order: every peer's first piece, starting with the next rank, then the second...
  const std::vector<int> sendOrder = EntrySendingOrder(rank, size, sends.size());

  // Host layout: each distinct send buffer once (the all-gather sends one buffer to every peer), then the receives.
  std::vector<SendBuffer> sources;
  std::vector<size_t> sourceOf(sends.size(), SIZE_MAX);
  std::vector<size_t> sourceHost;
  size_t hostBytes = 0;
  for (int entry : sendOrder) {
    const SendBuffer& send = sends[static_cast<size_t>(entry)];
    if (send.bytes == 0) continue;
    auto same = std::find_if(sources.begin(), sources.end(),
                             [&](const SendBuffer& s) { return s.data == send.data && s.bytes == send.bytes; });
    if (same == sources.end()) {
      sources.push_back(send);
      sourceHost.push_back(hostBytes);
      hostBytes += send.bytes;
      same = sources.end() - 1;
    }
    sourceOf[static_cast<size_t>(entry)] = static_cast<size_t>(same - sources.begin());
  }
  std::vector<size_t> receiveHost(receives.size(), 0);
  for (size_t entry = 0; entry < receives.size(); ++entry) {
    receiveHost[entry] = hostBytes;
    if (peerOf(entry) != rank) hostBytes += receives[entry].bytes;
  }
  if (stream != poolStream_) poolRead_.Wait();  // copies on another stream would not queue behind the last run's
  poolStream_ = stream;
  char* host = Reserve(hostBytes);

  // 1. Device-to-host copies of every send chunk, in order, an event after each; each source produced first where
  //    beforeSend is set (all queued: the stream copies one part while producing the next).
  std::vector<Chunk> chunks;
  for (size_t s = 0; s < sources.size(); ++s) {
    if (beforeSend) {
      for (int entry : sendOrder) {
        if (sourceOf[static_cast<size_t>(entry)] == s) beforeSend(entry);
      }
    }
    for (size_t offset = 0; offset < sources[s].bytes; offset += chunkBytes_) {
      const Chunk chunk{s, offset, std::min(chunkBytes_, sources[s].bytes - offset), sourceHost[s] + offset};
      GRADAGG_CUDA_CHECK(cudaMemcpyAsync(host + chunk.hostOffset, static_cast<const char*>(sources[s].data) + offset,
                                         chunk.bytes, cudaMemcpyDeviceToHost, stream));
      GRADAGG_CUDA_CHECK(cudaEventRecord(events_[chunks.size()], stream));
      chunks.push_back(chunk);
    }
  }

  if (afterSends) afterSends();
  call_timeline::Note("copies queued");

  // 2. Every receive chunk posted into pinned memory (same-tag messages between two ranks match in order), once the
  //    last run's copies out of it are done (the same stream has long passed them, as a rule).
  poolRead_.Wait();
  std::vector<MPI_Request> receiveRequests;
  std::vector<PendingReceive> pending;
  RankOrderRelease release(size, pieces);
  for (size_t entry = 0; entry < receives.size(); ++entry) {
    const ReceiveBuffer& receive = receives[entry];
    const int peer = peerOf(entry);
    if (peer == rank) continue;
    for (size_t offset = 0; offset < receive.bytes; offset += chunkBytes_) {
      const size_t bytes = std::min(chunkBytes_, receive.bytes - offset);
      char* hostChunk = host + receiveHost[entry] + offset;
      pending.push_back({peer, entry, bytes, hostChunk, static_cast<char*>(receive.data) + offset});
      receiveRequests.emplace_back();
      release.Expect(entry);
      GRADAGG_MPI_CHECK(
          MPI_Irecv(hostChunk, static_cast<int>(bytes), MPI_BYTE, peer, tag, comm, &receiveRequests.back()));
    }
  }

  // 3. Send chunks as their copies finish; copy arrived chunks back; release entries in rank order.
  std::vector<MPI_Request> sendRequests;
  const Deadline deadline(timeoutSeconds_);
  try {
    release.Release(onReady);
    size_t nextChunk = 0, arrived = 0;
    while (nextChunk < chunks.size() || arrived < receiveRequests.size()) {
      if (deadline.Passed())
        throw TimeoutError(ExchangeTimeoutMessage(comm, what, timeoutSeconds_, release.LeftPerRank()));
      while (nextChunk < chunks.size()) {
        const cudaError_t status = cudaEventQuery(events_[nextChunk]);
        if (status == cudaErrorNotReady) break;
        GRADAGG_CUDA_CHECK(status);
        const Chunk& chunk = chunks[nextChunk++];
        for (int entry : sendOrder) {
          if (sourceOf[static_cast<size_t>(entry)] != chunk.source) continue;
          const int peer = peerOf(static_cast<size_t>(entry));
          sendRequests.emplace_back();
          GRADAGG_MPI_CHECK(MPI_Isend(host + chunk.hostOffset, static_cast<int>(chunk.bytes), MPI_BYTE, peer, tag, comm,
                                      &sendRequests.back()));
          call_timeline::Note("sent", peer);
        }
      }
      if (arrived == receiveRequests.size()) continue;
      int index = MPI_UNDEFINED, flag = 0;
      MPI_Status status;
      GRADAGG_MPI_CHECK(
          MPI_Testany(static_cast<int>(receiveRequests.size()), receiveRequests.data(), &index, &flag, &status));
      if (!flag || index == MPI_UNDEFINED) continue;
      const PendingReceive& chunk = pending[static_cast<size_t>(index)];
      int count = 0;
      GRADAGG_MPI_CHECK(MPI_Get_count(&status, MPI_BYTE, &count));
      if (static_cast<size_t>(count) != chunk.bytes)
        throw std::runtime_error("message from rank " + std::to_string(chunk.peer) + " has " + std::to_string(count) +
                                 " bytes, expected " + std::to_string(chunk.bytes) + " (" + RankAndHost() + ")");
      call_timeline::Note("arrived", chunk.peer);
      GRADAGG_CUDA_CHECK(cudaMemcpyAsync(chunk.device, chunk.host, chunk.bytes, cudaMemcpyHostToDevice, stream));
      ++arrived;
      release.Arrived(chunk.entry);
      release.Release(onReady);
    }
    release.Release(onReady);
  } catch (const TimeoutError&) {
    // The peers are not coming: wait on nothing of theirs again (receives cancelled, every handle freed).
    AbandonRequests(receiveRequests);
    AbandonRequests(sendRequests);
    throw;
  } catch (...) {
    // Nothing may write the pinned pool later: cancel what has not arrived; sends already posted complete in MPI.
    for (MPI_Request& request : receiveRequests)
      if (request != MPI_REQUEST_NULL) MPI_Cancel(&request);
    MPI_Waitall(static_cast<int>(receiveRequests.size()), receiveRequests.data(), MPI_STATUSES_IGNORE);
    MPI_Waitall(static_cast<int>(sendRequests.size()), sendRequests.data(), MPI_STATUSES_IGNORE);
    cudaStreamSynchronize(stream);
    throw;
  }

  // 4. The pool is reused by the next run: every send must be finished here, and the next run waits on poolRead_
  //    before anything writes the pool again.
  if (!WaitAllBefore(deadline, sendRequests)) {
    AbandonRequests(sendRequests);
    throw TimeoutError(ExchangeTimeoutMessage(comm, what, timeoutSeconds_, std::vector<size_t>(size, 0)));
  }
  poolRead_.Release(stream);
  call_timeline::Note("sends done");
}

}  // namespace

std::unique_ptr<void, CudaFreeHost> AllocateMappedMessages(size_t bytes) {
  void* memory = nullptr;
  GRADAGG_CUDA_CHECK(cudaHostAlloc(&memory, bytes > 0 ? bytes : 1, cudaHostAllocMapped));
  std::unique_ptr<void, CudaFreeHost> owned(memory);
  void* onDevice = nullptr;
  GRADAGG_CUDA_CHECK(cudaHostGetDevicePointer(&onDevice, memory, 0));
  if (onDevice != memory)
    throw CudaError("mapped pinned memory has another address on the device", cudaErrorInvalidValue, __FILE__,
                    __LINE__);
  std::memset(memory, 0, bytes);
  return owned;
}

std::unique_ptr<DeviceExchange> MakeMappedExchange(double timeoutSeconds) {
  return std::make_unique<MappedExchange>(timeoutSeconds);
}

std::unique_ptr<DeviceExchange> MakeDeviceExchange(bool cudaAware, size_t chunkBytes, double timeoutSeconds) {
  if (cudaAware) return std::make_unique<CudaAwareExchange>(timeoutSeconds);
  return std::make_unique<StagedExchange>(chunkBytes, timeoutSeconds);
}

}  // namespace gradagg
