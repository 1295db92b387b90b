// The point runner: one experiment config in, its metrics out. Sweeps and
// plans (experiments/capacity/) run every point through a PointRunner;
// SimulatorPointRunner() is the real simulator's (RunExperiment), tests
// pass their own.
#ifndef SERVESIM_EXPERIMENTS_RUNNER_POINT_RUNNER_H_
#define SERVESIM_EXPERIMENTS_RUNNER_POINT_RUNNER_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/experiment.pb.h"
#include "sim/metrics.h"

namespace servesim {

// Runs one experiment and returns its metrics, one value per name in
// `metric_names`, in that order. `run` is called concurrently from worker
// threads: it must be thread-safe and deterministic (same config, same
// values). An error is a result too (e.g. "model does not fit"): it is
// recorded for the point, not retried.
struct PointRunner {
  std::vector<std::string> metric_names;
  std::function<absl::StatusOr<std::vector<double>>(const proto::ExperimentConfig&)> run;
};

// The metrics every simulated point reports, in this order: the `vllm bench
// serve` result keys (completed, failed, duration_s, request_throughput,
// output_throughput, total_token_throughput, {mean,median,p90,p99}_{ttft,
// tpot,itl,e2el}_ms) then servesim extras (mean/p99 queueing, preemptions,
// KV occupancy, batch size).
const std::vector<std::string>& SimulatorMetricNames();
// The values of SimulatorMetricNames() for one run.
std::vector<double> SimulatorMetrics(const RunResult& result);

// The point runner of the real simulator (RunExperiment): the same pipeline
// as `servesim simulate`. A point whose requests would need more than 80%
// of this machine's memory (EstimateRunBytes) is an error, not a run that
// grows until the machine is out of memory.
PointRunner SimulatorPointRunner();
// The same, with one more metric last: "p99_client_wait_ms", the p99 of how
// long requests waited at the client's --max-concurrency semaphore (no
// `vllm bench serve` key: the planner's, to see a client that cannot send
// at the offered rate).
PointRunner SimulatorPointRunnerWithClientWait();

// Measured on this build (docs: `simulate --num-prompts N` max RSS, random
// 16/2-token requests): ~127 B per request kept (its record) and ~1.3 KB
// per request in flight; all requests are in flight at once when they are
// sent at --request-rate inf without --max-concurrency.
inline constexpr double kRecordBytes = 128;
inline constexpr double kInFlightBytes = 1300;

// A lower bound on the memory a run will hold, for the requests the config
// sends (0 when it replays a whole trace: bounded by the file); `detailed`:
// with every request's ITLs kept (--save-detailed).
double EstimateRunBytes(const proto::ExperimentConfig& c, bool detailed);

// This machine's physical memory in bytes (0 if unknown).
double PhysicalMemoryBytes();

}  // namespace servesim

#endif  // SERVESIM_EXPERIMENTS_RUNNER_POINT_RUNNER_H_
