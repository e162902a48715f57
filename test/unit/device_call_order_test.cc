// The process's device call turns: in issue order, one at a time, whatever order the calls end in, and a wait that
// gives up with a message instead of hanging.
#include "aggregator/device_call_order.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include "gradagg/errors.h"

namespace gradagg {
namespace {

TEST(DeviceCallTurn, CallsRunInIssueOrderWhateverThreadStartsFirst) {
  // Issued 0..5 on this thread, started by threads in the reverse order: each may run only after the ones before.
  std::vector<std::shared_ptr<DeviceCallTurn>> turns;
  for (int i = 0; i < 6; ++i) turns.push_back(DeviceCallTurn::Issue(10.0));
  std::mutex mutex;
  std::vector<int> ran;
  std::atomic<int> running{0};
  std::atomic<bool> overlapped{false};
  std::vector<std::thread> threads;
  for (int i = 5; i >= 0; --i) {
    threads.emplace_back([&, i] {
      turns[i]->Wait();
      if (running.fetch_add(1) != 0) overlapped = true;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      {
        std::lock_guard<std::mutex> lock(mutex);
        ran.push_back(i);
      }
      running.fetch_sub(1);
      turns[i]->End();
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(ran, (std::vector<int>{0, 1, 2, 3, 4, 5}));
  EXPECT_FALSE(overlapped);
}

TEST(DeviceCallTurn, ATurnThatNeverRunsStillLetsTheNextOnesGo) {
  auto first = DeviceCallTurn::Issue(10.0);
  auto second = DeviceCallTurn::Issue(10.0);
  auto third = DeviceCallTurn::Issue(10.0);
  second.reset();  // dropped before it ran (an Aggregator destroyed with the call unstarted): it ends, out of order
  first->Wait();
  first->End();
  first->End();  // idempotent: the third turn is not skipped ahead of anything
  third->Wait();  // returns at once: the first ended, the second never ran
  third->End();
}

TEST(DeviceCallTurn, AWaitGivesUpAfterItsTimeoutNamingTheCallsBeforeIt) {
  auto blocking = DeviceCallTurn::Issue(10.0);
  blocking->Wait();
  auto waiting = DeviceCallTurn::Issue(0.05);
  try {
    waiting->Wait();
    FAIL() << "the wait should have timed out";
  } catch (const TimeoutError& error) {
    EXPECT_NE(std::string(error.what()).find("one of 1 earlier one(s)"), std::string::npos) << error.what();
  }
  blocking->End();
  waiting->Wait();  // its turn now
  waiting->End();
}

TEST(DeviceCallTurn, TheLimitIsForTheCallAheadNotForTheWholeQueue) {
  // Two calls ahead end 60 ms apart; the third waits 120 ms in all with a 100 ms limit, and passes: each call ahead
  // ended within it. A zero limit waits as long as it takes.
  auto first = DeviceCallTurn::Issue(10.0);
  auto second = DeviceCallTurn::Issue(10.0);
  auto third = DeviceCallTurn::Issue(0.1);
  auto fourth = DeviceCallTurn::Issue(0.0);
  first->Wait();
  std::thread ender([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(60));
    first->End();
    second->Wait();
    std::this_thread::sleep_for(std::chrono::milliseconds(60));
    second->End();
  });
  EXPECT_NO_THROW(third->Wait());
  ender.join();
  std::thread later([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
    third->End();
  });
  EXPECT_NO_THROW(fourth->Wait());
  later.join();
  fourth->End();
}

}  // namespace
}  // namespace gradagg
