#include "experiments/capacity/intervals.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "calibration/coverage.h"
#include "calibration/measurements.h"
#include "calibration/validation.h"
#include "experiments/capacity/saturation.h"
#include "experiments/capacity/simulate_report.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "hwmodels/calibration_profile.h"
#include "hwmodels/catalog.h"
#include "sim/base/json_writer.h"

namespace servesim {
namespace {

TEST(IntervalsTest, NormalQuantileMatchesTables) {
  EXPECT_NEAR(NormalQuantile(0.5), 0.0, 1e-12);
  EXPECT_NEAR(NormalQuantile(0.95), 1.6448536269514722, 1e-10);
  EXPECT_NEAR(NormalQuantile(0.975), 1.959963984540054, 1e-10);
  EXPECT_NEAR(NormalQuantile(0.75), 0.6744897501960817, 1e-10);
  EXPECT_NEAR(NormalQuantile(0.001), -3.090232306167813, 1e-9);
}

TEST(IntervalsTest, SourcesCombineByAddingCentresAndLogVariancesSideBySide) {
  const double z = NormalQuantile(0.95);
  MetricInterval m;
  m.point = 100;
  m.parameters.center_log = 0.01;
  m.parameters.sd_log_lo = 0.02;
  m.parameters.sd_log_hi = 0.03;
  m.workload.center_log = 0.5;  // left out: the point is one workload draw
  m.workload.sd_log_lo = m.workload.sd_log_hi = 0.04;
  m.structural = LogNormalBand(100, 0.12, z);
  CombineSources(z, &m);
  const double lo = std::sqrt(0.02 * 0.02 + 0.04 * 0.04 + 0.12 * 0.12);
  const double hi = std::sqrt(0.03 * 0.03 + 0.04 * 0.04 + 0.12 * 0.12);
  EXPECT_NEAR(m.lo, 100 * std::exp(0.01 - z * lo), 1e-9);
  EXPECT_NEAR(m.hi, 100 * std::exp(0.01 + z * hi), 1e-9);
  // Wider than every source alone, narrower than their sum.
  EXPECT_LT(m.lo, m.structural.lo);
  EXPECT_GT(m.hi, m.structural.hi);
  EXPECT_LT(m.hi, 100 * std::exp(0.01 + z * (0.03 + 0.04 + 0.12)));
}

TEST(IntervalsTest, SampleBandIsASplitNormalAroundTheMedianDraw) {
  const double z = 1.0;
  // Symmetric draws: both sides the sample sd's size.
  const SourceBand b = SampleBand(10, {10 * std::exp(0.1), 10 * std::exp(-0.1)}, z);
  ASSERT_TRUE(b.applicable);
  EXPECT_NEAR(b.mean_log, 0, 1e-12);
  EXPECT_NEAR(b.sd_log, std::sqrt(0.02), 1e-12);  // n - 1 = 1
  EXPECT_NEAR(b.center_log, 0, 1e-12);
  EXPECT_NEAR(b.sd_log_lo, std::sqrt(0.02), 1e-12);  // = s at K = 2
  EXPECT_NEAR(b.lo, 10 * std::exp(-std::sqrt(0.02)), 1e-9);
  EXPECT_NEAR(b.hi, 10 * std::exp(std::sqrt(0.02)), 1e-9);
  // A draw that saturates the server (throughput a quarter of the point's)
  // widens the low side only: the high side stays within the draws' reach
  // (a symmetric band put throughput at 2.6x the offered rate).
  const SourceBand sat = SampleBand(4, {4.1, 4.05, 3.95, 1.0}, 1.645);
  EXPECT_LT(sat.hi, 4.2);
  EXPECT_LT(sat.lo, 1.5);
  // One usable sample (zeros and NaN skipped): nothing to estimate.
  const SourceBand one = SampleBand(10, {11, 0, std::nan("")}, z);
  EXPECT_FALSE(one.applicable);
  EXPECT_EQ(one.lo, 10);
  EXPECT_EQ(one.hi, 10);
}

TEST(IntervalsTest, RefusesLevelsOutsideZeroOneNamingTheFlag) {
  for (double level : {0.0, 1.0, -0.5, 1.5, std::nan("")}) {
    IntervalOptions o;
    o.level = level;
    const absl::Status st = ValidateIntervalOptions(o);
    EXPECT_FALSE(st.ok()) << level;
    EXPECT_NE(st.message().find("--interval:"), std::string::npos) << st.message();
  }
  IntervalOptions o;
  o.num_samples = 1;
  EXPECT_NE(ValidateIntervalOptions(o).message().find("--interval-samples"),
            std::string::npos);
  o.num_samples = 2;
  o.level = 0.5;
  EXPECT_TRUE(ValidateIntervalOptions(o).ok());
}

// A device without a profile is banded by the conformal quantile of every
// shipped profile's leave_one_device_out errors of the family, pooled (as
// validate's coverage bands its device-out predictions).
TEST(IntervalsTest, DatasheetOnlyBandIsThePooledDeviceOutQuantile) {
  for (const MetricInterval& m : IntervalMetrics(RunResult{}, {})) {
    for (double level : {0.5, 0.8, 0.9, 0.95}) {
      std::string why;
      const double none = StructuralSigma(nullptr, m.family, m.name, level, &why);
      EXPECT_THAT(why, ::testing::HasSubstr("pooled leave-one-device-out errors"))
          << m.name;
      std::vector<double> pooled;
      for (const std::string& name : ShippedProfileNames()) {
        absl::StatusOr<ResolvedProfile> rp = ResolveCalibrationProfile(name, "");
        ASSERT_TRUE(rp.ok() && rp->found) << name;
        for (const auto& se : rp->profile.structural_errors()) {
          if (se.pass() == "leave_one_device_out" && se.family() == m.family &&
              se.metric().empty()) {
            EXPECT_EQ(se.abs_log_errors_size(), se.num_points()) << name;
            pooled.insert(pooled.end(), se.abs_log_errors().begin(),
                          se.abs_log_errors().end());
          }
        }
      }
      ASSERT_FALSE(pooled.empty()) << m.family;
      EXPECT_NEAR(
          none, ConformalQuantile(pooled, level) / NormalQuantile(0.5 + level / 2), 1e-12)
          << m.name << " " << level;
    }
  }
}

// The structural sigma at a stored level reproduces that level's quantile
// (the band alone is exp(-+ q_L)), and a metric with its own entry uses it.
TEST(IntervalsTest, StructuralSigmaAtAStoredLevelIsItsQuantileOverZ) {
  servesim::proto::CalibrationProfile p;
  p.set_device("d");
  auto add = [&p](const std::string& metric, double q50, double q90) {
    auto* se = p.add_structural_errors();
    se->set_pass("refit_passes");
    se->set_family("ttft");
    se->set_metric(metric);
    se->set_num_points(10);
    se->set_rms_log_error(1.0);
    for (auto [level, q] : {std::pair{0.5, q50}, std::pair{0.9, q90}}) {
      auto* e = se->add_abs_log_error_quantiles();
      e->set_level(level);
      e->set_abs_log_error(q);
    }
  };
  add("", 0.1, 0.5);
  add("p99_ttft_ms", 0.2, 0.8);
  std::string why;
  EXPECT_NEAR(StructuralSigma(&p, "ttft", "mean_ttft_ms", 0.5, &why),
              0.1 / NormalQuantile(0.75), 1e-12);
  EXPECT_NEAR(StructuralSigma(&p, "ttft", "mean_ttft_ms", 0.9, &why),
              0.5 / NormalQuantile(0.95), 1e-12);
  EXPECT_NEAR(StructuralSigma(&p, "ttft", "p99_ttft_ms", 0.9, &why),
              0.8 / NormalQuantile(0.95), 1e-12);
  EXPECT_EQ(why, "d refit_passes p99_ttft_ms");
  // Between the levels: linear in the level; outside: the end value.
  const double s50 = 0.1 / NormalQuantile(0.75), s90 = 0.5 / NormalQuantile(0.95);
  EXPECT_NEAR(StructuralSigma(&p, "ttft", "p90_ttft_ms", 0.7, &why), 0.5 * (s50 + s90),
              1e-12);
  EXPECT_NEAR(StructuralSigma(&p, "ttft", "p90_ttft_ms", 0.99, &why), s90, 1e-12);
  EXPECT_NEAR(StructuralSigma(&p, "ttft", "p90_ttft_ms", 0.2, &why), s50, 1e-12);
}

proto::ExperimentConfig SmallT4() {
  proto::ExperimentConfig c;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(
      R"pb(
        server { device: "t4" model: "gemma-4-e2b" max_model_len: 2048 }
        client {
          num_prompts: 24
          random_input_len: 256
          random_output_len: 32
          max_concurrency: 4
          seed: 7
        }
      )pb",
      &c));
  return c;
}

