#include "calibration/bench_sim.h"

#include <vector>

#include "gtest/gtest.h"
#include "sim/analytic_step_model.h"
#include "sim/base/parallel.h"

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

BenchCell Cell(int32_t c, int32_t n, int32_t in, int32_t out, double overhead_s = 0) {
  BenchCell cell;
  cell.max_concurrency = c;
  cell.num_prompts = n;
  cell.input_tokens = in;
  cell.output_tokens = out;
  cell.client_overhead_s = overhead_s;
  return cell;
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
  BenchCell cell = Cell(1, 1, 1000, 11, 0);
  auto r = SimulateBenchCell(Sched(false), Kv(), m, cell);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_NEAR(r->median_ttft_ms, 2.0 + 1.0, 1e-9);  // 2 ms + 1000 x 1 us
  EXPECT_NEAR(r->median_tpot_ms, 2.001, 1e-9);
  EXPECT_EQ(r->num_steps, 11);
  EXPECT_NEAR(r->output_throughput, 11 / (3e-3 + 10 * 2.001e-3), 1e-6);
}

TEST(BenchSimTest, ClosedLoopKeepsAtMostConcurrencyInFlight) {
  const AnalyticStepModel m = Model();
  BenchCell c1 = Cell(1, 8, 100, 50, 0);
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
  BenchCell cell = Cell(1, 1, 10, 2, 0.5);
  auto r = SimulateBenchCell(Sched(false), Kv(), m, cell);
  ASSERT_TRUE(r.ok());
  EXPECT_NEAR(r->median_ttft_ms, 500 + 2.01, 1e-6);
}

TEST(BenchSimTest, CellOverMaxModelLenIsInfeasibleNotAnError) {
  const AnalyticStepModel m = Model();
  BenchCell cell = Cell(1, 8, 4096, 128, 0);
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
  BenchCell cell = Cell(1, 1, 10, 5, 0);
  auto sync = SimulateBenchCell(Sched(false), Kv(), m, cell);
  auto async = SimulateBenchCell(Sched(true), Kv(), m, cell);
  ASSERT_TRUE(sync.ok() && async.ok());
  EXPECT_NEAR(sync->median_tpot_ms, 4.0, 1e-9);
  EXPECT_NEAR(async->median_tpot_ms, 3.0, 1e-9);
}

// Open loop far below capacity: no queueing, so the output throughput is the
// offered rate x output tokens, and the median TTFT is one prefill step.
TEST(BenchSimTest, UnderloadedOpenLoopFollowsTheRate) {
  const AnalyticStepModel m = Model();
  BenchCell cell = Cell(0, 400, 100, 10);
  cell.request_rate = 4;
  auto r = SimulateBenchCell(Sched(false), Kv(), m, cell);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_NEAR(r->output_throughput, 4 * 10, 4.0);
  EXPECT_NEAR(r->median_ttft_ms, 2.1, 0.05);
  EXPECT_NEAR(r->median_tpot_ms, 2.001, 0.01);
  // The average over the arrival draws is deterministic.
  auto again = SimulateBenchCell(Sched(false), Kv(), m, cell);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->median_ttft_ms, r->median_ttft_ms);
  EXPECT_EQ(again->output_throughput, r->output_throughput);
  // Offered load past capacity (at most 2,048 tokens per step of >= 2 ms:
  // ~5,000 requests/s of 110 tokens): the queue grows, TTFT with it, and
  // throughput stops following the rate.
  cell.request_rate = 20000;
  auto over = SimulateBenchCell(Sched(false), Kv(), m, cell);
  ASSERT_TRUE(over.ok());
  EXPECT_GT(over->median_ttft_ms, 10 * r->median_ttft_ms);
  EXPECT_LT(over->output_throughput, 0.5 * 20000 * 10);
}

// Per-request lengths are replayed in order: one stream, prompts of 100,
// 500 and 1,000 tokens take 2.1, 2.5 and 3.0 ms to their first token.
TEST(BenchSimTest, MeasuredLengthsAreReplayed) {
  const AnalyticStepModel m = Model();
  BenchCell cell = Cell(1, 3, 533, 2);
  cell.input_lens = {100, 500, 1000};
  cell.output_lens = {2, 2, 2};
  auto r = SimulateBenchCell(Sched(false), Kv(), m, cell);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_NEAR(r->median_ttft_ms, 2.5, 1e-9);
  EXPECT_NEAR(r->mean_ttft_ms, (2.1 + 2.5 + 3.0) / 3, 1e-9);
  // The longest request decides feasibility, and the reason says so.
  cell.input_lens[2] = 5000;
  auto too_long = SimulateBenchCell(Sched(false), Kv(), m, cell);
  ASSERT_TRUE(too_long.ok());
  EXPECT_TRUE(too_long->feasible);  // two of three still complete
}

