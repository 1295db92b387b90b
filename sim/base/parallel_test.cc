#include "sim/base/parallel.h"

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace servesim {
namespace {

TEST(ParallelForTest, EveryIndexRunsOnceAndWorkSpreadsOverThreads) {
  std::vector<int> runs(64, 0);
  std::mutex mu;
  std::set<std::thread::id> ids;
  ParallelFor(64, 4, [&](int i) {
    ++runs[i];  // slot i only
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    std::lock_guard<std::mutex> lock(mu);
    ids.insert(std::this_thread::get_id());
  });
  for (int i = 0; i < 64; ++i) EXPECT_EQ(runs[i], 1) << i;
  EXPECT_GT(ids.size(), 1u);
  EXPECT_LE(ids.size(), 4u);
}

TEST(ParallelForTest, OneJobRunsOnTheCallingThreadInOrder) {
  std::vector<int> order;
  const std::thread::id caller = std::this_thread::get_id();
  ParallelFor(5, 1, [&](int i) {
    EXPECT_EQ(std::this_thread::get_id(), caller);
    order.push_back(i);
  });
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4}));
  int calls = 0;
  ParallelFor(0, 8, [&](int) { ++calls; });
  EXPECT_EQ(calls, 0);
}

TEST(RunOnThreadsTest, CallersExceptionLeavesAfterTheOthersAreJoined) {
  std::atomic<int> finished{0};
  const std::thread::id caller = std::this_thread::get_id();
  EXPECT_THROW(RunOnThreads(3,
                            [&] {
                              if (std::this_thread::get_id() == caller) {
                                throw std::runtime_error("caller fails");
                              }
                              std::this_thread::sleep_for(std::chrono::milliseconds(20));
                              ++finished;
                            }),
               std::runtime_error);
  EXPECT_EQ(finished.load(), 2);  // both others ran to the end before the throw left
}

}  // namespace
}  // namespace servesim
