// The handle of an aggregation running in the background (Aggregator::AggregateGradientsAsync).
#pragma once

#include <memory>

namespace gradagg {
namespace detail {
class BackgroundCall;
}

// Movable, not copyable. Until Wait() returns, leave the call's gradients and header alone.
class PendingAggregation {
 public:
  PendingAggregation() = default;  // refers to no call: Wait() returns at once
  explicit PendingAggregation(std::shared_ptr<detail::BackgroundCall> call);
  PendingAggregation(PendingAggregation&& other) noexcept;
  PendingAggregation& operator=(PendingAggregation&& other) noexcept;  // waits for the call it held first
  PendingAggregation(const PendingAggregation&) = delete;
  PendingAggregation& operator=(const PendingAggregation&) = delete;
  // Waits, so the gradients are never written after the handle is gone. An error that Wait() did not throw is
  // thrown by the Aggregator's next call.
  ~PendingAggregation();

  // Returns once the aggregate and the summed header are in place (device results too: nothing is left queued).
  // Throws the call's error: UsageError on every rank for mismatched or bad arguments, as the blocking call would.
  void Wait();
  // True once Wait() would return without blocking.
  bool Done() const;

 private:
  std::shared_ptr<detail::BackgroundCall> call_;
};

}  // namespace gradagg
