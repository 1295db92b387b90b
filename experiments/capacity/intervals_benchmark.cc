// The cost of `simulate --interval` against the point run it wraps, on the
// same workload (docs/performance.md, "Prediction intervals"): the issue's
// bound is 10x. One L4 E2B open-loop workload, 5,000 random requests at
// 4 req/s (512 in / 128 out, range ratio 0.5). BM_PointRun is RunExperiment
// (fleet build and one simulation); BM_IntervalRun is the same plus
// ComputeIntervals at K = 4 on one thread (2K re-simulations over the
// compiled step graph). Arg 0: the shipped L4 profile (fitted draws); arg
// 1: a datasheet device (h100-sxm, priors by rule: prior draws). Items: the
// simulated requests of the point run, so items/s compares directly.
#include <cstdint>
#include <string>

#include "benchmark/benchmark.h"
#include "experiments/capacity/intervals.h"
#include "experiments/capacity/simulate_report.h"
#include "experiments/runner/run_experiment.h"
#include "proto/experiment.pb.h"

namespace servesim {
namespace {

proto::ExperimentConfig Workload(bool datasheet) {
  proto::ExperimentConfig c;
  c.mutable_server()->set_device(datasheet ? "h100-sxm" : "l4");
  c.mutable_server()->set_model("gemma-4-e2b");
  proto::ClientConfig* cl = c.mutable_client();
  cl->set_num_prompts(5000);
  cl->set_random_input_len(512);
  cl->set_random_output_len(128);
  cl->set_random_range_ratio(0.5);
  cl->set_request_rate(4);
  cl->set_seed(1);
  return c;
}

void BM_PointRun(benchmark::State& state) {
  const proto::ExperimentConfig c = Workload(state.range(0) != 0);
  int64_t requests = 0;
  for (auto _ : state) {
    absl::StatusOr<ExperimentRun> run = RunExperiment(c);
    if (!run.ok()) {
      state.SkipWithError(std::string(run.status().message()).c_str());
      return;
    }
    requests += run->engine->Result().completed;
    benchmark::DoNotOptimize(run->engine->Result().output_throughput);
  }
  state.SetItemsProcessed(requests);
}

void BM_IntervalRun(benchmark::State& state) {
  const proto::ExperimentConfig c = Workload(state.range(0) != 0);
  IntervalOptions o;
  o.level = 0.9;
  o.jobs = 1;
  int64_t requests = 0;
  for (auto _ : state) {
    absl::StatusOr<ExperimentRun> run = RunExperiment(c);
    if (!run.ok()) {
      state.SkipWithError(std::string(run.status().message()).c_str());
      return;
    }
    const ReportContext ctx = SimulateReportContext(c, *run, "20260101-000000");
    absl::StatusOr<IntervalReport> r = ComputeIntervals(c, *run, ctx, o, 1);
    if (!r.ok()) {
      state.SkipWithError(std::string(r.status().message()).c_str());
      return;
    }
    requests += run->engine->Result().completed;
    benchmark::DoNotOptimize(r->metrics.data());
  }
  state.SetItemsProcessed(requests);
}

BENCHMARK(BM_PointRun)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_IntervalRun)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace servesim
