// The device aggregations of every Aggregator in one process run one at a time, in the order they were issued.
//
// Each Aggregator works on a CUDA stream of its own, and the NVLink kernels spin until the same call's kernels on the
// node's other GPUs arrive. Two Aggregators' calls in flight at once (a DDP hook's buckets, one Aggregator each) can
// then leave one GPU spinning in a call whose blocks its peer cannot fit beside its own spinning kernel and PyTorch's:
// each waits for the other until the NVLink deadline (seen on 2 nodes of 2 H100s with the DDP hook at 85M). A caller
// that issues its calls in the same order on every rank (DDP hands buckets over in index order) gets the same order
// of turns on every rank, and one call's kernels at a time.
#pragma once

#include <cstdint>
#include <memory>

namespace gradagg {

class DeviceCallTurn {
 public:
  // On the caller's thread, in the caller's order: the next turn. `timeoutSeconds` bounds Wait.
  static std::shared_ptr<DeviceCallTurn> Issue(double timeoutSeconds);

  explicit DeviceCallTurn(uint64_t ticket, double timeoutSeconds) : ticket_(ticket), timeoutSeconds_(timeoutSeconds) {}
  ~DeviceCallTurn() { End(); }
  DeviceCallTurn(const DeviceCallTurn&) = delete;
  DeviceCallTurn& operator=(const DeviceCallTurn&) = delete;

  // Blocks until every turn issued before this one has ended; throws TimeoutError when the one ahead has not ended
  // within the timeout (0 or less: no limit).
  void Wait() const;
  // This turn's call is over (or will never run): the next turn may start. Idempotent.
  void End();

 private:
  uint64_t ticket_;
  double timeoutSeconds_;
  bool ended_ = false;
};

}  // namespace gradagg
