#include "experiments/capacity/plan.h"

#include <cmath>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace servesim {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::Not;

const std::vector<std::string> kNames = {"output_throughput", "total_token_throughput",
                                         "p99_ttft_ms", "median_ttft_ms", "p99_tpot_ms"};

TEST(ParseSloTest, ParsesTermsUnitsAndAliases) {
  auto slo = ParseSlo(
      "ttft_p99<=0.5s, tpot_p99<50ms,ttft_p50<=200ms,output_throughput>=100", kNames);
  ASSERT_TRUE(slo.ok()) << slo.status();
  ASSERT_EQ(slo->size(), 4u);
  EXPECT_EQ((*slo)[0].metric, "p99_ttft_ms");
  EXPECT_EQ((*slo)[0].threshold, 500);
  EXPECT_EQ((*slo)[0].op, SloTerm::Op::kLe);
  EXPECT_EQ((*slo)[1].metric, "p99_tpot_ms");
  EXPECT_EQ((*slo)[1].op, SloTerm::Op::kLt);
  EXPECT_EQ((*slo)[2].metric, "median_ttft_ms");
  EXPECT_EQ((*slo)[2].threshold, 200);
  EXPECT_EQ((*slo)[3].metric, "output_throughput");
  EXPECT_EQ((*slo)[3].op, SloTerm::Op::kGe);
}

