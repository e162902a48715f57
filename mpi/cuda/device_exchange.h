// ExchangeInRankOrder (mpi/ordered_exchange.h) for buffers in device memory, through one of three transports:
//
// - CudaAwareExchange: device pointers go straight to MPI_Isend/MPI_Irecv (the MPI must be CUDA-aware);
// - MappedExchange: every message lives in mapped pinned host memory (cudaHostAllocMapped: one address for host and
//   device), so the kernels write and read messages in place and MPI moves them from host memory, with no copies:
//   each message leaves once an event recorded after its producer has fired;
// - StagedExchange: through pooled pinned host memory, each message cut into chunks so that the device-to-host
//   copy of one chunk, the MPI traffic of another and the host-to-device copy of a third overlap:
//     1. every send's chunks are copied to pinned memory on `stream`, an event after each;
//     2. every receive's chunks are posted into pinned memory;
//     3. a polling loop sends each chunk once its event has fired, and copies each arrived chunk back to the device
//        on `stream`;
//     4. onReady(e) runs as ExchangeInRankOrder's would, once e's chunks (and those of every entry before it in its
//        piece) are queued for the device.
//
// All are stream-ordered around MPI: the sends' contents are whatever `stream` has produced when Run is called,
// and onReady(e) may enqueue work on `stream` that reads entry e's receive buffer. Run returns once every message has
// arrived and every onReady has run, without waiting for `stream`: the copies and onReady's work may still be running
// there, so whatever follows on `stream` sees them done, and the host must wait for `stream` before reading results.
#pragma once

#include <cuda_runtime_api.h>
#include <mpi.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <vector>

#include "common/cuda/device_memory.h"
#include "mpi/ordered_exchange.h"

namespace gradagg {

class DeviceExchange {
 public:
  virtual ~DeviceExchange() = default;
  // As ExchangeInRankOrder, with every buffer in device memory. A send buffer may serve several peers. Past the
  // exchange's timeout it throws TimeoutError naming `what` and the ranks it waits for, as ExchangeInRankOrder does.
  // Entries and pieces as there. beforeSend(e) (where set) may queue, on `stream`, the work that fills sends[e]; it is
  // called in EntrySendingOrder, and e's bytes leave once that work is done, while later entries are still produced.
  // afterSends() (where set) comes once every send's work is queued, before the first onReady: work to overlap the
  // traffic, queued behind the sends' copies.
  virtual void Run(MPI_Comm comm, int tag, const std::vector<SendBuffer>& sends,
                   const std::vector<ReceiveBuffer>& receives, cudaStream_t stream,
                   const std::function<void(int)>& onReady, const char* what,
                   const std::function<void(int)>& beforeSend, const std::function<void()>& afterSends) = 0;
  virtual const char* name() const = 0;
};

// cudaAware: the CUDA-aware transport; else the staged one with chunks of `chunkBytes` (at least
// kMinStagingChunkBytes). Waits end after `timeoutSeconds` (0: never).
std::unique_ptr<DeviceExchange> MakeDeviceExchange(bool cudaAware, size_t chunkBytes, double timeoutSeconds);

// The mapped transport, for buffers from AllocateMappedMessages.
std::unique_ptr<DeviceExchange> MakeMappedExchange(double timeoutSeconds);

// Zeroed mapped pinned host memory whose address kernels may use as it is (unified addressing); freed with its
// holder. Throws CudaError where the device would see it at another address.
std::unique_ptr<void, CudaFreeHost> AllocateMappedMessages(size_t bytes);

}  // namespace gradagg
