// Phase 2's backend in device memory (cross_node_backend.h): the CUDA quantizer (the same bytes as the CPU's) and
// the float32 kernels on the caller's stream, MPI through a DeviceExchange (CUDA-aware or staged). Where `small` is
// given, a stripe whose messages total at most kMappedMessagesMaxBytes keeps them in mapped pinned memory and
// exchanges them through `small` (the mapped transport: no copies, which cost more than they move at that size).
// Work is queued on the stream set by UseStream; FinishCall returns with the stream idle.
#pragma once

#include <cuda_runtime_api.h>

#include <memory>

#include "aggregator/cross_node_backend.h"
#include "gradagg/options.h"
#include "mpi/cuda/device_exchange.h"

namespace gradagg {

class DeviceCrossNodeBackend : public CrossNodeBackend {
 public:
  // The stream of the next calls.
  virtual void UseStream(cudaStream_t stream) = 0;
};

// Measured on an H100 over TCP loopback (bench/NOTES.md): 12-14% faster at 37 KB of messages, 5% at 147 KB, 9% slower
// at 590 KB, where kernels reading and writing host memory cost more than the copies they replace.
inline constexpr size_t kMappedMessagesMaxBytes = size_t{256} << 10;

std::unique_ptr<DeviceCrossNodeBackend> MakeDeviceCrossNodeBackend(const AggregatorOptions& options,
                                                                   std::unique_ptr<DeviceExchange> exchange,
                                                                   std::unique_ptr<DeviceExchange> small);

}  // namespace gradagg
