#include "sim/scheduler_model.h"

#include <cstdint>
#include <iostream>

#include "gtest/gtest.h"

namespace servesim {
namespace {

// Scheduler over KvCache and the literal reference scheduler over the
// reference cache agree after every step, for each seed (each seed draws
// its own scheduler config and hybrid KV spec).
TEST(SchedulerModelTest, SchedulerMatchesTheReferenceOverRandomArrivalsAndSteps) {
  SchedulerModelStats total;
  // 16 seeds: each draws about half its settings on (async scheduling,
  // the full-ISL gate, prefix caching), so every path is reached.
  for (uint64_t seed = 1; seed <= 16; ++seed) {
    RandomChoices src(seed);
    SchedulerModelStats stats;
    const absl::Status s = RunSchedulerModel(src, 100'000, &stats);
    ASSERT_TRUE(s.ok()) << "seed " << seed << ": " << s;
    total.steps += stats.steps;
    total.added += stats.added;
    total.rejected += stats.rejected;
    total.preemptions += stats.preemptions;
    total.finished += stats.finished;
    total.prefix_hit_tokens += stats.prefix_hit_tokens;
    total.answer_hits += stats.answer_hits;
    total.full_isl_gate_stops += stats.full_isl_gate_stops;
    total.steps_with_finishing += stats.steps_with_finishing;
    total.in_flight_steps += stats.in_flight_steps;
  }
  // The runs reach the interesting paths (not a vacuous agreement).
  EXPECT_GT(total.steps, 100'000);
  EXPECT_GT(total.rejected, 100);
  EXPECT_GT(total.preemptions, 1'000);
  EXPECT_GT(total.finished, 10'000);
  EXPECT_GT(total.prefix_hit_tokens, 10'000);
  EXPECT_GT(total.answer_hits, 100);
  EXPECT_GT(total.full_isl_gate_stops, 1'000);
  EXPECT_GT(total.steps_with_finishing, 1'000);
  EXPECT_GT(total.in_flight_steps, 10'000);
  std::cout << "steps " << total.steps << " added " << total.added << " rejected "
            << total.rejected << " preemptions " << total.preemptions << " finished "
            << total.finished << " prefix-hit tokens " << total.prefix_hit_tokens
            << " answer hits " << total.answer_hits << " full-ISL gate stops "
            << total.full_isl_gate_stops << " steps with finishing requests "
            << total.steps_with_finishing << " steps with tokens in flight "
            << total.in_flight_steps << "\n";
}

}  // namespace
}  // namespace servesim