std::string IntervalsJson(const IntervalReport& r) {
  JsonWriter w(2);
  w.BeginObject();
  WriteIntervalsJson(r, w);
  w.EndObject();
  return w.Take();
}

// `config`'s point run and its 90% intervals from `draws` draws of each
// source.
absl::StatusOr<IntervalReport> NinetyPercentIntervals(
    const proto::ExperimentConfig& config, int draws, uint64_t seed, int jobs = 1) {
  absl::StatusOr<ExperimentRun> run = RunExperiment(config);
  if (!run.ok()) return run.status();
  const ReportContext ctx = SimulateReportContext(config, *run, "20260101-000000");
  IntervalOptions o;
  o.level = 0.9;
  o.num_samples = draws;
  o.jobs = jobs;
  return ComputeIntervals(config, *run, ctx, o, seed);
}

// The same, failing the test (and giving an empty report) on an error.
IntervalReport NinetyPercentIntervalsOrFail(const proto::ExperimentConfig& config,
                                            int draws, uint64_t seed) {
  absl::StatusOr<IntervalReport> r = NinetyPercentIntervals(config, draws, seed);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : IntervalReport{};
}

TEST(IntervalsTest, ByteIdenticalWhateverTheThreadCountAndCoverThePoint) {
  const proto::ExperimentConfig config = SmallT4();
  absl::StatusOr<IntervalReport> one = NinetyPercentIntervals(config, 3, 7, 1);
  ASSERT_TRUE(one.ok()) << one.status();
  absl::StatusOr<IntervalReport> three = NinetyPercentIntervals(config, 3, 7, 3);
  ASSERT_TRUE(three.ok()) << three.status();
  EXPECT_EQ(IntervalsJson(*one), IntervalsJson(*three));
  EXPECT_EQ(one->num_parameter_samples, 3);  // t4 ships a profile with a covariance
  EXPECT_EQ(one->num_workload_seeds, 3);     // random dataset
  bool any_param_width = false;
  for (const MetricInterval& m : one->metrics) {
    if (!(m.point > 0)) continue;
    EXPECT_LE(m.lo, m.point) << m.name;
    EXPECT_GE(m.hi, m.point) << m.name;
    EXPECT_GT(m.structural.hi, m.structural.lo) << m.name;
    any_param_width |= m.parameters.hi > m.parameters.lo;
  }
  EXPECT_TRUE(any_param_width);
  // Another seed draws other parameters.
  absl::StatusOr<IntervalReport> other = NinetyPercentIntervals(config, 3, 8, 3);
  ASSERT_TRUE(other.ok());
  EXPECT_NE(IntervalsJson(*one), IntervalsJson(*other));
}

