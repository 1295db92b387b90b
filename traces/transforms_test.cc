#include "traces/transforms.h"

#include <limits>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "traces/trace_reader.h"

namespace servesim {
namespace {

using ::testing::HasSubstr;

// A fixed in-memory source for the transform tests.
class VectorSource : public RequestSource {
 public:
  explicit VectorSource(std::vector<RequestSpec> reqs) : reqs_(std::move(reqs)) {}
  absl::StatusOr<bool> Next(RequestSpec& out) override {
    if (i_ >= reqs_.size()) return false;
    out = reqs_[i_++];
    return true;
  }
  std::string Describe() const override { return "vector"; }

 private:
  std::vector<RequestSpec> reqs_;
  size_t i_ = 0;
};

std::vector<RequestSpec> Make(int n, TimeNs gap_ns) {
  std::vector<RequestSpec> v;
  for (int i = 0; i < n; ++i) {
    RequestSpec r;
    r.id = i;
    r.arrival_ns = i * gap_ns;
    r.input_tokens = 10 * (i + 1);
    r.output_tokens = i + 1;
    r.prefix_hashes = {100, static_cast<uint64_t>(200 + i)};
    r.hash_block_tokens = 4;
    r.session_id = i % 2;
    v.push_back(r);
  }
  return v;
}

std::unique_ptr<RequestSource> Src(int n, TimeNs gap) {
  return std::make_unique<VectorSource>(Make(n, gap));
}

std::vector<RequestSpec> Drain(RequestSource& s) {
  std::vector<RequestSpec> out;
  RequestSpec r;
  while (true) {
    auto got = s.Next(r);
    EXPECT_TRUE(got.ok()) << got.status();
    if (!got.ok() || !*got) break;
    out.push_back(r);
  }
  for (size_t i = 0; i < out.size(); ++i) EXPECT_EQ(out[i].id, static_cast<int64_t>(i));
  return out;
}

TEST(TransformsTest, TimeWindowKeepsHalfOpenRangeAndRebases) {
  auto w = TimeWindow(Src(10, 100), 200, 500);
  auto r = Drain(*w);
  ASSERT_EQ(r.size(), 3u);  // 200, 300, 400
  EXPECT_EQ(r[0].arrival_ns, 0);
  EXPECT_EQ(r[2].arrival_ns, 200);
  EXPECT_EQ(r[0].input_tokens, 30);
}

TEST(TransformsTest, ScaleTimeHalvesGapsForFactorHalf) {
  auto s = ScaleTime(Src(5, 1001), 0.5);
  auto r = Drain(*s);
  EXPECT_EQ(r[1].arrival_ns, 501);  // 500.5 rounds half away from zero
  EXPECT_EQ(r[4].arrival_ns, 2002);
}

TEST(TransformsTest, SampleIsDeterministicPerSeedAndNearTheFraction) {
  auto a = Drain(*Sample(Src(10000, 1), 0.3, 9));
  auto b = Drain(*Sample(Src(10000, 1), 0.3, 9));
  auto c = Drain(*Sample(Src(10000, 1), 0.3, 10));
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i].input_tokens, b[i].input_tokens);
  EXPECT_NEAR(static_cast<double>(a.size()), 3000, 150);
  EXPECT_NE(a.size(), c.size());
}

TEST(TransformsTest, FilterLengthsIsInclusive) {
  LengthFilter f;
  f.min_input = 20;
  f.max_input = 40;
  auto r = Drain(*FilterLengths(Src(10, 1), f));
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r.front().input_tokens, 20);
  EXPECT_EQ(r.back().input_tokens, 40);
}

TEST(TransformsTest, LimitStopsAtN) {
  EXPECT_EQ(Drain(*Limit(Src(10, 1), 4)).size(), 4u);
  EXPECT_EQ(Drain(*Limit(Src(3, 1), 4)).size(), 3u);
}