TEST(ParseSloTest, ATimeWithoutUnitIsAnError) {
  auto slo = ParseSlo("ttft_p99<=1", kNames);
  EXPECT_EQ(slo.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(slo.status().message(), HasSubstr("has no unit"));
  EXPECT_THAT(slo.status().message(), HasSubstr("1ms or 1s"));
  // Throughputs have no time unit.
  EXPECT_TRUE(ParseSlo("output_throughput>=100", kNames).ok());
}

TEST(ParseSloTest, BoundaryValueMeetsOnlyInclusiveTerms) {
  auto slo = ParseSlo("ttft_p99<=500ms,tpot_p99<50ms", kNames);
  ASSERT_TRUE(slo.ok());
  EXPECT_TRUE((*slo)[0].Meets(500));
  EXPECT_FALSE((*slo)[0].Meets(500.0001));
  EXPECT_FALSE((*slo)[1].Meets(50));
  EXPECT_FALSE((*slo)[0].Meets(std::nan("")));
}

TEST(ParseSloTest, UnknownMetricListsTheAllowedNames) {
  auto slo = ParseSlo("ttfb_p99<=500ms", kNames);
  EXPECT_EQ(slo.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(slo.status().message(), HasSubstr("ttfb_p99"));
  EXPECT_THAT(slo.status().message(), HasSubstr("p99_ttft_ms"));
}

TEST(ParseSloTest, EmptyDuplicateOrNegativeTermsAreErrors) {
  EXPECT_THAT(ParseSlo("ttft_p99<=1s,", kNames).status().message(),
              HasSubstr("empty term"));
  EXPECT_THAT(ParseSlo("ttft_p99<=1s,ttft_p99<=2s", kNames).status().message(),
              HasSubstr("bounded twice"));
  EXPECT_THAT(ParseSlo("ttft_p99<=-1s", kNames).status().message(),
              HasSubstr("negative"));
  // A lower and an upper bound on one metric are two different terms.
  EXPECT_TRUE(ParseSlo("output_throughput>=10,output_throughput<=100", kNames).ok());
}

TEST(ParseSloTest, BadThresholdOrOperatorIsAnError) {
  EXPECT_THAT(ParseSlo("ttft_p99<=fast", kNames).status().message(),
              HasSubstr("'fast' is not a finite number"));
  EXPECT_FALSE(ParseSlo("ttft_p99=500", kNames).ok());
  EXPECT_FALSE(ParseSlo("", kNames).ok());
}

// A fake fleet: each device serves `capacity` req/s (a: 10, b: 3.2); TTFT p99 = 100 ms /
// (1 - utilisation), unbounded past saturation. "huge" does not fit.
PointRunner QueueRunner(double rate) {
  PointRunner r;
  r.metric_names = kNames;
  r.run =
      [rate](const proto::ExperimentConfig& c) -> absl::StatusOr<std::vector<double>> {
    double cap = 0;
    for (const auto& rep : c.fleet().replicas()) {
      const std::string& d = rep.server().device();
      if (d == "huge")
        return absl::FailedPreconditionError("model does not fit in 16 GiB");
      cap += rep.count() * (d == "a" ? 10.0 : d == "b" ? 3.2 : 1.0);
    }
    const double u = rate / cap;
    double ttft = u < 1 ? 100.0 / (1 - u) : 1e9;
    if (c.client().max_concurrency() == 1) ttft = 100;  // each request alone
    return std::vector<double>{rate * 100, rate * 1100, ttft, ttft / 2, 20};
  };
  return r;
}

PlanOptions Options(bool mixed) {
  PlanOptions o;
  o.base.mutable_server()->set_model("m");
  auto dev = [](const std::string& name, double price) {
    PlanDevice d;
    d.device = name;
    d.offer.device = name;
    d.offer.kind = "on-demand";
    d.offer.usd_per_hour = price;
    return d;
  };
  o.devices = {dev("a", 1.0), dev("b", 0.35), dev("huge", 0.1)};
  o.slo = *ParseSlo("ttft_p99<=450ms", kNames);
  o.max_replicas = 8;
  o.mixed_pairs = mixed;
  return o;
}

TEST(RunPlanTest, ChoosesTheSmallestFleetAndOneFewerMisses) {
  auto r = RunPlan(Options(false), QueueRunner(12));
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->groups.size(), 3u);
  // a: capacity 10 each; 12 req/s within 450 ms needs u <= 0.78 -> 2 replicas.
  const PlanGroup& a = r->groups[0];
  ASSERT_GE(a.chosen, 0);
  EXPECT_EQ(r->candidates[a.chosen].label, "2 x a");
  EXPECT_TRUE(r->candidates[a.chosen].met);
  ASSERT_EQ(a.one_fewer.size(), 1u);
  EXPECT_EQ(r->candidates[a.one_fewer[0]].label, "1 x a");
  EXPECT_FALSE(r->candidates[a.one_fewer[0]].met);
  // b: capacity 3.2 each -> 5 replicas (u = 0.75; 4 give u = 0.94).
  const PlanGroup& b = r->groups[1];
  EXPECT_EQ(r->candidates[b.chosen].label, "5 x b");
  EXPECT_EQ(r->candidates[b.one_fewer[0]].label, "4 x b");
  EXPECT_EQ(b.candidates.size(), 5u);  // 1..5 tried, in order
  // Cheapest: 5 x b at $1.75/h beats 2 x a at $2/h.
  EXPECT_EQ(r->best_group, 1);
}

TEST(RunPlanTest, DeviceWhereTheModelDoesNotFitIsListedWithTheReason) {
  auto r = RunPlan(Options(false), QueueRunner(12));
  ASSERT_TRUE(r.ok());
  const PlanGroup& h = r->groups[2];
  EXPECT_EQ(h.chosen, -1);
  EXPECT_THAT(h.reason, HasSubstr("model does not fit in 16 GiB"));
  EXPECT_EQ(h.candidates.size(), 1u);  // more replicas do not help a fit
  EXPECT_THAT(FormatPlanText(Options(false), *r), HasSubstr("huge: none (cannot serve"));
}

// A runner's ResourceExhausted (RunExperiment: a replica does not fit its
// device) marks the candidate; the group's "fit" is null in the JSON until
// the caller fills it, then carries the memory planner's answers.
TEST(RunPlanTest, DoesNotFitIsMarkedAndTheFitHintReachesTheJson) {
  PointRunner runner = QueueRunner(12);
  const auto inner = runner.run;
  runner.run =
      [inner](const proto::ExperimentConfig& c) -> absl::StatusOr<std::vector<double>> {
    if (c.fleet().replicas(0).server().device() == "huge") {
      return absl::ResourceExhaustedError("m does not fit on huge");
    }
    return inner(c);
  };
  PlanOptions o = Options(false);
  auto r = RunPlan(o, runner);
  ASSERT_TRUE(r.ok()) << r.status();
  PlanGroup& h = r->groups[2];
  ASSERT_FALSE(h.candidates.empty());
  EXPECT_TRUE(r->candidates[h.candidates[0]].does_not_fit);
  EXPECT_FALSE(r->candidates[r->groups[0].candidates[0]].does_not_fit);
  EXPECT_FALSE(h.fit.known);
  EXPECT_THAT(FormatPlanJson(o, *r), HasSubstr("\"fit\": null"));
  h.fit.known = true;
  h.fit.largest_max_model_len = 1150;
  h.fit.smallest_tensor_parallel_size = 4;
  h.fit.quantizations = {"w4a16"};
  const std::string json = FormatPlanJson(o, *r);
  EXPECT_THAT(json, HasSubstr("\"largest_fitting_max_model_len\": 1150"));
  EXPECT_THAT(json, HasSubstr("\"smallest_fitting_tensor_parallel_size\": 4"));
  EXPECT_THAT(json,
              HasSubstr("\"quantizations_that_fit\": [\n          \"w4a16\"\n        ]"));
}

// One request alone takes 100 ms to its first token: a 80 ms p99 TTFT is
// unattainable at any size, said so after one candidate (it used to try
// every size and say "none up to 8 replicas").
TEST(RunPlanTest, UnattainableSloIsReportedWithTheSingleRequestFloor) {
  PlanOptions o = Options(false);
  o.slo = *ParseSlo("ttft_p99<=80ms", kNames);
  auto r = RunPlan(o, QueueRunner(12));
  ASSERT_TRUE(r.ok()) << r.status();
  for (int g : {0, 1}) {
    EXPECT_EQ(r->groups[g].chosen, -1);
    EXPECT_EQ(r->groups[g].candidates.size(), 1u);
  }
  EXPECT_EQ(r->groups[0].reason,
            "unattainable on a: single-request p99_ttft_ms 100 > 80 (each request alone "
            "on an idle replica; no fleet size beats it)");
  EXPECT_THAT(FormatPlanText(o, *r), HasSubstr("b: none (unattainable on b"));
}

// A fleet that serves 10 of 12 offered req/s has a cheap-looking $/1M only
// because it drops throughput: marked.
TEST(RunPlanTest, SaturatedRowsAreMarked) {
  std::vector<std::string> names = kNames;
  names.emplace_back("request_throughput");
  PointRunner runner;
  runner.metric_names = names;
  runner.run =
      [](const proto::ExperimentConfig& c) -> absl::StatusOr<std::vector<double>> {
    double cap = 0;
    for (const auto& rep : c.fleet().replicas()) cap += rep.count() * 10.0;
    const double served = std::min(12.0, cap);
    if (c.client().max_concurrency() == 1) cap = 1e9;  // each request alone: fast
    return std::vector<double>{
        served * 100, served * 1100, cap > 12 ? 300.0 : 5000.0, 100, 20, served};
  };
  PlanOptions o = Options(false);
  o.devices.resize(1);  // a only
  o.base.mutable_client()->set_request_rate(12);
  auto r = RunPlan(o, runner);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->candidates.size(), 2u);
  EXPECT_TRUE(r->candidates[0].saturated);
  EXPECT_EQ(r->candidates[0].served_requests_per_s, 10);
  EXPECT_FALSE(r->candidates[1].saturated);
  EXPECT_THAT(FormatPlanText(o, *r),
              HasSubstr("[saturated: serves 10 of 12 req/s; $/1M counts only what it "
                        "serves]"));
  EXPECT_THAT(FormatPlanJson(o, *r), HasSubstr("\"saturated\": true"));
}