// A request that streamed no token in the measured run loads the server
// (replayed as one token) but is in no metric: one stream, a 500-token
// prompt of one token (2.5 ms), then 1,000 in / 11 out (3.0 ms to its
// first token, then 10 decode steps of 2.001 ms).
TEST(BenchSimTest, UnmeasuredRequestsLoadTheServerButAreInNoMetric) {
  const AnalyticStepModel m = Model();
  BenchCell cell = Cell(1, 2, 750, 6);
  cell.input_lens = {500, 1000};
  cell.output_lens = {1, 11};
  auto all = SimulateBenchCell(Sched(false), Kv(), m, cell);
  cell.unmeasured = {0};
  auto some = SimulateBenchCell(Sched(false), Kv(), m, cell);
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_TRUE(some.ok()) << some.status();
  const double duration_s = (2.5 + 3.0 + 10 * 2.001) * 1e-3;
  EXPECT_NEAR(all->median_ttft_ms, (2.5 + 3.0) / 2, 1e-9);
  EXPECT_NEAR(some->median_ttft_ms, 3.0, 1e-9);
  EXPECT_NEAR(some->duration_s, duration_s, 1e-12);  // it still takes server time
  EXPECT_NEAR(all->output_throughput, 12 / duration_s, 1e-6);
  EXPECT_NEAR(some->output_throughput, 11 / duration_s, 1e-6);
  EXPECT_NEAR(some->median_tpot_ms, all->median_tpot_ms, 1e-12);
  // Only one-token requests, named by ascending in-range indexes, and not all.
  for (const std::vector<int32_t>& bad :
       std::vector<std::vector<int32_t>>{{1}, {2}, {-1}, {0, 0}}) {
    cell.unmeasured = bad;
    auto r = SimulateBenchCell(Sched(false), Kv(), m, cell);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("unmeasured"), std::string::npos);
  }
  cell.output_lens = {1, 1};
  cell.unmeasured = {0, 1};
  auto none = SimulateBenchCell(Sched(false), Kv(), m, cell);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("at least one must be measured"),
            std::string::npos);
}

TEST(BenchSimTest, InconsistentCellsAreErrorsNamingTheField) {
  const AnalyticStepModel m = Model();
  BenchCell cell = Cell(1, 3, 100, 2);
  cell.input_lens = {100, 100, 100};
  cell.output_lens = {2, 2};
  auto r = SimulateBenchCell(Sched(false), Kv(), m, cell);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("output_lens"), std::string::npos);
  cell.output_lens = {2, 0, 2};
  r = SimulateBenchCell(Sched(false), Kv(), m, cell);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("request 1"), std::string::npos);
  cell = Cell(0, 3, 100, 2);  // no concurrency limit needs an open loop
  r = SimulateBenchCell(Sched(false), Kv(), m, cell);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("max_concurrency"), std::string::npos);
  cell.request_rate = -1;
  r = SimulateBenchCell(Sched(false), Kv(), m, cell);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("request_rate"), std::string::npos);
}

// A sweep that reused one prompt seed: the earlier cells' prompts are the
// same vLLM random prompts, so they hit the prefix cache.
BenchCell ReusedSeedCell(std::vector<BenchCell::EarlierCell> earlier) {
  BenchCell cell = Cell(1, 4, 1000, 11, 0);
  cell.reused_prompt_seed = true;
  cell.earlier_cells = std::move(earlier);
  return cell;
}

SchedulerConfig CachingSched(bool caching) {
  SchedulerConfig s = Sched(false);
  s.enable_prefix_caching = caching;
  return s;
}

TEST(BenchSimTest, ReusedSeedShorterEarlierCellCachesThePromptPrefix) {
  const AnalyticStepModel m = Model();
  auto cold = SimulateBenchCell(CachingSched(true), Kv(), m, ReusedSeedCell({}));
  // Prompt i at 512 tokens is the first 32 blocks of prompt i at 1000.
  auto warm =
      SimulateBenchCell(CachingSched(true), Kv(), m, ReusedSeedCell({{4, 512, 11}}));
  ASSERT_TRUE(cold.ok() && warm.ok()) << cold.status() << warm.status();
  EXPECT_NEAR(cold->median_ttft_ms, 2.0 + 1.0, 1e-9);
  EXPECT_NEAR(warm->median_ttft_ms, 2.0 + 0.488, 1e-9);  // 1000 - 512 tokens computed
  EXPECT_NEAR(warm->median_tpot_ms, cold->median_tpot_ms, 1e-9);
}

// The other way round: prompt i at 512 tokens is a prefix of the 1,000-token
// prompt i an earlier cell sent, so all of it hits but the last block (a
// hit leaves at least one token to compute: 511 -> 496 cached, 16 computed).
TEST(BenchSimTest, ReusedSeedLongerEarlierCellCachesTheWholePrompt) {
  const AnalyticStepModel m = Model();
  BenchCell cell = Cell(1, 4, 512, 11, 0);
  cell.reused_prompt_seed = true;
  cell.earlier_cells = {{4, 1000, 11}};
  auto r = SimulateBenchCell(CachingSched(true), Kv(), m, cell);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_NEAR(r->median_ttft_ms, 2.0 + 0.016, 1e-9);
  EXPECT_NEAR(r->p99_ttft_ms, 2.0 + 0.016, 1e-9);
}

