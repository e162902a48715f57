// A count in memory that the ranks of a node share: one rank advances it, the others wait until it reaches a value.
// A waiter polls for a while, then sleeps on a futex until the count moves, so that ranks that outnumber the cores
// give their core to the rank they wait for instead of spinning its time slice away (sched_yield does not reliably).
#pragma once

#include <atomic>
#include <cstdint>

#include "mpi/deadline.h"

namespace gradagg {

class SharedCount {
 public:
  SharedCount() = default;
  SharedCount(const SharedCount&) = delete;
  SharedCount& operator=(const SharedCount&) = delete;

  // The new value, made visible with everything written before it (release), and every sleeper woken.
  void Advance(uint32_t value);
  // Waits until the count has reached `value` (counts wrap: it is compared as a serial number, so it may be at most
  // 2^31 behind), with acquire order: what was written before it reached `value` is visible after. Polls `polls`
  // times first. Returns false if the deadline passed first.
  bool WaitUntilReaches(uint32_t value, unsigned polls, const Deadline& deadline) const;

 private:
  bool Reached(uint32_t value) const {
    return static_cast<int32_t>(count_.load(std::memory_order_acquire) - value) >= 0;
  }

  std::atomic<uint32_t> count_{0};
  mutable std::atomic<uint32_t> sleepers_{0};
};

static_assert(std::atomic<uint32_t>::is_always_lock_free, "a shared count must be an address-free atomic");

}  // namespace gradagg
