#include "calibration/coverage.h"

#include <cmath>
#include <string>

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

TEST(CoverageTest, FiftyAndNinetyPercentBandsDiffer) {
  ValidationReport r;
  // Other block's sigma 0.1; errors 0.1 (inside 90%: 0.1645, outside 50%:
  // 0.0674).
  r.points = {Point("d", "in128", 0.1), Point("d", "in256", 0.1),
              Point("d", "in256", -0.1)};
  const CoverageReport c = ComputeCoverage(r);
  ASSERT_EQ(c.metrics.size(), 1u);
  EXPECT_DOUBLE_EQ(c.metrics[0].coverage_90, 1.0);
  EXPECT_DOUBLE_EQ(c.metrics[0].coverage_50, 0.0);
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

}  // namespace
}  // namespace servesim