// Plans device a alone for 120 requests at 12 req/s with a runner that
// reports kNames + request_throughput + p99_queueing_ms: `one` for one
// replica, `more` for two or more.
absl::StatusOr<PlanResult> PlanQueueCase(std::vector<double> one,
                                         std::vector<double> more, PlanOptions* options) {
  std::vector<std::string> names = kNames;
  names.emplace_back("request_throughput");
  names.emplace_back("p99_queueing_ms");
  PointRunner runner;
  runner.metric_names = names;
  runner.run =
      [one,
       more](const proto::ExperimentConfig& c) -> absl::StatusOr<std::vector<double>> {
    int replicas = 0;
    for (const auto& rep : c.fleet().replicas()) replicas += rep.count();
    if (c.client().max_concurrency() == 1)
      return std::vector<double>{100, 1100, 100, 50, 20, 12, 0};
    return replicas < 2 ? one : more;
  };
  *options = Options(false);
  options->devices.resize(1);  // a only
  options->base.mutable_client()->set_request_rate(12);
  options->base.mutable_client()->set_num_prompts(120);
  return RunPlan(*options, runner);
}

// request_throughput counts the drain: 120 requests at 12 req/s arrive in
// 10 s, and a fleet that keeps up (p99 queueing 0.2 s) but whose last
// answer ends 6 s later reads 7.5 req/s. It is not saturated; one whose
// queue grows (p99 queueing 3 s > 10 s / 9) is.
TEST(RunPlanTest, ADrainTailIsNotSaturationAGrowingQueueIs) {
  PlanOptions o;
  // One replica: its queue grows and p99 TTFT misses; two keep up.
  auto r = PlanQueueCase({750, 8250, 5000, 100, 20, 7.5, 3000},
                         {750, 8250, 300, 100, 20, 7.5, 200}, &o);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_GE(r->candidates.size(), 2u);
  EXPECT_TRUE(r->candidates[0].saturated);
  EXPECT_FALSE(r->candidates[1].saturated);
  EXPECT_EQ(r->candidates[r->groups[0].chosen].label, "2 x a");
}

