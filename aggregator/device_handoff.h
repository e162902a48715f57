// Device work moved off the caller's thread: AggregateGradientsAsync and the double-buffered mode hand the call to
// the Aggregator's background thread, which must start after what the caller's stream already holds and must run
// on the caller's GPU. Built from aggregator/cuda/ when CUDA is there; without it, making one throws UsageError.
#pragma once

#include <memory>
#include <vector>

#include "gradagg/device_gradient.h"

namespace gradagg {

class DeviceHandoff {
 public:
  virtual ~DeviceHandoff() = default;

  virtual int device() const = 0;
  // On the caller's thread: the next background call starts after what `stream` holds now.
  virtual void Mark(CudaStream stream) = 0;
  // On the background thread: makes the GPU current and returns this handoff's own stream, which waits for the mark.
  virtual CudaStream Resume() = 0;

  // Double buffering, on the caller's thread and `stream`. Capture copies `gradients` into slot 0 or 1 (its memory
  // grows as needed) and returns tensors that describe the copy; Restore copies a slot's tensors back into
  // `gradients`, or returns false and copies nothing when their shapes differ from the slot's; Zero clears them.
  virtual std::vector<DeviceGradient> Capture(int slot, const std::vector<DeviceGradient>& gradients,
                                              CudaStream stream) = 0;
  virtual bool Restore(int slot, const std::vector<DeviceGradient>& gradients, CudaStream stream) = 0;
  virtual void Zero(const std::vector<DeviceGradient>& gradients, CudaStream stream) = 0;
};

// For the calling thread's current GPU.
std::unique_ptr<DeviceHandoff> MakeDeviceHandoff();

}  // namespace gradagg
