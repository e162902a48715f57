// Phase 2's backend in device memory (cross_node_backend.h): the CUDA quantizer (the same bytes as the CPU's) and
// the float32 kernels on the caller's stream, MPI through a DeviceExchange (CUDA-aware or staged). Work is queued on
// the stream set by UseStream; FinishCall returns with the stream idle.
#pragma once

#include <cuda_runtime_api.h>

#include <memory>

#include "aggregator/cross_node_backend.h"
#include "gradagg/options.h"
#include "mpi_glue/cuda/device_exchange.h"

namespace gradagg {

class DeviceCrossNodeBackend : public CrossNodeBackend {
 public:
  // The stream of the next calls.
  virtual void UseStream(cudaStream_t stream) = 0;
};

std::unique_ptr<DeviceCrossNodeBackend> MakeDeviceCrossNodeBackend(const AggregatorOptions& options,
                                                                   std::unique_ptr<DeviceExchange> exchange);

}  // namespace gradagg
