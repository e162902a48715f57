#include "intra_node/shared_count.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <ctime>

namespace gradagg {
namespace {

// Each sleep ends after this long at most, to look at the deadline.
constexpr long kSleepNanoseconds = 10'000'000;

long Futex(const std::atomic<uint32_t>& word, int operation, uint32_t value, const timespec* timeout) {
  // Not FUTEX_PRIVATE_FLAG: the word lives in memory that other processes map.
  return syscall(SYS_futex, reinterpret_cast<const uint32_t*>(&word), operation, value, timeout, nullptr, 0);
}

}  // namespace

void SharedCount::Advance(uint32_t value) {
  // Sequentially consistent, against a waiter's "sleepers++, then read the count": one of us sees the other.
  count_.store(value, std::memory_order_seq_cst);
  if (sleepers_.load(std::memory_order_seq_cst) > 0) Futex(count_, FUTEX_WAKE, INT_MAX, nullptr);
}

bool SharedCount::WaitUntilReaches(uint32_t value, unsigned polls, const Deadline& deadline) const {
  for (unsigned poll = 0; poll < polls; ++poll) {
    if (Reached(value)) return true;
  }
  const timespec slice{0, kSleepNanoseconds};
  while (!Reached(value)) {
    if (deadline.Passed()) return false;
    sleepers_.fetch_add(1, std::memory_order_seq_cst);
    const uint32_t seen = count_.load(std::memory_order_seq_cst);
    // FUTEX_WAIT sleeps only while the count still reads `seen`: an Advance in between returns it at once.
    if (static_cast<int32_t>(seen - value) < 0) Futex(count_, FUTEX_WAIT, seen, &slice);
    sleepers_.fetch_sub(1, std::memory_order_seq_cst);
  }
  return true;
}

}  // namespace gradagg
