// Reading guide to experiments/runner/ (one experiment without the command
// line; the layer below capacity/ and cli/). Start here: RunExperiment is
// the one pipeline behind simulate, sweep and plan. config.h holds the
// config's defaults and range checks, point_runner.h the PointRunner that
// sweeps and plans (experiments/capacity/) call. The CLI11 flags are in
// experiments/cli/server_flags.h, one file per subcommand in cli/cmd_*.cc.
//
// One experiment, end to end: an ExperimentConfig (server or fleet, client,
// workload) -> hwmodels deployments -> replicas, router, client, request
// source -> the simulated run. The single pipeline behind `simulate`,
// `sweep` and `plan`, so all three answer the same question the same way.
#ifndef SERVESIM_EXPERIMENTS_RUNNER_RUN_EXPERIMENT_H_
#define SERVESIM_EXPERIMENTS_RUNNER_RUN_EXPERIMENT_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "hwmodels/deployment.h"
#include "proto/experiment.pb.h"
#include "sim/client.h"
#include "sim/engine.h"
#include "sim/request_source.h"

namespace servesim {

// The replicas of a fleet and the deployments (device x model x flags)
// they come from. Replicas point at the deployments' step models, so keep
// the Fleet alive while an Engine built from it runs.
struct Fleet {
  std::vector<Deployment> deployments;  // one per distinct server config
  std::vector<ReplicaConfig> replicas;  // count copies of each
  // One line per deployment: memory plan, formula, parameters, sources.
  std::vector<std::string> provenance;
  // The API server's fixed latency per request (HTTP, tokenisation,
  // detokenisation) from the calibration profile's `api_overhead_ms`
  // (fitted by calibration/, e.g. from single-stream TTFT); 0 without a
  // profile. Added to the client's per-request overhead by Simulate
  // (sim/simulation.h), as validate adds it.
  // A mixed fleet uses the largest of its deployments' values.
  double api_overhead_ms = 0;
};

// Errors: InvalidArgument for unknown names / out-of-range flags (naming
// the flag); ResourceExhausted when a model does not fit its device
// (the message carries the planner's numbers).
absl::StatusOr<Fleet> BuildFleet(const proto::ExperimentConfig& config);

// The workload: vLLM's random dataset, or a trace (num_prompts > 0 keeps
// the first N requests; request_rate > 0 rescales the trace's timeline to
// that mean rate, keeping its burst pattern; otherwise its arrival times
// are replayed as recorded).
absl::StatusOr<std::unique_ptr<RequestSource>> OpenRequestSource(
    const proto::ClientConfig& client);

// One warning per distinct device of `deployments` that no calibration
// profile covers: its step times are datasheet priors (by rule from the
// calibrated devices: Deployment::uncalibrated_note, when set), and the
// prediction carries their error (not the calibrated devices' validate error).
std::vector<std::string> UncalibratedWarnings(const std::vector<Deployment>& deployments);

// The router name Simulate gets for `fleet`: config.fleet().router() when
// set; otherwise "vllm-dp" (vLLM's DP load balancer) when a deployment is
// data parallel, else "" (round-robin). RunExperiment and the interval
// re-simulations (experiments/capacity/intervals.cc) both use it.
std::string FleetRouterName(const proto::ExperimentConfig& config, const Fleet& fleet);

struct ExperimentRun {
  Fleet fleet;
  ClientConfig client;  // as the engine ran it: API overhead included
  std::unique_ptr<RequestSource> source;
  std::unique_ptr<Engine> engine;  // after Run: records(), Result(), ...
};

// Applies the documented defaults (ApplyDefaults), validates, builds the
// fleet and runs it through Simulate (sim/simulation.h, the pipeline
// calibration's SimulateBenchCell runs too). Deterministic: same config, same bytes.
// Errors: those of BuildFleet; OutOfRange when the random requests are longer than a
// replica's resolved max_model_len (every one would be rejected).
absl::StatusOr<ExperimentRun> RunExperiment(proto::ExperimentConfig config,
                                            const EngineOptions& options = {},
                                            EngineObserver* observer = nullptr);

}  // namespace servesim

#endif  // SERVESIM_EXPERIMENTS_RUNNER_RUN_EXPERIMENT_H_
