#include "aggregator/device_call_order.h"

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <set>
#include <string>

#include "gradagg/errors.h"
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
  static Turns* turns = new Turns;  // never destroyed: background threads may still end turns at exit
  return *turns;
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
  if (timeoutSeconds_ <= 0) {  // GRADAGG_TIMEOUT=0: no limit
    turns.changed.wait(lock, [&] { return turns.served == ticket_; });
    return;
  }
  // The limit is for each call ahead to end, not for the whole queue: it starts again whenever one does.
  const auto limit = std::chrono::duration<double>(timeoutSeconds_);
  while (turns.served != ticket_) {
    const uint64_t ahead = turns.served;
    if (!turns.changed.wait_for(lock, limit, [&] { return turns.served != ahead; }))
      throw TimeoutError("a device aggregation waited more than " + std::to_string(timeoutSeconds_) + " s (" +
                         "GRADAGG_TIMEOUT) for the call ahead of it, one of " + std::to_string(ticket_ - ahead) +
                         " earlier one(s) of this process's Aggregators, to end (" + RankAndHost() + ")");
  }
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
