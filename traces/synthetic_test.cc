#include "traces/synthetic.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sim/random_source.h"
#include "traces/drain_for_test.h"
#include "traces/trace_reader.h"

namespace servesim {
namespace {

std::vector<RequestSpec> Drain(RequestSource& s) {
  std::vector<RequestSpec> out;
  RequestSpec r;
  while (true) {
    auto got = s.Next(r);
    EXPECT_TRUE(got.ok()) << got.status();
    if (!got.ok() || !*got) break;
    out.push_back(r);
  }
  return out;
}

// Mean and coefficient of variation of the gaps of `n` arrivals.
std::pair<double, double> GapStats(const ArrivalSpec& spec, int n, uint64_t seed = 1) {
  auto p = ArrivalProcess::Create(spec, seed);
  EXPECT_TRUE(p.ok()) << p.status();
  TimeNs prev = (*p)->Next();
  double sum = 0, sum2 = 0;
  for (int i = 0; i < n; ++i) {
    const TimeNs t = (*p)->Next();
    EXPECT_GE(t, prev);
    const double g = (t - prev) / 1e9;
    sum += g;
    sum2 += g * g;
    prev = t;
  }
  const double mean = sum / n;
  return {mean, std::sqrt(sum2 / n - mean * mean) / mean};
}

// A range error prints the value as given: 10,000,001 in full (it read
// "1e+07", inside the range it is outside of).
TEST(SyntheticValidationTest, RangeErrorPrintsTheValueInFull) {
  LengthSpec l;
  l.input_len = 10'000'001;
  EXPECT_EQ(ValidateLengthSpec(l).message(),
            "lengths input_len: 10000001 is outside the allowed range [1, 10000000]");
  ArrivalSpec a;
  a.kind = ArrivalSpec::Kind::kPoisson;
  a.rate_per_s = -0.125;
  EXPECT_EQ(ValidateArrivalSpec(a).message(),
            "arrival rate_per_s: -0.125 is outside the allowed range (0, 1e9]");
  // Weibull's scale needs Gamma(1 + 1/shape) finite: shape 0.005 aborted.
  a.kind = ArrivalSpec::Kind::kWeibull;
  a.rate_per_s = 1;
  a.shape = 0.005;
  EXPECT_EQ(ValidateArrivalSpec(a).message(),
            "arrival shape (weibull): 0.0050000000000000001 is outside the allowed range "
            "[0.01, 1000]");
  a.shape = 0.01;
  EXPECT_TRUE(ValidateArrivalSpec(a).ok());
}

TEST(SamplerTest, UniformIntStaysInRangeAndHitsBothEnds) {
  Rng s(7);
  std::map<int64_t, int> counts;
  for (int i = 0; i < 10000; ++i) ++counts[s.UniformInt(3, 7)];
  EXPECT_EQ(counts.size(), 5u);
  EXPECT_EQ(counts.begin()->first, 3);
  EXPECT_EQ(counts.rbegin()->first, 7);
  for (const auto& [v, c] : counts) EXPECT_NEAR(c, 2000, 200) << v;
}

TEST(SamplerTest, GammaHasMeanShapeTimesScale) {
  for (double shape : {0.3, 1.0, 4.0}) {
    Rng s(11);
    double sum = 0;
    const int n = 200000;
    for (int i = 0; i < n; ++i) sum += s.Gamma(shape, 2.0);
    EXPECT_NEAR(sum / n, 2.0 * shape, 0.03 * 2.0 * shape) << shape;
  }
}

TEST(ArrivalProcessTest, PoissonHasTheRateAndCvOne) {
  ArrivalSpec spec;
  spec.kind = ArrivalSpec::Kind::kPoisson;
  spec.rate_per_s = 4;
  auto [mean, cv] = GapStats(spec, 100000);
  EXPECT_NEAR(mean, 0.25, 0.005);
  EXPECT_NEAR(cv, 1.0, 0.02);
}

TEST(ArrivalProcessTest, GammaBurstinessSetsCvToOneOverSqrtShape) {
  ArrivalSpec spec;
  spec.kind = ArrivalSpec::Kind::kGamma;
  spec.rate_per_s = 10;
  spec.shape = 0.25;  // vLLM --burstiness 0.25: CV 2
  auto [mean, cv] = GapStats(spec, 200000);
  EXPECT_NEAR(mean, 0.1, 0.003);
  EXPECT_NEAR(cv, 2.0, 0.06);
}

TEST(ArrivalProcessTest, WeibullKeepsTheMeanRate) {
  ArrivalSpec spec;
  spec.kind = ArrivalSpec::Kind::kWeibull;
  spec.rate_per_s = 2;
  spec.shape = 0.5;
  auto [mean, cv] = GapStats(spec, 200000);
  EXPECT_NEAR(mean, 0.5, 0.02);
  EXPECT_GT(cv, 1.5);  // k < 1 is burstier than Poisson (CV sqrt(5) for k = 0.5)
}

TEST(ArrivalProcessTest, FirstArrivalAtZeroAndConstantIsExact) {
  ArrivalSpec spec;
  spec.kind = ArrivalSpec::Kind::kConstant;
  spec.rate_per_s = 4;
  auto p = ArrivalProcess::Create(spec, 0);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ((*p)->Next(), 0);
  EXPECT_EQ((*p)->Next(), 250'000'000);
  EXPECT_EQ((*p)->Next(), 500'000'000);
}

TEST(ArrivalProcessTest, ScheduleGivesEachPhaseItsRate) {
  ArrivalSpec spec;
  spec.kind = ArrivalSpec::Kind::kSchedule;
  spec.schedule = {{100, 1.0}, {100, 0.0}, {100, 9.0}};
  auto p = ArrivalProcess::Create(spec, 3);
  ASSERT_TRUE(p.ok());
  int counts[3] = {0, 0, 0};
  for (int i = 0; i < 50000; ++i) {
    const double t = (*p)->Next() / 1e9;
    counts[static_cast<int>(std::fmod(t, 300.0) / 100.0)]++;
  }
  EXPECT_EQ(counts[1], 0);  // a quiet phase has no arrivals
  EXPECT_NEAR(static_cast<double>(counts[2]) / counts[0], 9.0, 0.5);
}

TEST(ArrivalProcessTest, RejectsBadSpecsNamingTheField) {
  ArrivalSpec spec;
  spec.kind = ArrivalSpec::Kind::kGamma;
  spec.rate_per_s = -1;
  auto p = ArrivalProcess::Create(spec, 0);
  ASSERT_FALSE(p.ok());
  EXPECT_THAT(p.status().message(), ::testing::HasSubstr("rate_per_s"));
  spec.kind = ArrivalSpec::Kind::kSchedule;
  spec.schedule = {{10, 0}};
  EXPECT_FALSE(ArrivalProcess::Create(spec, 0).ok());
}

SyntheticOptions Base() {
  SyntheticOptions o;
  o.num_requests = 500;
  o.seed = 42;
  o.arrival.kind = ArrivalSpec::Kind::kPoisson;
  o.arrival.rate_per_s = 5;
  return o;
}

TEST(SyntheticSourceTest, SameSeedSameStreamDifferentSeedDifferentStream) {
  SyntheticOptions o = Base();
  o.lengths.kind = LengthSpec::Kind::kUniform;
  o.lengths.range_ratio = 0.5;
  auto a = MakeSyntheticSource(o);
  auto b = MakeSyntheticSource(o);
  o.seed = 43;
  auto c = MakeSyntheticSource(o);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  auto ra = Drain(**a), rb = Drain(**b), rc = Drain(**c);
  ASSERT_EQ(ra.size(), 500u);
  bool differs = false;
  for (size_t i = 0; i < ra.size(); ++i) {
    EXPECT_EQ(ra[i].arrival_ns, rb[i].arrival_ns);
    EXPECT_EQ(ra[i].input_tokens, rb[i].input_tokens);
    differs |= ra[i].input_tokens != rc[i].input_tokens;
  }
  EXPECT_TRUE(differs);
}

// A prompt over the 10,000,000 tokens a trace holds (each length within
// its own range, their sum not) is an error naming the request; it used to
// be cut to the limit without a word.
TEST(SyntheticSourceTest, PromptOverTheTraceLimitIsAnErrorNotCut) {
  SyntheticOptions o = Base();
  o.num_requests = 2;
  o.sessions.shared_prefix_tokens = 9'000'000;
  o.lengths.input_len = 2'000'000;
  auto single = MakeSyntheticSource(o);
  ASSERT_TRUE(single.ok()) << single.status();
  RequestSpec r;
  auto got = (*single)->Next(r);
  EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(got.status().message()),
              ::testing::HasSubstr("request 0 has a prompt of 11000000 tokens (shared "
                                   "prefix + input), over the 10000000 a trace holds"));
  // A session's history grows past it on its third turn: 4M, 4M + 1M + 4M,
  // then 14M.
  o = Base();
  o.num_requests = 3;
  o.arrival.rate_per_s = 1e-3;  // one session: its turns come first
  o.lengths.input_len = 4'000'000;
  o.lengths.output_len = 1'000'000;
  o.sessions.min_turns = o.sessions.max_turns = 3;
  auto multi = MakeSyntheticSource(o);
  ASSERT_TRUE(multi.ok()) << multi.status();
  ASSERT_TRUE((*multi)->Next(r).ok());
  EXPECT_EQ(r.input_tokens, 4'000'000);
  ASSERT_TRUE((*multi)->Next(r).ok());
  EXPECT_EQ(r.input_tokens, 9'000'000);
  got = (*multi)->Next(r);
  EXPECT_THAT(std::string(got.status().message()),
              ::testing::HasSubstr("request 2 has a prompt of 14000000 tokens"));
}

TEST(SyntheticSourceTest, UniformLengthsFollowVllmRandomDatasetBounds) {
  SyntheticOptions o = Base();
  o.num_requests = 5000;
  o.lengths.kind = LengthSpec::Kind::kUniform;
  o.lengths.input_len = 1000;
  o.lengths.output_len = 100;
  o.lengths.range_ratio = 0.2;
  auto s = MakeSyntheticSource(o);
  ASSERT_TRUE(s.ok());
  int32_t lo = 1 << 30, hi = 0;
  for (const auto& r : Drain(**s)) {
    lo = std::min(lo, r.input_tokens);
    hi = std::max(hi, r.input_tokens);
    ASSERT_GE(r.output_tokens, 80);
    ASSERT_LE(r.output_tokens, 120);
    EXPECT_TRUE(r.prefix_hashes.empty());
    EXPECT_EQ(r.session_id, -1);
  }
  EXPECT_EQ(lo, 800);
  EXPECT_EQ(hi, 1200);
}

TEST(SyntheticSourceTest, EachTurnExtendsItsSessionPrefix) {
  SyntheticOptions o = Base();
  o.num_requests = 2000;
  o.sessions.min_turns = 2;
  o.sessions.max_turns = 5;
  o.sessions.think_time_s = 3;
  o.lengths.input_len = 100;
  o.lengths.output_len = 50;
  auto s = MakeSyntheticSource(o);
  ASSERT_TRUE(s.ok());
  auto reqs = Drain(**s);
  ASSERT_EQ(reqs.size(), 2000u);
  std::map<int64_t, RequestSpec> last_turn;
  int follow_ups = 0;
  for (size_t i = 0; i < reqs.size(); ++i) {
    const RequestSpec& r = reqs[i];
    ASSERT_EQ(r.id, static_cast<int64_t>(i));
    if (i > 0) {
      ASSERT_GE(r.arrival_ns, reqs[i - 1].arrival_ns);
    }
    ASSERT_GE(r.session_id, 0);
    // Whole blocks of the prompt, and of the answer when the answer is
    // hashed (the turn has a follow-up; the session's last turn does not).
    EXPECT_TRUE(r.hashed_output_tokens == 0 || r.hashed_output_tokens == r.output_tokens);
    EXPECT_EQ(r.prefix_hashes.size(),
              static_cast<size_t>((r.input_tokens + r.hashed_output_tokens) / 16));
    auto it = last_turn.find(r.session_id);
    if (it != last_turn.end()) {
      ++follow_ups;
      const RequestSpec& prev = it->second;
      // prompt = previous prompt + previous answer + new user text
      EXPECT_EQ(r.input_tokens, prev.input_tokens + prev.output_tokens + 100);
      // The previous turn named its answer, and every whole block of its
      // prompt and answer is a shared prefix of this prompt.
      EXPECT_EQ(prev.hashed_output_tokens, prev.output_tokens);
      for (size_t b = 0; b < prev.prefix_hashes.size(); ++b) {
        ASSERT_EQ(r.prefix_hashes[b], prev.prefix_hashes[b]);
      }
    } else if (!last_turn.empty()) {
      // A new session shares nothing with another session.
      EXPECT_NE(r.prefix_hashes[0], last_turn.begin()->second.prefix_hashes[0]);
    }
    last_turn[r.session_id] = r;
  }
  EXPECT_GT(follow_ups, 1000);
}

// The request count ends the trace mid-session: the description counts
// the sessions cut short (they have fewer turns than drawn), and says
// nothing when every session finished.
TEST(SyntheticSourceTest, SessionsCutByTheRequestCountAreCounted) {
  SyntheticOptions o = Base();
  o.num_requests = 6;
  o.sessions.min_turns = 3;
  o.sessions.max_turns = 3;
  o.sessions.think_time_s = 1;
  auto s = MakeSyntheticSource(o);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ((*s)->Describe().find("cut short"), std::string::npos);
  const std::vector<RequestSpec> reqs = Drain(**s);
  ASSERT_EQ(reqs.size(), 6u);
  std::map<int64_t, int> turns;
  for (const RequestSpec& r : reqs) ++turns[r.session_id];
  int cut = 0;
  for (const auto& [session, n] : turns) cut += n < 3 ? 1 : 0;
  ASSERT_GT(cut, 0);
  EXPECT_NE(
      (*s)->Describe().find(absl::StrCat(", ", cut, " of ", turns.size(),
                                         " sessions cut short by the request count")),
      std::string::npos)
      << (*s)->Describe();

  o.num_requests = 9;  // three sessions of three turns, all at once
  o.sessions.think_time_s = 0;
  o.arrival.kind = ArrivalSpec::Kind::kAllAtOnce;
  auto whole = MakeSyntheticSource(o);
  ASSERT_TRUE(whole.ok());
  ASSERT_EQ(Drain(**whole).size(), 9u);
  EXPECT_EQ((*whole)->Describe().find("cut short"), std::string::npos)
      << (*whole)->Describe();
}

TEST(SyntheticSourceTest, SharedSystemPromptIsHashedForEveryRequest) {
  SyntheticOptions o = Base();
  o.sessions.shared_prefix_tokens = 100;  // 6 full 16-token blocks
  auto s = MakeSyntheticSource(o);
  ASSERT_TRUE(s.ok());
  auto reqs = Drain(**s);
  for (const auto& r : reqs) {
    ASSERT_EQ(r.prefix_hashes.size(), 6u);
    EXPECT_EQ(r.prefix_hashes, reqs[0].prefix_hashes);
    EXPECT_EQ(r.input_tokens, 1124);
  }
}

TEST(SyntheticSourceTest, EmpiricalLengthsComeFromTheSample) {
  SyntheticOptions o = Base();
  o.lengths.kind = LengthSpec::Kind::kEmpirical;
  o.lengths.empirical = {{10, 1}, {20, 2}, {30, 3}};
  auto s = MakeSyntheticSource(o);
  ASSERT_TRUE(s.ok());
  std::map<int32_t, int> seen;
  for (const auto& r : Drain(**s)) {
    ASSERT_EQ(r.output_tokens * 10, r.input_tokens);  // pairs drawn jointly
    ++seen[r.input_tokens];
  }
  EXPECT_EQ(seen.size(), 3u);
}

// One rule for vLLM's random-dataset bounds: synthetic uniform lengths and
// RandomSource (`simulate`'s random dataset) share VllmRandomLengthBounds.
// 101 x 1.25 = 126.25: vLLM's ceil gives 127 (the synthetic source used to
// truncate to 126), 101 x 0.75 = 75.75: floor 75.
TEST(SyntheticSourceTest, UniformLengthsUseTheRandomDatasetsBounds) {
  SyntheticOptions o = Base();
  o.num_requests = 5000;
  o.lengths.kind = LengthSpec::Kind::kUniform;
  o.lengths.input_len = 101;
  o.lengths.output_len = 101;
  o.lengths.range_ratio = 0.25;
  auto s = MakeSyntheticSource(o);
  ASSERT_TRUE(s.ok());
  int32_t lo = 1 << 30, hi = 0;
  for (const auto& r : Drain(**s)) {
    lo = std::min(lo, r.input_tokens);
    hi = std::max(hi, r.input_tokens);
  }
  const LengthBounds b = VllmRandomLengthBounds(101, 0.25);
  EXPECT_EQ(b.lo, 75);
  EXPECT_EQ(b.hi, 127);
  EXPECT_EQ(lo, b.lo);
  EXPECT_EQ(hi, b.hi);
}

TEST(SyntheticSourceTest, ReservoirKeepsAtMostMaxSamplesInSourceOrder) {
  SyntheticOptions o = Base();
  o.num_requests = 1000;
  o.lengths.kind = LengthSpec::Kind::kUniform;
  o.lengths.range_ratio = 0.9;
  auto s = MakeSyntheticSource(o);
  ASSERT_TRUE(s.ok());
  auto sample = SampleEmpiricalLengths(**s, 100, 5);
  ASSERT_TRUE(sample.ok());
  EXPECT_EQ(sample->size(), 100u);
}

TEST(SyntheticSourceTest, NumRequestsMustBeOneToInt32Max) {
  SyntheticOptions o = Base();
  o.num_requests = 0;
  auto s = MakeSyntheticSource(o);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.status().message(), ::testing::HasSubstr("num_requests"));
  EXPECT_THAT(s.status().message(), ::testing::HasSubstr("[1, 2147483647]"));
  o.num_requests = int64_t{2147483647} + 1;
  EXPECT_FALSE(MakeSyntheticSource(o).ok());
  o.num_requests = 1;
  EXPECT_TRUE(MakeSyntheticSource(o).ok());
  o.num_requests = 2147483647;
  EXPECT_TRUE(MakeSyntheticSource(o).ok());
}

