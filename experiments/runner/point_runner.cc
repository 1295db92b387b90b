#include "experiments/runner/point_runner.h"

#include <string>
#include <vector>

#include "experiments/runner/run_experiment.h"
#include "sim/base/status_macros.h"

namespace servesim {
namespace {

// The simulator behind every sweep point: the same pipeline as simulate.
absl::StatusOr<RunResult> SimulateExperiment(const proto::ExperimentConfig& config) {
  ASSIGN_OR_RETURN(ExperimentRun run, RunExperiment(config));
  return run.engine->Result();
}

}  // namespace

const std::vector<std::string>& SimulatorMetricNames() {
  static const auto* names =
      new std::vector<std::string>{"completed",         "failed",
                                   "duration_s",        "request_throughput",
                                   "output_throughput", "total_token_throughput",
                                   "mean_ttft_ms",      "median_ttft_ms",
                                   "p90_ttft_ms",       "p99_ttft_ms",
                                   "mean_tpot_ms",      "median_tpot_ms",
                                   "p90_tpot_ms",       "p99_tpot_ms",
                                   "mean_itl_ms",       "median_itl_ms",
                                   "p90_itl_ms",        "p99_itl_ms",
                                   "mean_e2el_ms",      "median_e2el_ms",
                                   "p90_e2el_ms",       "p99_e2el_ms",
                                   "mean_queueing_ms",  "p99_queueing_ms",
                                   "preemptions",       "kv_occupancy_mean",
                                   "kv_occupancy_max",  "batch_size_mean"};
  return *names;
}

std::vector<double> SimulatorMetrics(const RunResult& r) {
  std::vector<double> v = {static_cast<double>(r.completed),
                           static_cast<double>(r.failed),
                           r.duration_s,
                           r.request_throughput,
                           r.output_throughput,
                           r.total_token_throughput};
  for (const LatencySummary* s : {&r.ttft, &r.tpot, &r.itl, &r.e2el}) {
    v.insert(v.end(), {s->mean_ms, s->median_ms, s->p90_ms, s->p99_ms});
  }
  v.insert(v.end(),
           {r.queueing.mean_ms, r.queueing.p99_ms, static_cast<double>(r.preemptions),
            r.kv_occupancy_mean, r.kv_occupancy_max, r.batch_size[0]});
  return v;
}

PointRunner SimulatorPointRunner() {
  PointRunner r;
  r.metric_names = SimulatorMetricNames();
  r.run = [](const proto::ExperimentConfig& c) -> absl::StatusOr<std::vector<double>> {
    ASSIGN_OR_RETURN(RunResult result, SimulateExperiment(c));
    return SimulatorMetrics(result);
  };
  return r;
}

}  // namespace servesim
