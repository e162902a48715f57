#include "aggregator/background_call.h"

#include <utility>

#include "gradagg/pending_aggregation.h"

namespace gradagg {
namespace detail {

void BackgroundCall::Finish(const AggregationStats& stats, std::exception_ptr error) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stats_ = stats;
    error_ = std::move(error);
    done_ = true;
  }
  finished_.notify_all();
}

void BackgroundCall::WaitUntilDone() const {
  std::unique_lock<std::mutex> lock(mutex_);
  finished_.wait(lock, [this] { return done_; });
}

bool BackgroundCall::Done() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return done_;
}

void BackgroundCall::ThrowIfFailed() {
  std::lock_guard<std::mutex> lock(mutex_);
  errorSeen_ = true;
  if (error_) std::rethrow_exception(error_);
}

std::exception_ptr BackgroundCall::TakeUnseenError() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (errorSeen_) return nullptr;
  errorSeen_ = true;
  return error_;
}

BackgroundThread::~BackgroundThread() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::shared_ptr<BackgroundCall> BackgroundThread::Start(std::function<AggregationStats()> job) {
  auto call = std::make_shared<BackgroundCall>();
  {
    std::unique_lock<std::mutex> lock(mutex_);
    wake_.wait(lock, [this] { return !job_; });  // the previous job has been taken
    job_ = std::move(job);
    call_ = call;
  }
  wake_.notify_all();
  if (!thread_.joinable()) thread_ = std::thread([this] { Loop(); });
  return call;
}

void BackgroundThread::Loop() {
  for (;;) {
    std::function<AggregationStats()> job;
    std::shared_ptr<BackgroundCall> call;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [this] { return stopping_ || job_; });
      if (!job_) return;  // stopping, and nothing left to run
      job = std::move(job_);
      job_ = nullptr;
      call = std::move(call_);
    }
    wake_.notify_all();
    AggregationStats stats;
    std::exception_ptr error;
    try {
      stats = job();
    } catch (...) {
      error = std::current_exception();
    }
    call->Finish(stats, error);
  }
}

}  // namespace detail

PendingAggregation::PendingAggregation(std::shared_ptr<detail::BackgroundCall> call) : call_(std::move(call)) {}

PendingAggregation::PendingAggregation(PendingAggregation&& other) noexcept : call_(std::move(other.call_)) {}

PendingAggregation& PendingAggregation::operator=(PendingAggregation&& other) noexcept {
  if (this != &other) {
    if (call_) call_->WaitUntilDone();
    call_ = std::move(other.call_);
  }
  return *this;
}

PendingAggregation::~PendingAggregation() {
  if (call_) call_->WaitUntilDone();
}

void PendingAggregation::Wait() {
  if (!call_) return;
  call_->WaitUntilDone();
  call_->ThrowIfFailed();
}

bool PendingAggregation::Done() const { return !call_ || call_->Done(); }

}  // namespace gradagg