TEST(SyntheticSourceTest, ArrivalsPastTheHorizonAreAnErrorNotSaturated) {
  SyntheticOptions o = Base();
  o.num_requests = 100;
  o.arrival.kind = ArrivalSpec::Kind::kConstant;
  // Gaps of 1e9 s (they were clamped to 1e8 s): arrivals at 0, 1e9, ...,
  // 4e9 s; the sixth, at 5e18 ns, is past 2^62 ns.
  o.arrival.rate_per_s = 1e-9;
  auto s = MakeSyntheticSource(o);
  ASSERT_TRUE(s.ok());
  const Drained d = DrainSource(**s);
  ASSERT_FALSE(d.error.ok()) << "reached the end without an error";
  for (const RequestSpec& r : d.requests) EXPECT_LE(r.arrival_ns, kMaxTraceArrivalNs);
  const absl::Status& st = d.error;
  ASSERT_EQ(d.requests.size(), 5u);
  // 1 / 1e-9 in doubles: 1e9 s less 128 ns.
  EXPECT_NEAR(static_cast<double>(d.requests[4].arrival_ns - d.requests[3].arrival_ns),
              1e18, 1e3);
  EXPECT_THAT(st.message(), ::testing::HasSubstr("synthetic workload: request 5"));
  EXPECT_THAT(st.message(), ::testing::HasSubstr("2^62"));
}

TEST(VllmRandomPromptHashesTest, ShorterPromptIsAPrefixAndIndexesDiffer) {
  const std::vector<uint64_t> long0 = VllmRandomPromptHashes(0, 0, 8192, 16);
  const std::vector<uint64_t> short0 = VllmRandomPromptHashes(0, 0, 1030, 16);
  ASSERT_EQ(long0.size(), 512u);
  ASSERT_EQ(short0.size(), 64u);  // whole blocks only
  EXPECT_TRUE(std::equal(short0.begin(), short0.end(), long0.begin()));
  const std::vector<uint64_t> other = VllmRandomPromptHashes(0, 1, 8192, 16);
  const std::vector<uint64_t> seed1 = VllmRandomPromptHashes(1, 0, 8192, 16);
  EXPECT_NE(other[0], long0[0]);
  EXPECT_NE(seed1[0], long0[0]);
  EXPECT_EQ(VllmRandomPromptHashes(0, 0, 8192, 16), long0);  // deterministic
}

}  // namespace
}  // namespace servesim
