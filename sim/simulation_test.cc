#include "sim/simulation.h"

#include <cmath>
#include <limits>
#include <memory>
#include <vector>

#include "gtest/gtest.h"
#include "sim/analytic_step_model.h"
#include "sim/vector_source.h"

namespace servesim {
namespace {

RequestSpec Req(int32_t in, int32_t out) {
  RequestSpec s;
  s.input_tokens = in;
  s.output_tokens = out;
  return s;
}

SimulationSpec OneReplica(const StepTimeModel* model) {
  SimulationSpec spec;
  ReplicaConfig rc;
  rc.scheduler.max_num_batched_tokens = 2048;
  rc.scheduler.max_num_seqs = 256;
  rc.scheduler.max_model_len = 1 << 20;
  rc.scheduler.async_scheduling = false;
  rc.kv_cache.num_blocks = 1000;
  rc.kv_cache.groups.push_back(KvGroupSpec{16, 0, 1});
  rc.step_model = model;
  spec.replicas.push_back(rc);
  return spec;
}

// The shipped mi300x profile's api_overhead_ms: 5,677,929.695 ns.
// Calibration (which fitted it) rounded it to 5,677,930; simulate used to
// truncate it to 5,677,929. Both now use this function.
TEST(ApiOverheadNsTest, RoundsToTheNearestNanosecond) {
  EXPECT_EQ(ApiOverheadNs(5.6779296952436793), 5'677'930);
  EXPECT_EQ(ApiOverheadNs(11.906762521460831), 11'906'763);
  EXPECT_EQ(ApiOverheadNs(1.0000001), 1'000'000);
  EXPECT_EQ(ApiOverheadNs(1.0), 1'000'000);
}

TEST(ApiOverheadNsTest, NonPositiveOrNanIsZero) {
  EXPECT_EQ(ApiOverheadNs(0), 0);
  EXPECT_EQ(ApiOverheadNs(-3), 0);
  EXPECT_EQ(ApiOverheadNs(std::numeric_limits<double>::quiet_NaN()), 0);
}

TEST(WithApiOverheadTest, AddsToTheClientsOwnOverheadOnly) {
  ClientConfig c;
  c.client_overhead_ns = 620'000'000;
  c.max_concurrency = 4;
  const ClientConfig w = WithApiOverhead(c, 5.6779296952436793);
  EXPECT_EQ(w.client_overhead_ns, 620'000'000 + 5'677'930);
  EXPECT_EQ(w.max_concurrency, 4);
}

// The API overhead delays the arrival: it is in TTFT and latency, once.
TEST(SimulateTest, ApiOverheadCountsInTtftAndLatency) {
  AnalyticStepParams p;
  p.device_base_ns = 5'000'000;
  AnalyticStepModel model(p);
  SimulationSpec spec = OneReplica(&model);
  spec.client.client_overhead_ns = 2'000'000;
  spec.api_overhead_ms = 1.5;
  VectorSource src({Req(10, 2)});
  absl::StatusOr<std::unique_ptr<Engine>> e = Simulate(std::move(spec), &src);
  ASSERT_TRUE(e.ok()) << e.status();
  const RunResult r = (*e)->Result();
  EXPECT_DOUBLE_EQ(r.ttft.mean_ms, 8.5);
  EXPECT_DOUBLE_EQ(r.e2el.mean_ms, 13.5);
}

TEST(SimulateTest, UnknownRouterIsAnError) {
  AnalyticStepModel model(AnalyticStepParams{});
  SimulationSpec spec = OneReplica(&model);
  spec.router = "fastest";
  VectorSource src({Req(10, 2)});
  absl::StatusOr<std::unique_ptr<Engine>> e = Simulate(std::move(spec), &src);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(e.status().message().find("--router"), std::string::npos) << e.status();
}

}  // namespace
}  // namespace servesim
