#include "sim/metrics.h"

#include <cmath>
#include <optional>
#include <vector>

#include "gtest/gtest.h"

namespace servesim {
namespace {

TEST(MetricsTest, SummaryMatchesNumpyOnAHandExample) {
  // numpy: mean 4, median 3, std (ddof=0) sqrt(10), percentile 90 -> 7.6,
  // percentile 99 -> 9.76 (linear interpolation between 4 and 10).
  std::vector<double> v = {10, 2, 4, 1, 3};
  const LatencySummary s = Summarize(v);
  EXPECT_EQ(s.count, 5);
  EXPECT_DOUBLE_EQ(s.mean_ms, 4.0);
  EXPECT_DOUBLE_EQ(s.median_ms, 3.0);
  EXPECT_DOUBLE_EQ(s.std_ms, std::sqrt(10.0));
  EXPECT_DOUBLE_EQ(s.p90_ms, 7.6);
  EXPECT_DOUBLE_EQ(s.p99_ms, 9.76);
}

TEST(MetricsTest, MedianOfAnEvenCountIsTheMidpoint) {
  std::vector<double> v = {1, 2, 3, 4};
  EXPECT_DOUBLE_EQ(Summarize(v).median_ms, 2.5);
  std::vector<double> one = {7};
  const LatencySummary s = Summarize(one);
  EXPECT_DOUBLE_EQ(s.p99_ms, 7);
  EXPECT_DOUBLE_EQ(s.std_ms, 0);
}

TEST(MetricsTest, EmptyListsGiveZeros) {
  std::vector<double> v;
  const LatencySummary s = Summarize(v);
  EXPECT_EQ(s.count, 0);
  EXPECT_EQ(s.mean_ms, 0);
}

// A replayed bench request that streamed no token (unmeasured) loads the
// server and spans the duration, but is in no other metric: not completed,
// not in TTFT / E2EL / tokens / goodput / peak concurrency.
TEST(MetricsTest, UnmeasuredRequestIsInNoMetricButTheDuration) {
  std::vector<RequestRecord> recs(2);
  recs[0] = RequestRecord{
      0, 100,       4,         0,         0,          0,          RejectReason::kNone,
      0, 1'000'000, 1'000'000, 1'000'000, 11'000'000, 41'000'000, false};
  // One token at 2 ms .. 61 ms: the run ends with it.
  recs[1] = RequestRecord{
      1, 50,        1,         0,         0,          0,          RejectReason::kNone,
      0, 2'000'000, 2'000'000, 2'000'000, 61'000'000, 61'000'000, true};
  const RunResult r = ComputeRunResult(recs, ItlAccumulator(), StepStats(), 0);
  EXPECT_EQ(r.num_prompts, 2);
  EXPECT_EQ(r.completed, 1);
  EXPECT_EQ(r.unmeasured, 1);
  EXPECT_EQ(r.failed, 0);
  EXPECT_EQ(r.ttft.count, 1);
  EXPECT_DOUBLE_EQ(r.ttft.mean_ms, 10.0);
  EXPECT_EQ(r.e2el.count, 1);
  EXPECT_EQ(r.total_input_tokens, 100);
  EXPECT_EQ(r.total_output_tokens, 4);
  EXPECT_DOUBLE_EQ(r.duration_s, 0.060);  // 1 ms .. 61 ms
  EXPECT_EQ(r.max_concurrent_requests, 1);
  GoodputSlos slos;
  slos.ttft_ms = 1000;
  EXPECT_EQ(GoodRequests(recs, slos), 1);
}

TEST(MetricsTest, TpotExcludesSingleTokenRequestsAndDurationSpansFirstSendToLastFinish) {
  std::vector<RequestRecord> recs(3);
  // Request 0: sent at 1 ms, first token at 11 ms, done at 41 ms, 4 tokens.
  recs[0] = RequestRecord{
      0, 100,       4,         0,         0,          0,          RejectReason::kNone,
      0, 1'000'000, 1'000'000, 1'000'000, 11'000'000, 41'000'000, false};
  // Request 1: one output token: in TTFT, not in TPOT.
  recs[1] = RequestRecord{
      1, 50,        1,         0,         0,         0,         RejectReason::kNone,
      0, 2'000'000, 2'000'000, 2'000'000, 7'000'000, 7'000'000, false};
  // Request 2: rejected.
  recs[2] = RequestRecord{
      2, 9999,      10,        0,  0,  0,         RejectReason::kExceedsMaxModelLen,
      0, 3'000'000, 3'000'000, -1, -1, 3'000'000, false};
  ItlAccumulator itl;
  itl.Add(10'000'000);
  itl.Add(10'000'000);
  itl.Add(10'000'000);
  StepStats steps;
  const RunResult r = ComputeRunResult(recs, itl, steps, 0);
  EXPECT_EQ(r.completed, 2);
  EXPECT_EQ(r.failed, 1);
  EXPECT_EQ(r.rejected_by_reason[static_cast<int>(RejectReason::kExceedsMaxModelLen)], 1);
  EXPECT_EQ(r.ttft.count, 2);
  EXPECT_DOUBLE_EQ(r.ttft.mean_ms, 7.5);  // (10 + 5) / 2
  EXPECT_EQ(r.tpot.count, 1);
  EXPECT_DOUBLE_EQ(r.tpot.mean_ms, 10.0);  // (40 - 10) / 3
  EXPECT_DOUBLE_EQ(r.e2el.mean_ms, 22.5);  // (40 + 5) / 2
  EXPECT_DOUBLE_EQ(r.duration_s, 0.040);   // 1 ms .. 41 ms
  // Both meant to go at 0, sent at 1 and 2 ms (a --max-concurrency wait).
  EXPECT_EQ(r.client_wait.count, 2);
  EXPECT_DOUBLE_EQ(r.client_wait.mean_ms, 1.5);
  EXPECT_DOUBLE_EQ(r.output_throughput, 5 / 0.040);
  EXPECT_DOUBLE_EQ(r.total_token_throughput, 155 / 0.040);
  EXPECT_DOUBLE_EQ(r.itl.mean_ms, 10.0);
}

// Hand example of vLLM's peak metrics and goodput (calculate_metrics in
// vllm/benchmarks/serve.py). Times in ms.
std::vector<RequestRecord> PeakExample() {
  auto ms = [](int64_t v) { return v * 1'000'000; };
  std::vector<RequestRecord> recs(4);
  // Rejected, and sent first: not the buckets' origin.
  recs[0] = RequestRecord{
      0,       10,      1,       0,  0,  0,       RejectReason::kExceedsMaxModelLen,
      ms(100), ms(100), ms(100), -1, -1, ms(100), false};
  // Sent at 500, tokens at 900, 1500, 2200.
  recs[1] = RequestRecord{
      1,       10,      3,       0,       0,       0,        RejectReason::kNone,
      ms(500), ms(500), ms(500), ms(600), ms(900), ms(2200), false};
  // Sent at 2000, tokens at 2300, 2600.
  recs[2] = RequestRecord{
      2,        10,       2,        0,        0,        0,        RejectReason::kNone,
      ms(2000), ms(2000), ms(2000), ms(2100), ms(2300), ms(2600), false};
  // Sent at 3000, its one token at 3100.
  recs[3] = RequestRecord{
      3,        10,       1,        0,        0,        0,        RejectReason::kNone,
      ms(3000), ms(3000), ms(3000), ms(3050), ms(3100), ms(3100), false};
  return recs;
}

TEST(MetricsTest,
     PeakTokensAndConcurrencyCountOneSecondBucketsFromTheFirstSuccessfulSend) {
  const std::vector<RequestRecord> recs = PeakExample();
  OutputTokenBuckets tokens;
  tokens.SetOrigin(500'000'000);
  for (int64_t t_ms : {900, 1500, 2200, 2300, 2600, 3100})
    tokens.AddToken(t_ms * 1'000'000);
  // Buckets from 500 ms: [500, 1500) 1 token, [1500, 2500) 3, [2500, 3500) 2.
  EXPECT_EQ(tokens.CountAt(0), 1);
  EXPECT_EQ(tokens.CountAt(1), 3);
  EXPECT_EQ(tokens.CountAt(2), 2);
  EXPECT_EQ(tokens.CountAt(3), 0);
  EXPECT_EQ(tokens.MaxCount(), 3);
  const RunResult r = ComputeRunResult(recs, ItlAccumulator(), StepStats(), 0, tokens);
  EXPECT_DOUBLE_EQ(r.max_output_tokens_per_s, 3);
  // Request 1 is active in buckets 0-1, request 2 in 1-2, request 3 in 2.
  EXPECT_EQ(r.max_concurrent_requests, 2);
}

// Buckets are kept per bucket that holds a token, not per simulated second:
// three tokens a billion seconds apart (a request rate of 1e-9 ran the
// machine out of memory), and a token out of time order counts in its
// bucket.
TEST(MetricsTest, TokenBucketsAreSparseAndTakeTokensOutOfOrder) {
  OutputTokenBuckets tokens;
  tokens.SetOrigin(0);
  constexpr TimeNs kGiga = 1'000'000'000'000'000'000;  // 1e9 s in ns
  tokens.AddToken(5);
  tokens.AddToken(kGiga);
  tokens.AddToken(kGiga + 7);
  tokens.AddToken(2 * kGiga);
  tokens.AddToken(9);  // back in bucket 0
  EXPECT_EQ(tokens.CountAt(0), 2);
  EXPECT_EQ(tokens.CountAt(kGiga / OutputTokenBuckets::kBucketNs), 2);
  EXPECT_EQ(tokens.CountAt(2 * kGiga / OutputTokenBuckets::kBucketNs), 1);
  EXPECT_EQ(tokens.MaxCount(), 2);
}

TEST(MetricsTest, GoodRequestsMeetEverySloGivenAndOneTokenRequestsHaveZeroTpot) {
  const std::vector<RequestRecord> recs = PeakExample();
  // TTFT 400 / 300 / 100; TPOT 650 / 300 / 0; E2EL 1700 / 600 / 100.
  // SLOs as {ttft_ms, tpot_ms, e2el_ms}, kNone where not given.
  constexpr std::nullopt_t kNone = std::nullopt;
  EXPECT_EQ(GoodRequests(recs, GoodputSlos{}), 0);
  EXPECT_EQ(GoodRequests(recs, GoodputSlos{400, kNone, kNone}), 3);  // 400 <= 400
  EXPECT_EQ(GoodRequests(recs, GoodputSlos{399.9, kNone, kNone}), 2);
  EXPECT_EQ(GoodRequests(recs, GoodputSlos{kNone, 0, kNone}), 1);
  EXPECT_EQ(GoodRequests(recs, GoodputSlos{kNone, 500, kNone}), 2);
  EXPECT_EQ(GoodRequests(recs, GoodputSlos{kNone, kNone, 700}), 2);
  EXPECT_EQ(GoodRequests(recs, GoodputSlos{350, 700, kNone}), 2);
  EXPECT_EQ(GoodRequests(recs, GoodputSlos{350, kNone, 500}), 1);
}

TEST(MetricsTest, ItlSwitchesToAHistogramPastTheCapAndSaysSo) {
  ItlAccumulator exact(1'000'000), capped(100);
  for (int i = 1; i <= 1000; ++i) {
    exact.Add(TimeNs{i} * 1'000'000);
    capped.Add(TimeNs{i} * 1'000'000);
  }
  const LatencySummary e = exact.Summarize();
  const LatencySummary c = capped.Summarize();
  EXPECT_TRUE(e.exact);
  EXPECT_FALSE(c.exact);
  EXPECT_EQ(c.count, 1000);
  EXPECT_NEAR(c.mean_ms, e.mean_ms, 1e-9 * e.mean_ms);
  EXPECT_NEAR(c.std_ms, e.std_ms, 1e-6 * e.std_ms);
  EXPECT_NEAR(c.median_ms, e.median_ms, 1e-3 * e.median_ms);
  EXPECT_NEAR(c.p99_ms, e.p99_ms, 1e-3 * e.p99_ms);
}

TEST(MetricsTest, RunLengthItlEqualsSummaryOfTheFlatList) {
  // Gaps with long repeats (a batch decoding together) and scattered values,
  // in no order: the run-length accumulator must give numpy's figures.
  std::vector<double> flat_ms;
  ItlAccumulator itl;
  uint64_t x = 12345;
  for (int i = 0; i < 20'000; ++i) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    const int repeat = static_cast<int>((x >> 33) % 40) + 1;
    const TimeNs gap = 1'000'000 + static_cast<TimeNs>((x >> 20) % 5'000'000);
    for (int k = 0; k < repeat; ++k) {
      itl.Add(gap);
      flat_ms.push_back(static_cast<double>(gap) / 1e6);
    }
  }
  const LatencySummary want = Summarize(flat_ms);
  const LatencySummary got = itl.Summarize();
  EXPECT_TRUE(got.exact);
  EXPECT_EQ(got.count, want.count);
  EXPECT_EQ(got.median_ms, want.median_ms);
  EXPECT_EQ(got.p90_ms, want.p90_ms);
  EXPECT_EQ(got.p99_ms, want.p99_ms);
  EXPECT_NEAR(got.mean_ms, want.mean_ms, 1e-12 * want.mean_ms);
  EXPECT_NEAR(got.std_ms, want.std_ms, 1e-9 * want.std_ms);
}

TEST(MetricsTest, StepHistogramSummaryUsesLinearInterpolation) {
  std::vector<int64_t> hist = {0, 2, 0, 2};  // values 1, 1, 3, 3
  const auto s = StepStats::HistSummary(hist);
  EXPECT_DOUBLE_EQ(s[0], 2.0);
  EXPECT_DOUBLE_EQ(s[1], 2.0);
  EXPECT_DOUBLE_EQ(s[3], 3.0);
}

}  // namespace
}  // namespace servesim
