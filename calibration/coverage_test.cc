#include "calibration/coverage.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace servesim {
namespace {

// A graded throughput point of `device` in input-length block `block`,
// held out with log error `log_err`.
ValidatedPoint Point(const std::string& device, const std::string& block,
                     double log_err) {
  ValidatedPoint v;
  v.id = device + "/" + block;
  v.device = device;
  v.software_build = "b";
  v.metric = "output_throughput";
  v.measured = 100;
  v.block_held_out[kLeaveOneInputLengthOut] = 100 * std::exp(log_err);
  v.block_of[kLeaveOneInputLengthOut] = block;
  return v;
}

TEST(CoverageTest, BandOfAHeldOutPointIsSizedWithoutItsOwnBlock) {
  ValidationReport r;
  // Block in128 errs by 0.1, block in256 by 0.3: the in128 points get the
  // band of in256 (sigma 0.3, inside both intervals), the in256 points the
  // band of in128 (sigma 0.1: 0.3 > 1.645 x 0.1, outside both).
  r.points = {Point("d", "in128", 0.1), Point("d", "in128", -0.1),
              Point("d", "in256", 0.3), Point("d", "in256", -0.3)};
  const CoverageReport c = ComputeCoverage(r);
  ASSERT_EQ(c.metrics.size(), 1u);
  EXPECT_EQ(c.metrics[0].metric, "output_throughput");
  EXPECT_EQ(c.metrics[0].num_predictions, 4);
  EXPECT_DOUBLE_EQ(c.metrics[0].coverage_50, 0.5);
  EXPECT_DOUBLE_EQ(c.metrics[0].coverage_90, 0.5);
  EXPECT_EQ(c.overall.num_predictions, 4);
}

TEST(CoverageTest, FiftyAndNinetyPercentBandsAreTheConformalQuantiles) {
  ValidationReport r;
  // in256's |errors| 0.05, 0.1, 0.15, 0.2, 0.4: the in128 point's band is
  // 0.15 at 50% (3rd of 5) and 0.4 at 90% (6th, capped at the 5th); its
  // error 0.3 is outside the first, inside the second. The in256 points'
  // band is in128's 0.3: all inside but 0.4.
  r.points = {Point("d", "in128", 0.3),  Point("d", "in256", 0.05),
              Point("d", "in256", -0.1), Point("d", "in256", 0.15),
              Point("d", "in256", -0.2), Point("d", "in256", 0.4)};
  const CoverageReport c = ComputeCoverage(r);
  ASSERT_EQ(c.metrics.size(), 1u);
  EXPECT_EQ(c.metrics[0].num_predictions, 6);
  EXPECT_DOUBLE_EQ(c.metrics[0].coverage_50, 4.0 / 6);
  EXPECT_DOUBLE_EQ(c.metrics[0].coverage_90, 5.0 / 6);
}

// The regression: an rms-sized band (z x rms) let one large
// miss widen the 50% band past most errors; the quantile band does not.
TEST(CoverageTest, OneLargeMissDoesNotWidenTheFiftyPercentBand) {
  ValidationReport r;
  // in256: four errors of 0.1 and one of 2.0 (rms 0.899, 0.674 x rms =
  // 0.606); the conformal 50% band is 0.1, so the in128 error 0.3 is
  // outside it.
  r.points = {Point("d", "in128", 0.3),  Point("d", "in256", 0.1),
              Point("d", "in256", -0.1), Point("d", "in256", 0.1),
              Point("d", "in256", -0.1), Point("d", "in256", 2.0)};
  const CoverageReport c = ComputeCoverage(r);
  ASSERT_EQ(c.metrics.size(), 1u);
  // in128's point: outside at 50%; the in256 points (band 0.3): four inside.
  EXPECT_DOUBLE_EQ(c.metrics[0].coverage_50, 4.0 / 6);
  EXPECT_DOUBLE_EQ(c.metrics[0].median_half_50, 0.3);
}

TEST(CoverageTest, ConformalQuantileIsTheCeilNPlusOneTimesLevelSmallest) {
  const std::vector<double> x = {10, 1, 9, 2, 8, 3, 7, 4, 6, 5};
  EXPECT_DOUBLE_EQ(ConformalQuantile(x, 0.5), 6);    // ceil(5.5) = 6th
  EXPECT_DOUBLE_EQ(ConformalQuantile(x, 0.9), 10);   // ceil(9.9) = 10th
  EXPECT_DOUBLE_EQ(ConformalQuantile(x, 0.95), 10);  // 11th: capped
  EXPECT_DOUBLE_EQ(ConformalQuantile({4}, 0.5), 4);
  EXPECT_DOUBLE_EQ(ConformalQuantile({}, 0.5), 0);
}

TEST(CoverageTest, AMetricWithEnoughErrorsGetsItsOwnBand) {
  ValidationReport r;
  // Two metrics of the tpot family: median ITL errs by 0.01 in every block,
  // p99 ITL by 1.0. With five errors outside the block, each metric's band
  // is its own: every prediction is inside both intervals.
  for (const char* block : {"in128", "in256", "in512", "in1024", "in2048", "in4096"}) {
    for (auto [metric, err] :
         {std::pair{"median_itl_ms", 0.01}, std::pair{"p99_itl_ms", 1.0}}) {
      ValidatedPoint v = Point("d", block, err);
      v.metric = metric;
      r.points.push_back(v);
    }
  }
  const CoverageReport c = ComputeCoverage(r);
  ASSERT_EQ(c.metrics.size(), 2u);
  for (const MetricCoverage& m : c.metrics) {
    EXPECT_EQ(m.num_predictions, 6) << m.metric;
    EXPECT_DOUBLE_EQ(m.coverage_50, 1.0) << m.metric;
  }
  EXPECT_NEAR(c.metrics[0].median_half_50, 0.01, 1e-12);  // median_itl_ms
  EXPECT_NEAR(c.metrics[1].median_half_50, 1.0, 1e-12);
  // The profile's entries: per pass and family, pooled per family, pooled
  // per metric (six errors each, at least kMinMetricErrors).
  const auto entries = StructuralErrors(r.points, "d", "b");
  ASSERT_EQ(entries.size(), 4u);
  EXPECT_EQ(entries[0].pass(), kLeaveOneInputLengthOut);
  EXPECT_EQ(entries[1].pass(), kPooledRefitPasses);
  EXPECT_EQ(entries[1].metric(), "");
  EXPECT_EQ(entries[1].num_points(), 12);
  EXPECT_EQ(entries[2].metric(), "median_itl_ms");
  EXPECT_EQ(entries[3].metric(), "p99_itl_ms");
  EXPECT_NEAR(StructuralQuantileAt(entries[3], 0.9), 1.0, 1e-12);
  EXPECT_EQ(StructuralQuantileAt(entries[3], 0.7), -1);
}

TEST(CoverageTest, DeviceOutBandComesFromTheOtherDevices) {
  ValidationReport r;
  auto dev_out = [](const std::string& device, double log_err) {
    ValidatedPoint v;
    v.device = device;
    v.software_build = "b";
    v.metric = "mean_ttft_ms";
    v.measured = 10;
    v.block_held_out[kLeaveOneDeviceOut] = 10 * std::exp(log_err);
    v.block_of[kLeaveOneDeviceOut] = device;
    return v;
  };
  // a's error 0.5 against b's sigma 0.2 (0.5 > 0.329: outside); b's error
  // 0.2 against a's sigma 0.5 (inside both).
  r.points = {dev_out("a", 0.5), dev_out("b", 0.2)};
  const CoverageReport c = ComputeCoverage(r);
  ASSERT_EQ(c.metrics.size(), 1u);
  EXPECT_EQ(c.metrics[0].num_predictions, 2);
  EXPECT_DOUBLE_EQ(c.metrics[0].coverage_90, 0.5);
  EXPECT_DOUBLE_EQ(c.metrics[0].coverage_50, 0.5);
}

// decode_rate: a metric with too few errors of its own on a
// device borrowed its family's, there other metrics' (output throughput
// under load, errors 5x larger), and its 50% band covered 94%. Now the
// same metric's refit errors on the other devices join its own first.
TEST(CoverageTest, AMetricWithFewErrorsBorrowsTheSameMetricElsewhereNotItsFamily) {
  ValidationReport r;
  auto point = [&r](const std::string& device, const std::string& metric,
                    const std::string& block, double log_err) {
    ValidatedPoint v = Point(device, block, log_err);
    v.metric = metric;
    r.points.push_back(v);
  };
  point("a", "decode_rate", "in128", 0.1);
  point("a", "decode_rate", "in256", 0.1);
  for (const char* block : {"in512", "in1024", "in2048", "in4096"}) {
    point("a", "output_throughput", block, 0.5);
  }
  for (const char* block : {"in128", "in256", "in512", "in1024", "in2048"}) {
    point("b", "decode_rate", block, 0.01);
  }
  const CoverageReport c = ComputeCoverage(r);
  ASSERT_EQ(c.metrics.size(), 2u);
  const MetricCoverage& decode = c.metrics[0];
  EXPECT_EQ(decode.metric, "decode_rate");
  EXPECT_EQ(decode.num_predictions, 7);
  // a's two: band {0.1, 0.01 x 5}, 50% = 4th smallest = 0.01: outside;
  // b's five: band {0.01 x 4, 0.1 x 2}, 0.01: inside. (Family band: 0.5,
  // all inside.)
  EXPECT_DOUBLE_EQ(decode.coverage_50, 5.0 / 7);
  EXPECT_DOUBLE_EQ(decode.coverage_90, 1.0);
  // The profile of a stores that pooled metric entry (2 + 5 errors).
  bool found = false;
  for (const auto& se : StructuralErrors(r.points, "a", "b")) {
    if (se.metric() != "decode_rate") continue;
    found = true;
    EXPECT_EQ(se.num_points(), 7);
    EXPECT_NEAR(StructuralQuantileAt(se, 0.5), 0.01, 1e-12);
  }
  EXPECT_TRUE(found);
  // The family row pools both metrics.
  ASSERT_EQ(c.families.size(), 1u);
  EXPECT_EQ(c.families[0].metric, "throughput");
  EXPECT_EQ(c.families[0].num_predictions, 11);
}

// A device predicted from priors is banded as simulate bands a device
// without a profile: the conformal quantile of the OTHER devices'
// leave_one_device_out errors of the family, pooled; its own device-out
// error and the other devices' own refit bands do not enter.
TEST(CoverageTest, DeviceOutBandIsThePooledQuantileOfTheOtherDevices) {
  ValidationReport r;
  auto dev_out = [&r](const std::string& device, double log_err) {
    ValidatedPoint v;
    v.device = device;
    v.software_build = "b";
    v.metric = "mean_ttft_ms";
    v.measured = 10;
    v.block_held_out[kLeaveOneDeviceOut] = 10 * std::exp(log_err);
    v.block_of[kLeaveOneDeviceOut] = device;
    r.points.push_back(v);
  };
  // a's device-out error 0.5; b's 0.1 and 0.2; c's 0.3.
  dev_out("a", 0.5);
  dev_out("b", 0.1);
  dev_out("b", 0.2);
  dev_out("c", 0.3);
  // b's own refit errors of the metric: 1.0 in five blocks (they would
  // widen a's band under a widest-band rule).
  for (const char* block : {"in128", "in256", "in512", "in1024", "in2048"}) {
    ValidatedPoint v = Point("b", block, 1.0);
    v.metric = "mean_ttft_ms";
    r.points.push_back(v);
  }
  const CoverageReport c = ComputeCoverage(r);
  ASSERT_EQ(c.metrics.size(), 1u);
  // 4 device-out predictions and b's 5 refit predictions.
  EXPECT_EQ(c.metrics[0].num_predictions, 9);
  // Device-out at 50%: a against {0.1, 0.2, 0.3} -> q 0.2: outside; b
  // against {0.3, 0.5} -> 0.5: both inside; c against {0.1, 0.2, 0.5} ->
  // 0.2: outside. b's refit predictions (1.0 against its other blocks'
  // 1.0): inside. 2 + 5 of 9.
  EXPECT_NEAR(c.metrics[0].coverage_50, 7.0 / 9.0, 1e-12);
}

// kMinJudgedPredictions is what its comment says: from it on an exactly
// calibrated interval lands in both targets with probability >= 0.9, and
// not at the n just below.
TEST(CoverageTest, RowsAreJudgedFromTheBinomialMinimumOn) {
  for (int n = kMinJudgedPredictions; n <= 1000; ++n) {
    EXPECT_GE(CalibratedInTargetProbability(n, kTarget50), 0.9) << n;
    EXPECT_GE(CalibratedInTargetProbability(n, kTarget90), 0.9) << n;
  }
  const int below = kMinJudgedPredictions - 1;
  EXPECT_LT(std::min(CalibratedInTargetProbability(below, kTarget50),
                     CalibratedInTargetProbability(below, kTarget90)),
            0.9);
  EXPECT_NEAR(CalibratedInTargetProbability(18, kTarget50), 0.519, 0.001);
  // Wilson 95%: 9 of 18 -> [0.290, 0.710]; 0 of 3 -> [0, 0.561].
  EXPECT_NEAR(WilsonInterval(9, 18).first, 0.29031, 1e-5);
  EXPECT_NEAR(WilsonInterval(9, 18).second, 0.70969, 1e-5);
  EXPECT_NEAR(WilsonInterval(0, 3).first, 0, 1e-12);
  EXPECT_NEAR(WilsonInterval(0, 3).second, 0.56150, 1e-5);
}

TEST(CoverageTest, ASmallRowIsPrintedTooFewToJudgeAndCountsInItsFamily) {
  ValidationReport r;
  r.points = {Point("d", "in128", 0.1), Point("d", "in256", 0.3)};
  const CoverageReport c = ComputeCoverage(r);
  ASSERT_EQ(c.metrics.size(), 1u);
  EXPECT_FALSE(c.metrics[0].judged);
  EXPECT_FALSE(c.metrics[0].in_target);
  const std::string text = FormatCoverageText(c);
  EXPECT_NE(text.find("output_throughput"), std::string::npos);
  EXPECT_NE(text.find("too few to judge (n < 74; 95%: [9, 91]%, [9, 91]%)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("family:throughput"), std::string::npos) << text;
  const std::string json = FormatCoverageJson(c);
  EXPECT_NE(json.find(R"("family:throughput":{"num_predictions":2)"), std::string::npos)
      << json;
  EXPECT_NE(json.find(R"("judged":false)"), std::string::npos) << json;
}

}  // namespace
}  // namespace servesim
