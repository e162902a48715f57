// The copies that carry the peers' terms into their reader's inbox (PeerGroup::LeaveToReader with an inbox). They
// run on a stream of their own, on the copy engines, each chunk followed by a flag written by the stream itself into
// the reader's control block (a stream memory operation, fenced after the copy): no multiprocessor takes part, so a
// reader whose blocks wait on every multiprocessor can never hold up the data it waits for. Host-only; internal to
// intra_node/cuda.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>

#include "common/cuda/device_memory.h"
#include "common/value_arrays.h"

namespace gradagg::nvlink {

class TermPusher {
 public:
  // Whether `device`'s driver writes 64-bit values from a stream.
  static bool Supported(int device);

  TermPusher();  // on the current device
  ~TermPusher();
  TermPusher(const TermPusher&) = delete;
  TermPusher& operator=(const TermPusher&) = delete;

  // The pushes of one call: Begin orders them after `stream`'s work so far; Copy and Flag queue in call order; End
  // marks their end, which Join orders `stream` after.
  void Begin(cudaStream_t stream);
  void Copy(void* to, const void* from, size_t bytes);
  void Flag(uint64_t* address, uint64_t value);
  void End();
  void Join(cudaStream_t stream);

  // Where the reader's kernels record a wait that timed out (host-mapped), and the record, read on the host.
  TermArrivalFailure* failureOnDevice() const { return failureOnDevice_; }
  const volatile TermArrivalFailure& failure() const { return *failure_; }

 private:
  cudaStream_t stream_ = nullptr;
  cudaEvent_t start_ = nullptr;
  cudaEvent_t done_ = nullptr;
  bool open_ = false;  // between Begin and Join
  std::unique_ptr<TermArrivalFailure, CudaFreeHost> failure_;
  TermArrivalFailure* failureOnDevice_ = nullptr;
};

}  // namespace gradagg::nvlink