// A rate the step time is inversely proportional to is drawn in log space.
// The shipped L4 profile's GEMM efficiency is 0.61 +- 0.31 (its cells have
// 40-token prompts: prefill barely informs it); drawn as a normal it came
// near its 0.02 bound and the parameter band of output throughput on
// 1,024-token prompts reached down to 126 tok/s around 1,004 with 16 draws
// (18.7 with 4): a step 30x slower than the fit, and `plan --confidence`
// could not reach 0.9 with any fleet. Drawn in log space the band's low
// end is 505 tok/s.
TEST(IntervalsTest, EfficiencyDrawsAreMultiplicativeNotNearZero) {
  proto::ExperimentConfig c;
  c.mutable_server()->set_device("l4");
  c.mutable_server()->set_model("gemma-4-e2b");
  c.mutable_server()->set_quantization("w4a16-emb4");
  c.mutable_client()->set_num_prompts(100);
  absl::StatusOr<IntervalReport> r = NinetyPercentIntervals(c, 16, 0);  // the CLI's seed
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->num_parameter_samples, 16);
  bool seen = false;
  for (const MetricInterval& m : r->metrics) {
    if (m.name != "output_throughput") continue;
    seen = true;
    ASSERT_GT(m.point, 0);
    EXPECT_GT(m.parameters.lo, m.point / 3) << m.parameters.lo << " around " << m.point;
    EXPECT_LT(m.parameters.lo, m.point);  // the efficiency is still uncertain
  }
  EXPECT_TRUE(seen);
}