TEST(TransformsTest, RequireCountGivesExactlyNOrFailsNamingTheAsk) {
  EXPECT_EQ(Drain(*RequireCount(Limit(Src(10, 1), 4), 4, "--num-prompts 4")).size(), 4u);
  auto short_src = RequireCount(Src(3, 1), 5, "--num-prompts 5");
  RequestSpec r;
  for (int i = 0; i < 3; ++i) {
    auto got = short_src->Next(r);
    ASSERT_TRUE(got.ok() && *got);
  }
  auto end = short_src->Next(r);
  ASSERT_FALSE(end.ok());
  EXPECT_EQ(end.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(end.status().message().find("--num-prompts 5"), std::string::npos);
  EXPECT_NE(end.status().message().find("has only 3"), std::string::npos);
  // The same error again, never a silent end.
  EXPECT_FALSE(short_src->Next(r).ok());
}

// Session ids near INT64_MAX (BurstGPT's hashed ids are 63-bit):
// pass x (largest + 1) overflowed into negative ids that servesim then
// refused to read back. Later passes number their sessions densely after
// pass 0's largest, distinct across passes.
TEST(TransformsTest, LoopRenumbersLargeSessionIdsWithoutOverflow) {
  auto make = [] {
    std::vector<RequestSpec> v = Make(3, 10);
    v[0].session_id = 9'000'000'000'000'000'000;
    v[1].session_id = 5;
    v[2].session_id = 9'000'000'000'000'000'000;
    return absl::StatusOr<std::unique_ptr<RequestSource>>(
        std::make_unique<VectorSource>(std::move(v)));
  };
  auto loop = Loop(make, 9, /*distinct_hashes=*/true);
  ASSERT_TRUE(loop.ok());
  auto r = Drain(**loop);
  ASSERT_EQ(r.size(), 9u);
  const int64_t base = 9'000'000'000'000'000'001;
  EXPECT_EQ(r[0].session_id, base - 1);  // pass 0 as read
  EXPECT_EQ(r[3].session_id, base);      // pass 1: 2 sessions from base
  EXPECT_EQ(r[4].session_id, base + 1);
  EXPECT_EQ(r[5].session_id, base);      // the same session as r[3]
  EXPECT_EQ(r[6].session_id, base + 2);  // pass 2
  EXPECT_EQ(r[7].session_id, base + 3);
  // Past int64: an error naming how many requests fit, not a wrap.
  auto huge = [] {
    std::vector<RequestSpec> v = Make(2, 10);
    v[0].session_id = std::numeric_limits<int64_t>::max() - 2;
    return absl::StatusOr<std::unique_ptr<RequestSource>>(
        std::make_unique<VectorSource>(std::move(v)));
  };
  auto over = Loop(huge, 20, true);
  ASSERT_TRUE(over.ok());
  RequestSpec q;
  absl::Status st;
  for (int i = 0; i < 20 && st.ok(); ++i) st = (*over)->Next(q).status();
  EXPECT_THAT(st.message(), ::testing::HasSubstr("cannot be renumbered past the first "
                                                 "pass's largest session id"));
}

// --max-requests N read row N + 1 (a bad row just past the window failed
// the run).
TEST(TransformsTest, LimitStopsWithoutReadingAnotherRequest) {
  class CountingSource : public RequestSource {
   public:
    absl::StatusOr<bool> Next(RequestSpec& out) override {
      if (++reads_ > 2) return absl::InvalidArgumentError("row 3: bad");
      out = RequestSpec();
      out.input_tokens = out.output_tokens = 1;
      return true;
    }
    std::string Describe() const override { return "counting"; }
    int reads_ = 0;
  };
  auto src = std::make_unique<CountingSource>();
  CountingSource* raw = src.get();
  auto limited = Limit(std::move(src), 2);
  EXPECT_EQ(Drain(*limited).size(), 2u);
  EXPECT_EQ(raw->reads_, 2);
}

TEST(TransformsTest, LoopShiftsBySpanPlusMeanGapAndSeparatesPasses) {
  auto loop =
      Loop([] { return absl::StatusOr<std::unique_ptr<RequestSource>>(Src(4, 10)); }, 10,
           /*distinct_hashes=*/true);
  ASSERT_TRUE(loop.ok());
  auto r = Drain(**loop);
  ASSERT_EQ(r.size(), 10u);
  // Pass 0: 0,10,20,30 (span 30, mean gap 10) -> pass 1 starts at 40.
  EXPECT_EQ(r[4].arrival_ns, 40);
  EXPECT_EQ(r[8].arrival_ns, 80);
  for (size_t i = 1; i < r.size(); ++i) EXPECT_GE(r[i].arrival_ns, r[i - 1].arrival_ns);
  // Sessions 0/1 in pass 0 become 2/3 in pass 1.
  EXPECT_EQ(r[4].session_id, 2);
  EXPECT_EQ(r[5].session_id, 3);
  // Distinct hashes: pass 1 shares nothing with pass 0, but keeps its own
  // sharing structure (every request shares block 0).
  EXPECT_NE(r[4].prefix_hashes[0], r[0].prefix_hashes[0]);
  EXPECT_EQ(r[4].prefix_hashes[0], r[5].prefix_hashes[0]);
}

TEST(TransformsTest, LoopCanKeepHashesSoLaterPassesHitTheCache) {
  auto loop =
      Loop([] { return absl::StatusOr<std::unique_ptr<RequestSource>>(Src(4, 10)); }, 8,
           /*distinct_hashes=*/false);
  ASSERT_TRUE(loop.ok());
  auto r = Drain(**loop);
  EXPECT_EQ(r[4].prefix_hashes, r[0].prefix_hashes);
}

TEST(TransformsTest, LoopOfEmptySourceEnds) {
  auto loop = Loop(
      [] { return absl::StatusOr<std::unique_ptr<RequestSource>>(Src(0, 10)); }, 8, true);
  ASSERT_TRUE(loop.ok());
  EXPECT_TRUE(Drain(**loop).empty());
}

TEST(TransformsTest, WithArrivalsReplacesTimes) {
  ArrivalSpec spec;
  spec.kind = ArrivalSpec::Kind::kConstant;
  spec.rate_per_s = 1000;
  auto arrivals = ArrivalProcess::Create(spec, 0);
  ASSERT_TRUE(arrivals.ok());
  auto r = Drain(*WithArrivals(Src(3, 0), std::move(*arrivals)));
  EXPECT_EQ(r[2].arrival_ns, 2'000'000);
}

TEST(TransformsTest, MeasureSpanGivesMeanRate) {
  auto s = Src(11, 100'000'000);
  auto span = MeasureSpan(*s);
  ASSERT_TRUE(span.ok());
  EXPECT_EQ(span->requests, 11);
  EXPECT_DOUBLE_EQ(span->MeanRatePerS(), 10.0);
}

// Reads until the end or an error; returns the error (OK at a clean end).
absl::Status DrainStatus(RequestSource& s, std::vector<RequestSpec>* out = nullptr) {
  RequestSpec r;
  while (true) {
    auto got = s.Next(r);
    if (!got.ok()) return got.status();
    if (!*got) return absl::OkStatus();
    if (out != nullptr) out->push_back(r);
  }
}

TEST(TransformsTest, ScaleTimePastTheHorizonIsAnErrorNamingOptionAndRange) {
  // 1 s gaps, rate scale 1e-300: the second request would land at 1e300 s.
  auto s = ScaleTime(Src(3, kNsPerSec), 1e300, TimeScaleOrigin{"--rate-scale", 1.0});
  std::vector<RequestSpec> got;
  absl::Status st = DrainStatus(*s, &got);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(got.size(), 1u);  // t = 0 scales to 0
  EXPECT_THAT(st.message(), HasSubstr("--rate-scale 1e-300: request 1"));
  EXPECT_THAT(st.message(), HasSubstr("2^62"));
  EXPECT_THAT(st.message(), HasSubstr("needs --rate-scale >= "));
  // Sticky: the same error again, never a saturated arrival.
  RequestSpec r;
  EXPECT_EQ(s->Next(r).status(), st);
}

TEST(TransformsTest, ScaleTimeExactlyToTheHorizonIsAccepted) {
  auto s = ScaleTime(Src(2, kMaxTraceArrivalNs / 4), 4.0);
  std::vector<RequestSpec> got;
  ASSERT_TRUE(DrainStatus(*s, &got).ok());
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[1].arrival_ns, kMaxTraceArrivalNs);
}

TEST(TransformsTest, LoopPastTheHorizonIsAnErrorNotAnOverflow) {
  // Pass 0 spans 2^61 ns: pass 2 would start past 2^62.
  auto loop = Loop(
      [] {
        return absl::StatusOr<std::unique_ptr<RequestSource>>(
            Src(2, kMaxTraceArrivalNs / 2));
      },
      100, true);
  ASSERT_TRUE(loop.ok());
  std::vector<RequestSpec> got;
  absl::Status st = DrainStatus(**loop, &got);
  EXPECT_THAT(st.message(), HasSubstr("loop to 100 requests: pass"));
  EXPECT_THAT(st.message(), HasSubstr("2^62"));
  for (const RequestSpec& r : got) EXPECT_LE(r.arrival_ns, kMaxTraceArrivalNs);
}

}  // namespace
}  // namespace servesim
