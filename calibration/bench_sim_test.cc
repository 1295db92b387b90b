#include "calibration/bench_sim.h"

#include "gtest/gtest.h"
#include "sim/analytic_step_model.h"

namespace servesim {
namespace {

SchedulerConfig Sched(bool async) {
  SchedulerConfig s;
  s.max_num_seqs = 256;
  s.max_num_batched_tokens = 2048;
  s.max_model_len = 4096;
  s.async_scheduling = async;
  return s;
}

KvCacheSpec Kv() {
  KvCacheSpec kv;
  kv.num_blocks = 100000;
  kv.groups.push_back(KvGroupSpec{16, 0, 1});
  return kv;
}

AnalyticStepModel Model() {
  AnalyticStepParams p;
  p.host_base_ns = 0;
  p.device_base_ns = 2e6;       // 2 ms per step
  p.device_per_token_ns = 1e3;  // 1 us per token
  return AnalyticStepModel(p);
}

TEST(BenchSimTest, SingleRequestTtftIsItsPrefillStepAndTpotIsTheDecodeStep) {
  const AnalyticStepModel m = Model();
  BenchCell cell{.max_concurrency = 1,
                 .num_prompts = 1,
                 .input_tokens = 1000,
                 .output_tokens = 11,
                 .client_overhead_s = 0};
  auto r = SimulateBenchCell(Sched(false), Kv(), m, cell);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_NEAR(r->median_ttft_ms, 2.0 + 1.0, 1e-9);  // 2 ms + 1000 x 1 us
  EXPECT_NEAR(r->median_tpot_ms, 2.001, 1e-9);
  EXPECT_EQ(r->num_steps, 11);
  EXPECT_NEAR(r->output_throughput, 11 / (3e-3 + 10 * 2.001e-3), 1e-6);
}

TEST(BenchSimTest, ClosedLoopKeepsAtMostConcurrencyInFlight) {
  const AnalyticStepModel m = Model();
  BenchCell c1{.max_concurrency = 1,
               .num_prompts = 8,
               .input_tokens = 100,
               .output_tokens = 50,
               .client_overhead_s = 0};
  BenchCell c4 = c1;
  c4.max_concurrency = 4;
  auto r1 = SimulateBenchCell(Sched(false), Kv(), m, c1);
  auto r4 = SimulateBenchCell(Sched(false), Kv(), m, c4);
  ASSERT_TRUE(r1.ok() && r4.ok());
  // Serial: 8 x (prefill + 49 decode steps); four at a time: two waves.
  EXPECT_NEAR(r4->duration_s / r1->duration_s, 0.25, 0.01);
  EXPECT_GT(r4->output_throughput, 3.9 * r1->output_throughput);
}

TEST(BenchSimTest, ClientOverheadDelaysArrivalAndCountsInTtft) {
  const AnalyticStepModel m = Model();
  BenchCell cell{.max_concurrency = 1,
                 .num_prompts = 1,
                 .input_tokens = 10,
                 .output_tokens = 2,
                 .client_overhead_s = 0.5};
  auto r = SimulateBenchCell(Sched(false), Kv(), m, cell);
  ASSERT_TRUE(r.ok());
  EXPECT_NEAR(r->median_ttft_ms, 500 + 2.01, 1e-6);
}

TEST(BenchSimTest, CellOverMaxModelLenIsInfeasibleNotAnError) {
  const AnalyticStepModel m = Model();
  BenchCell cell{.max_concurrency = 1,
                 .num_prompts = 8,
                 .input_tokens = 4096,
                 .output_tokens = 128,
                 .client_overhead_s = 0};
  auto r = SimulateBenchCell(Sched(false), Kv(), m, cell);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->feasible);
  EXPECT_NE(r->infeasible_reason.find("max_model_len 4096"), std::string::npos);
}

TEST(BenchSimTest, AsyncStepTakesTheLongerOfHostAndDevice) {
  AnalyticStepParams p;
  p.host_base_ns = 1e6;
  p.device_base_ns = 3e6;
  const AnalyticStepModel m(p);
  BenchCell cell{.max_concurrency = 1,
                 .num_prompts = 1,
                 .input_tokens = 10,
                 .output_tokens = 5,
                 .client_overhead_s = 0};
  auto sync = SimulateBenchCell(Sched(false), Kv(), m, cell);
  auto async = SimulateBenchCell(Sched(true), Kv(), m, cell);
  ASSERT_TRUE(sync.ok() && async.ok());
  EXPECT_NEAR(sync->median_tpot_ms, 4.0, 1e-9);
  EXPECT_NEAR(async->median_tpot_ms, 3.0, 1e-9);
}

}  // namespace
}  // namespace servesim