// A re-simulation that falls behind the offered rate is counted and said:
// E2B on a T4 offered 100 req/s of 256-token prompts saturates in every
// workload seed; at 0.5 req/s none does.
TEST(IntervalsTest, ReSimulationsThatFallBehindTheOfferedRateAreCounted) {
  for (const double rate : {100.0, 0.5}) {
    proto::ExperimentConfig config = SmallT4();
    config.mutable_client()->clear_max_concurrency();
    config.mutable_client()->set_request_rate(rate);
    config.mutable_client()->set_num_prompts(60);
    absl::StatusOr<IntervalReport> r = NinetyPercentIntervals(config, 3, 7, 1);
    ASSERT_TRUE(r.ok()) << r.status();
    const std::string text = IntervalsText(*r);
    if (rate > 1) {
      EXPECT_EQ(r->saturated_workload_seeds, 3);
      EXPECT_GT(r->least_served_request_rate, 0);
      EXPECT_LT(r->least_served_request_rate, 0.9 * rate);
      EXPECT_NE(text.find("SATURATES in "), std::string::npos) << text;
      EXPECT_NE(text.find("note: saturation: the server falls behind the offered 100 "
                          "req/s in "),
                std::string::npos)
          << text;
      EXPECT_NE(IntervalsJson(*r).find("\"workload\": 3"), std::string::npos);
    } else {
      EXPECT_EQ(r->saturated_parameter_samples + r->saturated_workload_seeds, 0);
      EXPECT_EQ(text.find("SATURATES"), std::string::npos) << text;
    }
  }
}

// The rule: under 90% of the offered rate with a queue past T / 9.
TEST(SaturationTest, LowRateCountsOnlyWithAGrowingQueue) {
  // 100 prompts at 10 req/s: T = 10 s, so a p99 queue past 1.11 s grows.
  EXPECT_FALSE(FallsBehind(10, 100, 9.5, 5000.0, std::nullopt).falls_behind);
  EXPECT_FALSE(FallsBehind(10, 100, 5, 900.0, std::nullopt).falls_behind);  // drain
  EXPECT_TRUE(FallsBehind(10, 100, 5, 2000.0, std::nullopt).falls_behind);
  EXPECT_TRUE(FallsBehind(10, 100, 5, std::nullopt, std::nullopt).falls_behind);
  const Saturation client = FallsBehind(10, 100, 5, 10.0, 3000.0);
  EXPECT_TRUE(client.falls_behind);
  EXPECT_TRUE(client.at_client);
  // A burst or a closed loop has no offered rate to fall behind.
  EXPECT_FALSE(FallsBehind(HUGE_VAL, 100, 1, std::nullopt, std::nullopt).falls_behind);
  EXPECT_FALSE(FallsBehind(0, 100, 1, std::nullopt, std::nullopt).falls_behind);
}

// The sigma at `level` (a stored level) of the shipped profile of `device`'s
// leave_one_device_out entry of `family`; 0 when it has none.
double OwnDeviceOutSigma(const std::string& device, const std::string& family,
                         double level) {
  absl::StatusOr<ResolvedProfile> rp = ResolveCalibrationProfile("", device);
  if (!rp.ok() || !rp->found) return 0;
  for (const auto& se : rp->profile.structural_errors()) {
    if (se.pass() != "leave_one_device_out" || se.family() != family ||
        !se.metric().empty()) {
      continue;
    }
    for (const auto& q : se.abs_log_error_quantiles()) {
      if (std::abs(q.level() - level) < 1e-12) {
        return q.abs_log_error() / NormalQuantile(0.5 + level / 2);
      }
    }
  }
  return 0;
}

// A copy of a shipped device file that the catalog takes for another
// device (no shipped profile: priors by rule) and that predicts the same:
// its board power, which no model reads, one watt more. (A comment or a
// price does not make another device: content_hash leaves them out.)
std::string AnotherDevice(const std::string& text) {
  const size_t at = text.find("\nboard_power_w: ");
  if (at == std::string::npos) return text + "\nboard_power_w: 1\n";
  const size_t start = at + std::string("\nboard_power_w: ").size();
  const size_t end = text.find_first_not_of("0123456789.e", start);
  const double w = std::stod(text.substr(start, end - start));
  return text.substr(0, start) + absl::StrCat(w + 1) + text.substr(end);
}