// A replayed trace leaves num_prompts at 0 (the whole trace): the arrival
// span comes from the requests the run sent (completed + failed), not
// from the config, where 0 read as an unknown queue and every fleet whose
// drain tail lowered its rate was 'saturated' (plan exited 3 with none met).
TEST(RunPlanTest, AWholeTraceCountsTheRequestsItSent) {
  std::vector<std::string> names = kNames;
  for (const char* m : {"completed", "failed", "request_throughput", "p99_queueing_ms"})
    names.emplace_back(m);
  PointRunner runner;
  runner.metric_names = names;
  runner.run = [](const proto::ExperimentConfig&) -> absl::StatusOr<std::vector<double>> {
    // 120 requests at 12 req/s (10 s of arrivals), read as 7.5 req/s with
    // the drain, p99 queueing 0.2 s: it keeps up.
    return std::vector<double>{750, 8250, 300, 100, 20, 120, 0, 7.5, 200};
  };
  PlanOptions o = Options(false);
  o.devices.resize(1);
  o.base.mutable_client()->set_trace("requests.jsonl");
  o.base.mutable_client()->set_request_rate(12);
  o.base.mutable_client()->clear_num_prompts();
  auto r = RunPlan(o, runner);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_FALSE(r->candidates.empty());
  EXPECT_FALSE(r->candidates[0].saturated);
  EXPECT_TRUE(r->candidates[0].met);
}

// A saturated fleet whose short run drained in time (p99 TTFT within the
// SLO) was chosen as meeting it: at the offered rate its queue grows
// without bound, so it misses, and the search goes on to two replicas.
TEST(RunPlanTest, ASaturatedFleetNeverMeetsTheSlo) {
  PlanOptions o;
  // One replica: p99 TTFT 300 ms (meets) but serves 7.5 of 12 req/s with a
  // growing queue; two keep up.
  auto r = PlanQueueCase({750, 8250, 300, 100, 20, 7.5, 3000},
                         {750, 8250, 300, 100, 20, 11.9, 200}, &o);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_GE(r->candidates.size(), 2u);
  EXPECT_TRUE(r->candidates[0].saturated);
  EXPECT_FALSE(r->candidates[0].met);
  EXPECT_THAT(r->candidates[0].missed,
              Contains(HasSubstr("saturated: serves 7.5 of 12 req/s offered")));
  EXPECT_TRUE(r->candidates[1].met);
  EXPECT_EQ(r->candidates[r->groups[0].chosen].label, "2 x a");
}

// A client whose --max-concurrency holds requests back queues them where
// neither vLLM's latencies nor the server's queueing see them: every fleet
// keeps p99 TTFT at 300 ms with an empty server queue, but serves 1.5 of
// 12 req/s while requests wait 60 s at the client. None meets the SLO, and
// the group says why.
TEST(RunPlanTest, AClientThatHoldsRequestsBackIsSaturation) {
  std::vector<std::string> names = kNames;
  for (const char* m : {"request_throughput", "p99_queueing_ms", "p99_client_wait_ms"})
    names.emplace_back(m);
  PointRunner runner;
  runner.metric_names = names;
  runner.run = [](const proto::ExperimentConfig&) -> absl::StatusOr<std::vector<double>> {
    return std::vector<double>{750, 8250, 300, 100, 20, 1.5, 0, 60000};
  };
  PlanOptions o = Options(false);
  o.devices.resize(1);
  o.max_replicas = 3;
  o.base.mutable_client()->set_request_rate(12);
  o.base.mutable_client()->set_num_prompts(120);
  o.base.mutable_client()->set_max_concurrency(2);
  auto r = RunPlan(o, runner);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->candidates.size(), 3u);
  for (const PlanCandidate& c : r->candidates) {
    EXPECT_TRUE(c.saturated) << c.label;
    EXPECT_FALSE(c.met) << c.label;
  }
  EXPECT_EQ(r->groups[0].chosen, -1);
  EXPECT_THAT(r->groups[0].reason,
              HasSubstr("3 x a misses: saturated: serves 1.5 of 12 req/s offered (the "
                        "queue grows without bound at that rate: at the client, whose "
                        "--max-concurrency 2 holds requests back (p99 wait 60 s))"));
}

