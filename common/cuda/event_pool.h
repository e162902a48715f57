// CUDA events made on first use and reused by index across runs, destroyed with the pool: for work that records a
// varying number of events per call without creating any on the call's path. Host-only header.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <vector>

#include "common/cuda/cuda_error.h"

namespace gradagg {

class EventPool {
 public:
  // `flags`: cudaEventCreateWithFlags's (cudaEventDisableTiming, unless the events are to be timed).
  explicit EventPool(unsigned flags = cudaEventDisableTiming) : flags_(flags) {}
  EventPool(const EventPool&) = delete;
  EventPool& operator=(const EventPool&) = delete;
  ~EventPool() {
    for (cudaEvent_t event : events_) cudaEventDestroy(event);
  }
  cudaEvent_t operator[](size_t index) {
    while (events_.size() <= index) {
      cudaEvent_t event = nullptr;
      GRADAGG_CUDA_CHECK(cudaEventCreateWithFlags(&event, flags_));
      events_.push_back(event);
    }
    return events_[index];
  }
  // An event made earlier; throws std::out_of_range for one never asked for.
  cudaEvent_t at(size_t index) const { return events_.at(index); }

 private:
  unsigned flags_;
  std::vector<cudaEvent_t> events_;
};

}  // namespace gradagg