// "Widen for a datasheet-only device": the same device and workload
// predicted without its profile (an edited copy of its device file: priors
// by rule) gets a wider interval than with it on every metric. The
// datasheet prediction draws its step parameters from their priors (its
// own source, prior_parameters), and its structural band is at least the
// device's own leave-one-device-out band (its measured error when
// predicted from the other devices' priors). l4 and tpu-v6e: tpu-v6e's
// calibrated TTFT and p99 ITL bands are its own large refit errors, the
// case that was narrower before the prior draws. K = 32 draws: the
// claim is about the distributions, and at the default K = 4 a band is a
// four-draw estimate (tpu-v6e's fitted flops_eff_gemm has a std error of
// 0.41 inside its bounds [0.02, 1], so four draws of either kind can land
// wide or narrow).
TEST(IntervalsTest, DatasheetOnlyPredictionIsWiderOnEveryMetric) {
  for (const std::string device : {"l4", "tpu-v6e"}) {
    absl::StatusOr<std::string> text = DeviceFileText(device);
    ASSERT_TRUE(text.ok()) << text.status();
    const std::string path = ::testing::TempDir() + "/" + device + "-datasheet.textproto";
    {
      std::ofstream out(path, std::ios::binary | std::ios::trunc);
      out << AnotherDevice(*text);
    }
    auto intervals = [](const std::string& dev) {
      proto::ExperimentConfig c = SmallT4();
      c.mutable_server()->set_device(dev);
      return NinetyPercentIntervalsOrFail(c, 32, 7);
    };
    const IntervalReport calibrated = intervals(device);
    const IntervalReport datasheet = intervals(path);
    EXPECT_EQ(calibrated.num_parameter_samples, 32) << device;
    EXPECT_EQ(calibrated.num_prior_samples, 0) << device;
    EXPECT_EQ(datasheet.num_parameter_samples, 0) << device;
    EXPECT_EQ(datasheet.num_prior_samples, 32) << device;
    ASSERT_EQ(calibrated.metrics.size(), datasheet.metrics.size());
    int compared = 0;
    for (size_t i = 0; i < calibrated.metrics.size(); ++i) {
      const MetricInterval& c = calibrated.metrics[i];
      const MetricInterval& d = datasheet.metrics[i];
      ASSERT_EQ(c.name, d.name);
      if (!(c.point > 0 && d.point > 0)) continue;  // e.g. no preemptions
      ++compared;
      EXPECT_GT(std::log(d.hi / d.lo), std::log(c.hi / c.lo)) << device << " " << c.name;
      EXPECT_FALSE(c.prior_parameters.applicable) << device << " " << c.name;
      EXPECT_FALSE(d.parameters.applicable) << device << " " << c.name;
      EXPECT_GE(d.structural.sd_log, OwnDeviceOutSigma(device, d.family, 0.9))
          << device << " " << c.name;
    }
    EXPECT_GE(compared, 18) << device;
    EXPECT_GT(OwnDeviceOutSigma(device, "throughput", 0.9), 0) << device;
    // The priors move the step time: a band of their own on throughput.
    EXPECT_GT(datasheet.metrics[1].prior_parameters.sd_log, 0) << device;
  }
}