// Tensor parallel sizes of one device: TP 1 does not fit, TP 4 (capacity
// 10 per replica) needs 2 replicas at $8/h, so TP 8 ($9/h for one replica)
// cannot be cheaper and is not searched; each candidate runs at its TP.
TEST(RunPlanTest, TensorParallelSizesAreSearchedUpwardAndBoundedByTheSmallerChoice) {
  PointRunner runner;
  runner.metric_names = kNames;
  std::vector<int> tps_run;
  runner.run =
      [&tps_run](
          const proto::ExperimentConfig& c) -> absl::StatusOr<std::vector<double>> {
    double cap = 0;
    for (const auto& rep : c.fleet().replicas()) {
      const int tp = std::max(1, rep.server().tensor_parallel_size());
      tps_run.push_back(tp);
      if (tp == 1) return absl::FailedPreconditionError("model does not fit");
      cap += rep.count() * 2.5 * tp;
    }
    const double u = 12 / cap;
    const double ttft =
        c.client().max_concurrency() == 1 ? 100 : (u < 1 ? 100 / (1 - u) : 1e9);
    return std::vector<double>{1200, 13200, ttft, ttft / 2, 20};
  };
  PlanOptions o = Options(false);
  o.devices.clear();
  for (auto [tp, price] : {std::pair{1, 1.0}, {4, 4.0}, {8, 9.0}}) {
    PlanDevice d;
    d.device = "big";
    d.tensor_parallel_size = tp;
    d.offer.device = "big";
    d.offer.kind = "on-demand";
    d.offer.usd_per_hour = price;
    d.offer.num_devices = tp;
    o.devices.push_back(d);
  }
  auto r = RunPlan(o, runner);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->groups.size(), 3u);
  EXPECT_EQ(r->groups[0].group, "big");
  EXPECT_THAT(r->groups[0].reason, HasSubstr("cannot serve: model does not fit"));
  const PlanGroup& tp4 = r->groups[1];
  EXPECT_EQ(tp4.group, "big TP4");
  ASSERT_GE(tp4.chosen, 0);
  EXPECT_EQ(r->candidates[tp4.chosen].label, "2 x big TP4");
  EXPECT_EQ(r->candidates[tp4.chosen].fleet[0].tensor_parallel_size, 4);
  EXPECT_EQ(r->groups[2].group, "big TP8");
  EXPECT_TRUE(r->groups[2].candidates.empty());
  EXPECT_THAT(r->groups[2].reason, HasSubstr("not searched: one replica costs $9/h"));
  EXPECT_EQ(r->best_group, 1);
  for (int tp : tps_run) EXPECT_NE(tp, 8);
  EXPECT_THAT(FormatPlanJson(o, *r), HasSubstr("\"tensor_parallel_size\": 4"));
  EXPECT_THAT(FormatPlanText(o, *r), HasSubstr("big TP4: 2 x big TP4, $8/h"));
}

TEST(FormatPlanTextTest, LargeTimesAreInHoursNotExponents) {
  auto r = RunPlan(Options(false), QueueRunner(12));
  ASSERT_TRUE(r.ok());
  const std::string text = FormatPlanText(Options(false), *r);
  // 1 x b at 12 req/s is past saturation: 1e9 ms = 278 h.
  EXPECT_THAT(text, HasSubstr("278 h"));
  EXPECT_THAT(text, Not(HasSubstr("1e+09")));
}

