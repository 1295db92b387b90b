#include "experiments/capacity/intervals.h"

#include <cmath>
#include <string>

#include "experiments/capacity/simulate_report.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "hwmodels/calibration_profile.h"
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

TEST(IntervalsTest, SourcesCombineByAddingLogVariancesAndMeans) {
  const double z = NormalQuantile(0.95);
  MetricInterval m;
  m.point = 100;
  m.parameters.mean_log = 0.01;
  m.parameters.sd_log = 0.03;
  m.workload.mean_log = 0.5;  // left out: the point is one workload draw
  m.workload.sd_log = 0.04;
  m.structural = LogNormalBand(100, 0.12, z);
  CombineSources(z, &m);
  const double sd = std::sqrt(0.03 * 0.03 + 0.04 * 0.04 + 0.12 * 0.12);  // 0.13
  EXPECT_NEAR(m.lo, 100 * std::exp(0.01 - z * sd), 1e-9);
  EXPECT_NEAR(m.hi, 100 * std::exp(0.01 + z * sd), 1e-9);
  // Wider than every source alone, narrower than their sum.
  EXPECT_LT(m.lo, m.structural.lo);
  EXPECT_GT(m.hi, m.structural.hi);
  EXPECT_GT(m.hi, 100 * std::exp(0.01 + z * 0.12));
  EXPECT_LT(m.hi, 100 * std::exp(0.01 + z * (0.03 + 0.04 + 0.12)));
}

TEST(IntervalsTest, SampleBandIsMeanAndSampleSdOfLogRatios) {
  const double z = 1.0;
  const SourceBand b = SampleBand(10, {10 * std::exp(0.1), 10 * std::exp(-0.1)}, z);
  ASSERT_TRUE(b.applicable);
  EXPECT_NEAR(b.mean_log, 0, 1e-12);
  EXPECT_NEAR(b.sd_log, std::sqrt(0.02), 1e-12);  // n - 1 = 1
  EXPECT_NEAR(b.lo, 10 * std::exp(-std::sqrt(0.02)), 1e-9);
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

TEST(IntervalsTest, DatasheetOnlyDeviceGetsTheWidestStructuralBand) {
  for (const char* family : {"throughput", "ttft", "tpot"}) {
    std::string why;
    const double none = StructuralSigma(nullptr, family, &why);
    EXPECT_GT(none, 0) << family;
    for (const std::string& name : ShippedProfileNames()) {
      absl::StatusOr<ResolvedProfile> rp = ResolveCalibrationProfile(name, "");
      ASSERT_TRUE(rp.ok() && rp->found) << name;
      const double own = StructuralSigma(&rp->profile, family, &why);
      EXPECT_LE(own, none) << name << " " << family << ": " << why;
    }
  }
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

TEST(IntervalsTest, ByteIdenticalWhateverTheThreadCountAndCoverThePoint) {
  const proto::ExperimentConfig config = SmallT4();
  absl::StatusOr<ExperimentRun> run = RunExperiment(config);
  ASSERT_TRUE(run.ok()) << run.status();
  const ReportContext ctx = SimulateReportContext(config, *run, "20260101-000000");
  IntervalOptions o;
  o.level = 0.9;
  o.num_samples = 3;
  o.jobs = 1;
  absl::StatusOr<IntervalReport> one = ComputeIntervals(config, *run, ctx, o, 7);
  ASSERT_TRUE(one.ok()) << one.status();
  o.jobs = 3;
  absl::StatusOr<IntervalReport> three = ComputeIntervals(config, *run, ctx, o, 7);
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
  absl::StatusOr<IntervalReport> other = ComputeIntervals(config, *run, ctx, o, 8);
  ASSERT_TRUE(other.ok());
  EXPECT_NE(IntervalsJson(*one), IntervalsJson(*other));
}

}  // namespace
}  // namespace servesim