// A fleet mixing a calibrated and a datasheet-only deployment draws both
// kinds of parameters in the same K runs (reported as "parameters"), so it
// runs 2K + 1 simulations like a fleet of one kind, not 3K + 1 (the 10x
// cost bound). The mixed fleet's parameter band is at least as wide as the
// same fleet's with both deployments calibrated: the datasheet copy's
// priors are drawn in it.
TEST(IntervalsTest, MixedFleetDrawsFittedAndPriorParametersInTheSameRuns) {
  absl::StatusOr<std::string> text = DeviceFileText("l4");
  ASSERT_TRUE(text.ok()) << text.status();
  const std::string path = ::testing::TempDir() + "/l4-mixed-datasheet.textproto";
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << AnotherDevice(*text);
  }
  auto intervals = [](const std::string& second) {
    proto::ExperimentConfig c = SmallT4();
    c.clear_server();
    for (const std::string& dev : {std::string("l4"), second}) {
      proto::ServerConfig* s = c.mutable_fleet()->add_replicas()->mutable_server();
      s->set_device(dev);
      s->set_model("gemma-4-e2b");
      s->set_max_model_len(2048);
    }
    return NinetyPercentIntervalsOrFail(c, 4, 7);
  };
  const IntervalReport mixed = intervals(path);
  EXPECT_EQ(mixed.num_parameter_samples, 4);
  EXPECT_EQ(mixed.num_prior_samples, 0);
  EXPECT_EQ(mixed.num_workload_seeds, 4);
  const IntervalReport both = intervals("l4");
  ASSERT_EQ(mixed.metrics.size(), both.metrics.size());
  // Output throughput (index 1): the priors of the datasheet copy widen it.
  EXPECT_GT(mixed.metrics[1].parameters.sd_log, both.metrics[1].parameters.sd_log);
  for (const MetricInterval& m : mixed.metrics) {
    EXPECT_FALSE(m.prior_parameters.applicable) << m.name;
  }
  bool named = false;
  for (const std::string& n : mixed.notes) {
    named |= absl::StrContains(n, "(priors)") && absl::StrContains(n, "a mixed fleet");
  }
  EXPECT_TRUE(named);
}

// A tpu-v5e profile fitted here (not the shipped one) on the write-up's
// cells of run tpu-v5e-e2b-2026-08-06 whose id ends in one of `cells`
// ("in128/c1", ...), every graded metric of each; written to a temp file.
// Its block errors are cleared: both profiles then take the same pooled
// device-out structural band, so only the parameter draws differ.
std::string FitV5eProfile(const std::vector<std::string>& cells,
                          const std::string& name) {
  const std::string root = SERVESIM_SOURCE_DIR;
  absl::StatusOr<MeasurementDb> all = MeasurementDb::LoadDir(root + "/calibration/data");
  EXPECT_TRUE(all.ok()) << all.status();
  if (!all.ok()) return "";
  const std::string run_id = "tpu-v5e-e2b-2026-08-06";
  servesim::proto::MeasurementSet set;
  for (const auto& r : all->runs()) {
    if (r.id() == run_id) *set.add_runs() = r;
  }
  int kept = 0;
  for (const auto& m : all->measurements()) {
    if (m.run() != run_id) continue;
    for (const std::string& c : cells) {
      if (m.id().size() > c.size() + 1 &&
          m.id().compare(m.id().size() - c.size() - 1, std::string::npos, "/" + c) == 0) {
        *set.add_measurements() = m;
        ++kept;
      }
    }
  }
  EXPECT_GE(kept, 7 * static_cast<int>(cells.size())) << name;
  absl::StatusOr<MeasurementDb> db = MeasurementDb::FromSets({set}, name);
  EXPECT_TRUE(db.ok()) << db.status();
  absl::StatusOr<servesim::proto::FitConfig> fc =
      LoadFitConfig(root + "/" + kDefaultFitConfig);
  EXPECT_TRUE(fc.ok()) << fc.status();
  ValidateOptions o;
  o.device = "tpu-v5e";
  o.skip_loo = true;
  o.shipped_data_checks = false;
  absl::StatusOr<ValidationReport> rep = RunValidation(*db, *fc, o);
  EXPECT_TRUE(rep.ok()) << rep.status();
  if (!rep.ok() || rep->groups.size() != 1) {
    ADD_FAILURE() << name << ": expected one fitted group";
    return "";
  }
  EXPECT_GT(rep->groups[0].num_fit_points, 0) << name;
  servesim::proto::CalibrationProfile prof =
      MakeProfile(rep->groups[0], rep->points, *db);
  prof.clear_structural_errors();
  EXPECT_GT(prof.covariance().names_size(), 0) << name;
  const std::string path = ::testing::TempDir() + "/" + name + ".textproto";
  const absl::Status st = WriteProfile(prof, path);
  EXPECT_TRUE(st.ok()) << st;
  return path;
}