TEST(RunPlanTest, MixedPairCheaperThanBothSinglesWins) {
  auto r = RunPlan(Options(true), QueueRunner(12));
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->groups.size(), 4u);  // a, b, huge, a+b (huge does not fit: no pairs)
  const PlanGroup& ab = r->groups[3];
  EXPECT_EQ(ab.group, "a+b");
  ASSERT_GE(ab.chosen, 0) << ab.reason;
  // 1 x a + 2 x b: capacity 16.4, $1.70/h < 5 x b's $1.75/h.
  EXPECT_EQ(r->candidates[ab.chosen].label, "1 x a + 2 x b");
  EXPECT_NEAR(r->candidates[ab.chosen].usd_per_hour, 1.70, 1e-12);
  EXPECT_EQ(r->best_group, 3);
  // 1 x a + 1 x b was tried first (cheaper) and missed.
  ASSERT_EQ(ab.one_fewer.size(), 1u);
  EXPECT_EQ(r->candidates[ab.one_fewer[0]].label, "1 x a + 1 x b");
  EXPECT_FALSE(r->candidates[ab.one_fewer[0]].met);
}

TEST(RunPlanTest, CostPerMillionTokensUsesTheSimulatedThroughput) {
  auto r = RunPlan(Options(false), QueueRunner(12));
  ASSERT_TRUE(r.ok());
  const PlanCandidate& c = r->candidates[r->groups[0].chosen];
  EXPECT_DOUBLE_EQ(c.usd_per_million_output, UsdPerMillionTokens(2.0, 1200));
  EXPECT_DOUBLE_EQ(c.usd_per_million_total, UsdPerMillionTokens(2.0, 13200));
}

TEST(RunPlanTest, PartTimeTrafficGetsADailyBillPerIdlePolicy) {
  PlanOptions o = Options(false);
  o.busy_hours_per_day = 8;
  o.devices[0].offer.startup_s = 1800;           // a: 30 min to ready, billed
  o.devices[1].offer.bills_when_stopped = true;  // b: a stopped droplet bills
  auto r = RunPlan(o, QueueRunner(12));
  ASSERT_TRUE(r.ok()) << r.status();
  const PlanGroup& a = r->groups[0];  // 2 x a at $1/h each, 1,200 out tok/s
  ASSERT_EQ(a.daily.size(), 3u);
  EXPECT_EQ(a.daily[0].first, IdlePolicy::kAlwaysOn);
  EXPECT_DOUBLE_EQ(a.daily[0].second.usd_per_day, 24 * 2.0);
  EXPECT_DOUBLE_EQ(a.daily[1].second.usd_per_day, (8 + 0.5) * 2.0);  // one start
  EXPECT_DOUBLE_EQ(a.daily[2].second.usd_per_day, (8 + 0.5) * 2.0);
  EXPECT_DOUBLE_EQ(a.daily[1].second.output_tokens_per_day, 1200.0 * 3600 * 8);
  EXPECT_DOUBLE_EQ(a.daily[1].second.usd_per_million_output_tokens,
                   17.0 / (1200.0 * 3600 * 8) * 1e6);
  const PlanGroup& b = r->groups[1];  // 5 x b at $0.35/h
  ASSERT_EQ(b.daily.size(), 3u);
  EXPECT_DOUBLE_EQ(b.daily[1].second.usd_per_day, 24 * 5 * 0.35);  // stopped bills
  EXPECT_DOUBLE_EQ(b.daily[2].second.usd_per_day, 8 * 5 * 0.35);   // deleted does not
  EXPECT_TRUE(r->groups[2].daily.empty());                         // nothing chosen
  EXPECT_THAT(FormatPlanText(o, *r), HasSubstr("Daily bill, traffic 8 h a day"));
  EXPECT_THAT(FormatPlanJson(o, *r), HasSubstr("\"policy\": \"delete-when-idle\""));
  // Full-day traffic: no daily section.
  auto full = RunPlan(Options(false), QueueRunner(12));
  ASSERT_TRUE(full.ok());
  EXPECT_TRUE(full->groups[0].daily.empty());
  o.busy_hours_per_day = 25;
  EXPECT_THAT(RunPlan(o, QueueRunner(12)).status().message(),
              HasSubstr("--busy-hours: 25 is out of range [1, 24]"));
}

