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

// A point of 2^31 - 1 prompts sent at once needs about 3 TB: refused before
// it runs (a sweep or plan point of 2e8 prompts grew until the machine was
// out of memory), naming the field and the estimate.
TEST(SimulatorPointRunnerTest, APointTooLargeForThisMachineIsRefusedBeforeItRuns) {
  proto::ExperimentConfig c;
  c.mutable_server()->set_device("l4");
  c.mutable_server()->set_model("gemma-4-e2b");
  c.mutable_client()->set_num_prompts(2147483647);
  c.mutable_client()->set_random_input_len(16);
  c.mutable_client()->set_random_output_len(2);
  const double need = EstimateRunBytes(c, false);
  EXPECT_GT(need, 2.7e12);
  if (PhysicalMemoryBytes() > need) GTEST_SKIP() << "a machine with over 3 TB of memory";
  auto r = SimulatorPointRunner().run(c);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("client.num_prompts 2147483647: the point needs at "
                                      "least"),
            std::string::npos)
      << r.status();
}

}  // namespace
}  // namespace servesim
