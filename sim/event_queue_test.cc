#include "sim/event_queue.h"

#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace servesim {
namespace {

TEST(EventQueueTest, PopsInTimeOrderAndEqualTimesInPushOrder) {
  EventQueue q;
  q.Push(30, 0, 1);
  q.Push(10, 0, 2);
  q.Push(30, 0, 3);
  q.Push(10, 0, 4);
  q.Push(20, 0, 5);
  std::vector<int> order;
  while (!q.empty()) order.push_back(q.Pop().a);
  EXPECT_EQ(order, (std::vector<int>{2, 4, 5, 1, 3}));
}

TEST(EventQueueTest, RandomInterleavedPushPopNeverGoesBackInTime) {
  EventQueue q;
  std::mt19937_64 rng(7);
  TimeNs now = 0;
  uint64_t last_seq_at_now = 0;
  int popped = 0;
  for (int i = 0; i < 20000; ++i) {
    if (rng() % 3 != 0 || q.empty()) {
      q.Push(now + static_cast<TimeNs>(rng() % 100), 0);
    } else {
      Event e = q.Pop();
      ASSERT_GE(e.time_ns, now);
      if (e.time_ns == now && popped > 0) {
        ASSERT_GT(e.seq, last_seq_at_now);
      }
      now = e.time_ns;
      last_seq_at_now = e.seq;
      ++popped;
    }
  }
  EXPECT_GT(popped, 1000);
}

}  // namespace
}  // namespace servesim
