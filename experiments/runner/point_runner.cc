#include "experiments/runner/point_runner.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "experiments/runner/run_experiment.h"
#include "sim/base/status_macros.h"
#include "sim/random_source.h"

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

double EstimateRunBytes(const proto::ExperimentConfig& c, bool detailed) {
  const proto::ClientConfig& cl = c.client();
  const RandomDatasetConfig kData;  // ApplyDefaults' defaults, for an unset field
  const double n =
      cl.num_prompts() > 0
          ? cl.num_prompts()
          : (cl.trace().empty() ? static_cast<double>(kData.num_prompts) : 0.0);
  const bool all_at_once = !(cl.request_rate() > 0 && std::isfinite(cl.request_rate())) &&
                           cl.max_concurrency() <= 0 && cl.trace().empty();
  double bytes = n * kRecordBytes + (all_at_once ? n * kInFlightBytes : 0);
  if (detailed && cl.trace().empty()) {
    bytes += n * 8.0 *  // one TimeNs per inter-token gap
             std::max(1, cl.random_output_len() > 0 ? cl.random_output_len()
                                                    : kData.output_len);
  }
  return bytes;
}

double PhysicalMemoryBytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? static_cast<double>(pages) * static_cast<double>(page)
                               : 0;
}

namespace {

PointRunner MakeSimulatorPointRunner(bool client_wait) {
  PointRunner r;
  r.metric_names = SimulatorMetricNames();
  if (client_wait) r.metric_names.emplace_back("p99_client_wait_ms");
  r.run = [client_wait](
              const proto::ExperimentConfig& c) -> absl::StatusOr<std::vector<double>> {
    // A sweep or plan point of 2e8 prompts grew by 130 MB/s until the
    // machine ran out of memory; simulate refuses it up front, so does this.
    if (const double need = EstimateRunBytes(c, false), have = PhysicalMemoryBytes();
        have > 0 && need > 0.8 * have) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "client.num_prompts %d: the point needs at least %.3g GB (%.0f B per request "
          "kept), more than 80%% of this machine's %.3g GB; lower num_prompts",
          c.client().num_prompts(), need / 1e9, kRecordBytes, have / 1e9));
    }
    ASSIGN_OR_RETURN(RunResult result, SimulateExperiment(c));
    std::vector<double> metrics = SimulatorMetrics(result);
    if (client_wait) metrics.push_back(result.client_wait.p99_ms);
    return metrics;
  };
  return r;
}

}  // namespace

PointRunner SimulatorPointRunner() { return MakeSimulatorPointRunner(false); }

PointRunner SimulatorPointRunnerWithClientWait() {
  return MakeSimulatorPointRunner(true);
}

}  // namespace servesim
