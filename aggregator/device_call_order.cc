#include "aggregator/device_call_order.h"

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>

#include "mpi/mpi_error.h"

namespace gradagg {
namespace {

// The process's turns: `next` is the ticket Issue hands out next, `served` the oldest that has not ended; turns that
// ended before an older one wait in `ended` until `served` reaches them.
struct Turns {
  std::mutex mutex;
  std::condition_variable changed;
  uint64_t next = 0;
  uint64_t served = 0;
  std::set<uint64_t> ended;
};

Turns& ProcessTurns() {
  static Turns turns;
  return turns;
}

}  // namespace

std::shared_ptr<DeviceCallTurn> DeviceCallTurn::Issue(double timeoutSeconds) {
  Turns& turns = ProcessTurns();
  std::lock_guard<std::mutex> lock(turns.mutex);
  return std::make_shared<DeviceCallTurn>(turns.next++, timeoutSeconds);
}

void DeviceCallTurn::Wait() const {
  Turns& turns = ProcessTurns();
  std::unique_lock<std::mutex> lock(turns.mutex);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeoutSeconds_);
  if (!turns.changed.wait_until(lock, deadline, [&] { return turns.served == ticket_; }))
    throw std::runtime_error("a device aggregation waited more than " + std::to_string(timeoutSeconds_) +
                             " s for " + std::to_string(ticket_ - turns.served) +
                             " earlier one(s) of this process's Aggregators to end (" + RankAndHost() + ")");
}

void DeviceCallTurn::End() {
  Turns& turns = ProcessTurns();
  {
    std::lock_guard<std::mutex> lock(turns.mutex);
    if (ended_) return;
    ended_ = true;
    turns.ended.insert(ticket_);
    while (!turns.ended.empty() && *turns.ended.begin() == turns.served) {
      turns.ended.erase(turns.ended.begin());
      ++turns.served;
    }
  }
  turns.changed.notify_all();
}

}  // namespace gradagg
