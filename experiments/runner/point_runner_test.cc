// The simulator's point runner: its metric names and values.
#include "experiments/runner/point_runner.h"

#include <algorithm>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace servesim {
namespace {

TEST(SimulatorMetricsTest, OneValuePerNameInOrder) {
  RunResult r;
  r.completed = 7;
  r.output_throughput = 123.5;
  r.ttft.p99_ms = 42;
  r.batch_size[0] = 3.5;
  const std::vector<double> v = SimulatorMetrics(r);
  const auto& names = SimulatorMetricNames();
  ASSERT_EQ(v.size(), names.size());
  auto at = [&](const std::string& n) {
    return v[std::find(names.begin(), names.end(), n) - names.begin()];
  };
  EXPECT_EQ(at("completed"), 7);
  EXPECT_EQ(at("output_throughput"), 123.5);
  EXPECT_EQ(at("p99_ttft_ms"), 42);
  EXPECT_EQ(at("batch_size_mean"), 3.5);
}

}  // namespace
}  // namespace servesim
