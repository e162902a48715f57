// The Aggregator's background thread (AggregateGradientsAsync and the double-buffered mode) and the state of one
// call that runs there, shared by the thread, the Aggregator and the caller's PendingAggregation.
#pragma once

#include <condition_variable>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "gradagg/aggregation_stats.h"
#include "gradagg/pending_aggregation.h"

namespace gradagg::detail {

class BackgroundCall {
 public:
  // On the background thread: the call ended, with `stats` or with `error`.
  void Finish(const AggregationStats& stats, std::exception_ptr error);

  void WaitUntilDone() const;
  bool Done() const;
  // After WaitUntilDone. Throws the call's error, if any, and notes that the caller has seen it.
  void ThrowIfFailed();
  // After WaitUntilDone. The error nobody has thrown yet (null if none or already thrown); notes it as thrown.
  std::exception_ptr TakeUnseenError();
  const AggregationStats& stats() const { return stats_; }  // after WaitUntilDone

 private:
  mutable std::mutex mutex_;
  mutable std::condition_variable finished_;
  bool done_ = false;
  bool errorSeen_ = false;
  std::exception_ptr error_;
  AggregationStats stats_;
};

// One thread that runs one job at a time, started on first use and joined on destruction.
class BackgroundThread {
 public:
  BackgroundThread() = default;
  ~BackgroundThread();
  BackgroundThread(const BackgroundThread&) = delete;
  BackgroundThread& operator=(const BackgroundThread&) = delete;

  // Runs `job` on the thread once the previous job is over; the returned call finishes with what it returns or
  // throws.
  std::shared_ptr<BackgroundCall> Start(std::function<AggregationStats()> job);

 private:
  void Loop();

  std::mutex mutex_;
  std::condition_variable wake_;
  std::function<AggregationStats()> job_;
  std::shared_ptr<BackgroundCall> call_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace gradagg::detail