TEST(RunPlanTest, RejectedRequestsMissTheSlo) {
  // Every fleet serves the rate, but the runner reports rejected requests
  // (too long for the context): rejected requests are not served.
  PointRunner r;
  r.metric_names = {"failed", "output_throughput", "total_token_throughput",
                    "p99_ttft_ms"};
  r.run = [](const proto::ExperimentConfig&) -> absl::StatusOr<std::vector<double>> {
    return std::vector<double>{3, 100, 1000, 10};
  };
  PlanOptions o = Options(false);
  o.slo = *ParseSlo("ttft_p99<=450ms", r.metric_names);
  o.max_replicas = 2;
  auto plan = RunPlan(o, r);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->best_group, -1);
  const PlanCandidate& c = plan->candidates[plan->groups[0].candidates[0]];
  EXPECT_FALSE(c.met);
  ASSERT_FALSE(c.missed.empty());
  EXPECT_THAT(c.missed[0], HasSubstr("3 requests rejected"));
  // No replica count fixes it: the search stops at one replica and says
  // why, and the text table shows the cause next to the SLO value that
  // meets its bound.
  EXPECT_EQ(plan->groups[0].candidates.size(), 1u);
  EXPECT_THAT(plan->groups[0].reason,
              HasSubstr("cannot serve the workload: one replica rejects 3 requests"));
  const std::string text = FormatPlanText(o, *plan);
  EXPECT_THAT(text, HasSubstr("[3 requests rejected: longer than max_model_len or the KV "
                              "cache]"));
  EXPECT_THAT(text, Not(HasSubstr("no fleet of up to")));
}

TEST(RunPlanTest, NothingMeetsWithinMaxReplicas) {
  PlanOptions o = Options(false);
  o.max_replicas = 3;
  auto r = RunPlan(o, QueueRunner(40));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->best_group, -1);
  EXPECT_THAT(r->groups[0].reason, HasSubstr("up to 3 replicas"));
  EXPECT_THAT(FormatPlanText(o, *r), HasSubstr("No fleet meets the SLO"));
}

TEST(RunPlanTest, ResultDoesNotDependOnJobs) {
  PlanOptions o1 = Options(true), o2 = Options(true);
  o2.jobs = 3;
  auto r1 = RunPlan(o1, QueueRunner(12));
  auto r2 = RunPlan(o2, QueueRunner(12));
  ASSERT_TRUE(r1.ok() && r2.ok());
  EXPECT_EQ(FormatPlanJson(o1, *r1), FormatPlanJson(o2, *r2));
  EXPECT_EQ(FormatPlanText(o1, *r1), FormatPlanText(o2, *r2));
}

TEST(RunPlanTest, TextReportShowsOneReplicaFewerMissing) {
  auto r = RunPlan(Options(false), QueueRunner(12));
  ASSERT_TRUE(r.ok());
  const std::string text = FormatPlanText(Options(false), *r);
  EXPECT_THAT(text,
              HasSubstr("one replica fewer (1 x a) misses: p99_ttft_ms 278 h > 450"));
  EXPECT_THAT(text, HasSubstr("Cheapest overall: 5 x b"));
}

TEST(FleetExperimentTest, ReplacesDeviceAndReplicas) {
  proto::ExperimentConfig base;
  base.mutable_server()->set_device("ignored");
  base.mutable_server()->set_model("gemma-4-e2b");
  base.mutable_fleet()->set_router("least-outstanding");
  base.mutable_fleet()->add_replicas()->set_count(9);
  auto c = FleetExperiment(base, {{"l4", 2, 1.1}, {"t4", 1, 0.7}});
  ASSERT_EQ(c.fleet().replicas_size(), 2);
  EXPECT_EQ(c.fleet().router(), "least-outstanding");
  EXPECT_EQ(c.fleet().replicas(0).server().device(), "l4");
  EXPECT_EQ(c.fleet().replicas(0).server().model(), "gemma-4-e2b");
  EXPECT_EQ(c.fleet().replicas(0).count(), 2);
  EXPECT_EQ(c.fleet().replicas(1).server().device(), "t4");
}

TEST(RunPlanTest, RejectsBadOptions) {
  PlanOptions o = Options(false);
  o.max_replicas = 0;
  EXPECT_FALSE(RunPlan(o, QueueRunner(1)).ok());
  o = Options(false);
  o.devices.clear();
  EXPECT_FALSE(RunPlan(o, QueueRunner(1)).ok());
}

}  // namespace
}  // namespace servesim