// "Intervals shrink when the calibration has more data": the same device
// (tpu-v5e) fitted on 4 and on 12 of its cells (the 4 among the 12: the
// shortest and longest input at the lowest and highest concurrency), then
// one workload predicted with each profile. A replayed trace has no
// workload source, and the structural band is the same for both
// (FitV5eProfile), so the combined interval differs only by the parameter
// draws (same normal draws, other covariances, 16 draws): the parameter
// band is narrower with 12 cells on every metric, about sqrt(3) narrower
// for most (log sd ratio 0.55-0.66 when last measured, 2026-12-08, with
// the efficiencies drawn in log space), and wherever it is a quarter
// narrower or more the combined band is narrower too. The exception is
// the p99 ITL of 40 replayed requests (ratio 0.90): a tail that one
// prefill stall sets, more by which requests overlap than by the step
// time. The fitted parameters move the step time, so the parameter band
// of every TTFT shrinks by much (mean TTFT's log sd 0.074 -> 0.034 when
// last measured). The combined TTFT band shrinks only a little (log width
// 1.23 -> 1.20), because the structural band (log sd 0.36, the same for
// both) dominates it once the four cells alone determine the parameters
// well, as they do since the sweep's prefix hits are simulated (before,
// 0.50 -> 0.14 and the combined band shrank by a fifth). The token
// throughputs, request throughput and $/Mtok shrink only a little (0.0050
// -> 0.0028), because the trace's arrival times fix them at a rate the
// device keeps up with: the parameters move them only through the drain
// after the last arrival.
TEST(IntervalsTest, IntervalShrinksWithMoreCalibrationCells) {
  const std::string four =
      FitV5eProfile({"in128/c1", "in128/c64", "in8192/c1", "in8192/c64"}, "v5e-4-cells");
  std::vector<std::string> all;
  for (const char* len : {"in128", "in1024", "in8192"}) {
    for (const char* c : {"c1", "c4", "c16", "c64"})
      all.push_back(absl::StrCat(len, "/", c));
  }
  const std::string twelve = FitV5eProfile(all, "v5e-12-cells");
  ASSERT_FALSE(four.empty() || twelve.empty());
  auto intervals = [](const std::string& profile) {
    proto::ExperimentConfig c;
    c.mutable_server()->set_device("tpu-v5e");
    c.mutable_server()->set_model("gemma-4-e2b");
    c.mutable_server()->set_calibration_profile(profile);
    c.mutable_client()->set_trace(std::string(SERVESIM_DATA_DIR) +
                                  "/traces/AzureLLMInferenceTrace_conv.csv.gz");
    c.mutable_client()->set_num_prompts(40);
    c.mutable_client()->set_seed(5);
    return NinetyPercentIntervalsOrFail(c, 16, 11);
  };
  const IntervalReport r4 = intervals(four);
  const IntervalReport r12 = intervals(twelve);
  ASSERT_EQ(r4.num_parameter_samples, 16);
  ASSERT_EQ(r12.num_parameter_samples, 16);
  EXPECT_EQ(r4.num_workload_seeds, 0);  // a trace
  ASSERT_EQ(r4.metrics.size(), r12.metrics.size());
  int compared = 0;
  int clearly_narrower = 0;
  for (size_t i = 0; i < r4.metrics.size(); ++i) {
    const MetricInterval& a = r4.metrics[i];
    const MetricInterval& b = r12.metrics[i];
    ASSERT_EQ(a.name, b.name);
    if (!(a.point > 0 && b.point > 0)) continue;
    EXPECT_NEAR(a.structural.sd_log, b.structural.sd_log, 1e-12) << a.name;
    ++compared;
    EXPECT_GT(b.parameters.sd_log, 0) << a.name;
    EXPECT_LT(b.parameters.sd_log, a.parameters.sd_log) << a.name;
    // The structural band is the same: a parameter band a quarter
    // narrower or more makes the combined band narrower.
    if (b.parameters.sd_log < 0.75 * a.parameters.sd_log) {
      ++clearly_narrower;
      EXPECT_LT(std::log(b.hi / b.lo), std::log(a.hi / a.lo)) << a.name;
    }
    if (a.family == "ttft") {  // by much where the step time is the metric
      EXPECT_LT(b.parameters.sd_log, 0.75 * a.parameters.sd_log) << a.name;
    }
  }
  EXPECT_GE(compared, 20);
  EXPECT_GE(clearly_narrower, 20);
}

}  // namespace
}  // namespace servesim