TEST(BenchSimTest, ReusedSeedHitsOnlyThePromptsEarlierCellsSent) {
  const AnalyticStepModel m = Model();
  // The earlier cell sent prompts 0 and 1 only: two of four hit (the whole
  // prompt but its last partial block), two run cold.
  auto r =
      SimulateBenchCell(CachingSched(true), Kv(), m, ReusedSeedCell({{2, 1000, 11}}));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_NEAR(r->p99_ttft_ms, 3.0, 1e-9);
  EXPECT_LT(r->mean_ttft_ms, 2.6);
  EXPECT_GT(r->mean_ttft_ms, 2.4);
}

TEST(BenchSimTest, ReusedSeedNeedsPrefixCachingToHit) {
  const AnalyticStepModel m = Model();
  auto off =
      SimulateBenchCell(CachingSched(false), Kv(), m, ReusedSeedCell({{4, 1000, 11}}));
  ASSERT_TRUE(off.ok()) << off.status();
  EXPECT_NEAR(off->median_ttft_ms, 3.0, 1e-9);
}

TEST(BenchSimTest, WarmKvCacheMemoGivesTheSameResultAsBuildingEachTime) {
  const AnalyticStepModel m = Model();
  WarmKvCacheMemo memo;
  const BenchCell cell = ReusedSeedCell({{4, 128, 11}, {4, 512, 11}, {2, 1000, 11}});
  auto plain = SimulateBenchCell(CachingSched(true), Kv(), m, cell);
  auto first = SimulateBenchCell(CachingSched(true), Kv(), m, cell, &memo);
  auto again = SimulateBenchCell(CachingSched(true), Kv(), m, cell, &memo);
  ASSERT_TRUE(plain.ok() && first.ok() && again.ok());
  for (const auto* r : {&*first, &*again}) {
    EXPECT_EQ(r->mean_ttft_ms, plain->mean_ttft_ms);
    EXPECT_EQ(r->p99_ttft_ms, plain->p99_ttft_ms);
    EXPECT_EQ(r->duration_s, plain->duration_s);
    EXPECT_EQ(r->num_steps, plain->num_steps);
  }
}

// The memo is shared by the held-out refits' threads (Predictor): cells
// that share a warm state and cells that do not, simulated on four threads
// at once, give what each gives alone. Under ThreadSanitizer
// (tools/tsan.sh) this is the check of the memo's locking and of the
// shared read-only KV state.
TEST(BenchSimTest, WarmKvCacheMemoSharedByThreadsGivesEachCellsOwnResult) {
  const AnalyticStepModel m = Model();
  const std::vector<BenchCell> cells = {ReusedSeedCell({{4, 512, 11}}),
                                        ReusedSeedCell({{2, 1000, 11}}),
                                        ReusedSeedCell({{4, 128, 11}, {4, 512, 11}})};
  std::vector<double> alone;
  for (const BenchCell& c : cells) {
    auto r = SimulateBenchCell(CachingSched(true), Kv(), m, c);
    ASSERT_TRUE(r.ok()) << r.status();
    alone.push_back(r->mean_ttft_ms);
  }
  WarmKvCacheMemo memo;
  constexpr int kTasks = 24;
  std::vector<double> shared(kTasks, -1.0);
  ParallelFor(kTasks, 4, [&](int t) {
    auto r =
        SimulateBenchCell(CachingSched(true), Kv(), m, cells[t % cells.size()], &memo);
    if (r.ok()) shared[t] = r->mean_ttft_ms;
  });
  for (int t = 0; t < kTasks; ++t) EXPECT_EQ(shared[t], alone[t % cells.size()]) << t;
}

TEST(BenchSimTest, ReusedSeedRejectsPerRequestLengthsAndStrayEarlierCells) {
  const AnalyticStepModel m = Model();
  BenchCell lens = ReusedSeedCell({});
  lens.input_lens = {1000, 1000, 1000, 1000};
  lens.output_lens = {11, 11, 11, 11};
  auto r = SimulateBenchCell(CachingSched(true), Kv(), m, lens);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("reused_prompt_seed"), std::string::npos);
  BenchCell stray = Cell(1, 4, 1000, 11, 0);
  stray.earlier_cells = {{4, 1000, 11}};
  r = SimulateBenchCell(CachingSched(true), Kv(), m, stray);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("earlier_cells"), std::string::npos);
  BenchCell bad = ReusedSeedCell({{0, 1000, 11}});
  r = SimulateBenchCell(CachingSched(true), Kv(), m, bad);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("earlier_cells[0]"), std::string::npos);
}

}  // namespace
}  // namespace servesim
