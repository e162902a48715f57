// AggregateGradientsAsync and CNTK's double-buffered mode: the blocking call, run on the Aggregator's background
// thread. One call at a time: every call first settles the one before it.
#include <functional>
#include <string>
#include <utility>

#include "aggregator/aggregator_impl.h"
#include "mpi/mpi_error.h"

namespace gradagg {
namespace {

const char* ThreadLevelName(int level) {
  switch (level) {
    case MPI_THREAD_SINGLE:
      return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED:
      return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED:
      return "MPI_THREAD_SERIALIZED";
    default:
      return "MPI_THREAD_MULTIPLE";
  }
}

GradientHeader ZeroedLike(const GradientHeader& header) {
  GradientHeader zero;
  zero.evalErrors.resize(header.evalErrors.size());
  return zero;
}

}  // namespace

void Aggregator::Impl::Settle() {
  if (pending) {
    const std::shared_ptr<detail::BackgroundCall> call = std::move(pending);
    pending = nullptr;
    call->WaitUntilDone();
    if (std::exception_ptr error = call->TakeUnseenError()) std::rethrow_exception(error);
    stats = call->stats();
  }
  if (!failure.empty()) {
    throw std::runtime_error("Aggregator: an earlier call failed on this rank (" + failure +
                             "), so the ranks are out of step and it cannot be used again: destroy it and end the job "
                             "(MPI_Abort) (" +
                             RankAndHost() + ")");
  }
}

void Aggregator::Impl::RequireBackground(const char* call) const {
  if (lowestThreadLevel.level >= MPI_THREAD_SERIALIZED) return;
  throw UsageError(std::string(call) +
                   " runs MPI from a background thread, so every rank needs MPI initialised by MPI_Init_thread at "
                   "MPI_THREAD_SERIALIZED or higher; rank " +
                   std::to_string(lowestThreadLevel.rank) + " runs at " + ThreadLevelName(lowestThreadLevel.level));
}

void Aggregator::Impl::BeginAsyncCall() {
  Settle();
  RequireBackground("AggregateGradientsAsync");
  if (options.doubleBuffered)
    throw UsageError(
        "AggregateGradientsAsync: this Aggregator is double-buffered, which already runs in the "
        "background; call AggregateGradients (" +
        RankAndHost() + ")");
}

bool Aggregator::Impl::SettleBuffered() {
  const bool waiting = std::exchange(buffered.resultWaiting, false);
  Settle();
  return waiting;
}

void Aggregator::Impl::CaptureHeader(int slot, const GradientHeader* header) {
  buffered.hasHeader[slot] = header != nullptr;
  if (header != nullptr) buffered.headers[slot] = *header;
}

void Aggregator::Impl::StartBuffered(int slot, std::function<AggregationStats()> job) {
  pending = background.Start(std::move(job));
  buffered.resultWaiting = true;
  buffered.filling = 1 - slot;
}

PendingAggregation Aggregator::AggregateGradientsAsync(const std::vector<GradientBuffer>& gradients,
                                                       GradientHeader* header) {
  Impl& self = *impl_;
  self.BeginAsyncCall();
  std::string problem;
  FlatBuffers flat = FlattenHostGradients(gradients, &problem);
  self.pending = self.background.Start([&self, flat = std::move(flat), layout = LayoutOf(gradients, self.options),
                                        header, problem] { return self.RunHost(flat, layout, header, problem); });
  return PendingAggregation(self.pending);
}

PendingAggregation Aggregator::AggregateGradientsAsync(const std::vector<DeviceGradient>& gradients, CudaStream stream,
                                                       GradientHeader* header) {
  Impl& self = *impl_;
  self.BeginAsyncCall();
  const std::string problem = DeviceGradientProblem(gradients, self.BoundDevice());
  if (problem.empty()) {
    if (!self.handoff) self.handoff = MakeDeviceHandoff();
    self.handoff->Mark(stream);
  }
  // A rank with a problem still takes part in the agreement, which then throws on every rank. The call's turn
  // among the process's device calls is taken here, in the caller's order.
  std::shared_ptr<DeviceCallTurn> turn = self.IssueDeviceTurn();
  self.pending = self.background.Start([&self, gradients, header, problem, turn]() mutable {
    const CudaStream work = problem.empty() ? self.handoff->Resume() : nullptr;
    return self.RunDevice(gradients, work, header, problem, std::move(turn));
  });
  return PendingAggregation(self.pending);
}

void Aggregator::Impl::DoubleBufferedCall(const std::vector<GradientBuffer>& gradients, GradientHeader* header) {
  std::string problem;
  const FlatBuffers flat = FlattenHostGradients(gradients, &problem);
  const int slot = buffered.filling;
  const int previous = 1 - slot;
  std::vector<float>& capture = buffered.hostSlots[slot];
  capture.resize(flat.size());
  flat.CopyOut({0, flat.size()}, capture.data());
  buffered.layouts[slot] = LayoutOf(gradients, options);
  CaptureHeader(slot, header);

  // The previous call's aggregate replaces the gradients; zeros when there is none or it does not fit.
  const bool waiting = SettleBuffered();
  const bool fits =
      buffered.layouts[previous] == buffered.layouts[slot] && buffered.hasHeader[previous] == (header != nullptr);
  if (waiting && fits && problem.empty()) {
    flat.CopyIn({0, flat.size()}, buffered.hostSlots[previous].data());
    if (header != nullptr) *header = buffered.headers[previous];
  } else {
    if (waiting && !fits && problem.empty())
      problem = "a double-buffered call with " + std::to_string(flat.size()) + " elements follows one with " +
                std::to_string(buffered.layouts[previous].elements()) +
                " (or other tensor sizes, or a header only one of them has); flush first";
    flat.Zero();
    if (header != nullptr) *header = ZeroedLike(*header);
  }

  StartBuffered(slot, [this, slot, problem] {
    std::vector<float>& values = buffered.hostSlots[slot];
    const FlatBuffers snapshot({{values.data(), values.size()}});
    return RunHost(snapshot, buffered.layouts[slot], buffered.hasHeader[slot] ? &buffered.headers[slot] : nullptr,
                   problem);
  });
}

void Aggregator::Impl::DoubleBufferedCall(const std::vector<DeviceGradient>& gradients, CudaStream stream,
                                          GradientHeader* header) {
  std::string problem = DeviceGradientProblem(gradients, BoundDevice());
  const bool usable = problem.empty();  // the tensors may be read and written
  const int slot = buffered.filling;
  const int previous = 1 - slot;
  std::vector<DeviceGradient> capture;
  if (problem.empty()) {
    if (!handoff) handoff = MakeDeviceHandoff();
    capture = handoff->Capture(slot, gradients, stream);
    handoff->Mark(stream);
  }
  CaptureHeader(slot, header);

  const bool waiting = SettleBuffered();
  const bool restored = waiting && problem.empty() && buffered.hasHeader[previous] == (header != nullptr) &&
                        handoff->Restore(previous, gradients, stream);
  if (restored) {
    if (header != nullptr) *header = buffered.headers[previous];
  } else {
    if (waiting && problem.empty())
      problem =
          "a double-buffered call's device tensors differ in number, size or type from the previous call's "
          "(or only one of them has a header); flush first";
    if (usable) handoff->Zero(gradients, stream);
    if (header != nullptr) *header = ZeroedLike(*header);
  }

  std::shared_ptr<DeviceCallTurn> turn = IssueDeviceTurn();
  StartBuffered(slot, [this, slot, capture, problem, turn]() mutable {
    const CudaStream work = problem.empty() ? handoff->Resume() : nullptr;
    return RunDevice(capture, work, buffered.hasHeader[slot] ? &buffered.headers[slot] : nullptr, problem,
                     std::move(turn));
  });
}

bool Aggregator::FlushDoubleBuffer(const std::vector<GradientBuffer>& gradients, GradientHeader* header) {
  Impl& self = *impl_;
  DoubleBuffer& buffered = self.buffered;
  if (!self.SettleBuffered()) return false;
  const int slot = 1 - buffered.filling;
  std::string problem;
  const FlatBuffers flat = FlattenHostGradients(gradients, &problem);
  if (problem.empty() && flat.size() != buffered.layouts[slot].elements())
    problem = "has " + std::to_string(flat.size()) + " elements, the waiting aggregate " +
              std::to_string(buffered.layouts[slot].elements());
  if (!problem.empty()) throw UsageError("FlushDoubleBuffer: " + problem + " (" + RankAndHost() + ")");
  flat.CopyIn({0, flat.size()}, buffered.hostSlots[slot].data());
  if (header != nullptr && buffered.hasHeader[slot]) *header = buffered.headers[slot];
  return true;
}

bool Aggregator::FlushDoubleBuffer(const std::vector<DeviceGradient>& gradients, CudaStream stream,
                                   GradientHeader* header) {
  Impl& self = *impl_;
  DoubleBuffer& buffered = self.buffered;
  if (!self.SettleBuffered()) return false;
  const int slot = 1 - buffered.filling;
  if (!self.handoff || !self.handoff->Restore(slot, gradients, stream))
    throw UsageError(
        "FlushDoubleBuffer: the device tensors differ in number, size or type from the waiting "
        "aggregate's (" +
        RankAndHost() + ")");
  if (header != nullptr && buffered.hasHeader[slot]) *header = buffered.headers[slot];
  return true;
}

}  // namespace gradagg
