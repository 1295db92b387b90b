#include "experiments/runner/run_experiment.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "experiments/runner/config.h"
#include "sim/base/status_macros.h"
#include "sim/random_source.h"
#include "sim/router.h"
#include "sim/simulation.h"
#include "traces/open_trace.h"
#include "traces/transforms.h"

namespace servesim {

std::vector<std::string> UncalibratedWarnings(
    const std::vector<Deployment>& deployments) {
  std::vector<std::string> out;
  std::vector<std::string> seen;
  for (const Deployment& d : deployments) {
    if (d.calibrated) continue;
    if (std::find(seen.begin(), seen.end(), d.device.id()) != seen.end()) continue;
    seen.push_back(d.device.id());
    // Priors by rule (hwmodels/catalog_priors.h): the note says from where.
    if (!d.uncalibrated_note.empty()) {
      out.push_back(d.uncalibrated_note);
      continue;
    }
    out.push_back(absl::StrCat(
        "no calibration profile for device ", d.device.id(),
        ": step times come from its datasheet and the default efficiency priors, "
        "which no measurement on this device has checked (expect errors well beyond "
        "the calibrated devices' held-out errors in `servesim validate`; fit one with "
        "`servesim calibrate --device ",
        d.device.id(), " --bench FILE...`)"));
  }
  return out;
}

absl::StatusOr<Fleet> BuildFleet(const proto::ExperimentConfig& config) {
  std::vector<std::pair<proto::ServerConfig, int>> servers;
  if (config.fleet().replicas_size() > 0) {
    for (int i = 0; i < config.fleet().replicas_size(); ++i) {
      const proto::FleetReplica& fr = config.fleet().replicas(i);
      if (fr.count() < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("fleet.replicas[", i, "].count: ", fr.count(),
                         " is negative (allowed: >= 0; 0 means 1)"));
      }
      proto::ExperimentConfig tmp;
      *tmp.mutable_server() = fr.server();
      ApplyDefaults(tmp);
      servers.emplace_back(tmp.server(), fr.count() > 0 ? fr.count() : 1);
    }
  } else {
    servers.emplace_back(config.server(), 1);
  }
  Fleet fleet;
  fleet.deployments.reserve(servers.size());
  int32_t next_lockstep_group = 0;
  for (const auto& [server, count] : servers) {
    ASSIGN_OR_RETURN(Deployment d, BuildDeployment(ToServerSpec(server)));
    if (!d.memory.fits) {
      return absl::ResourceExhaustedError(absl::StrCat(
          server.model(), " does not fit on ", server.device(), ": ", d.memory.reason));
    }
    const double api_ms = d.api_overhead_ms;
    fleet.api_overhead_ms = std::max(fleet.api_overhead_ms, api_ms);
    fleet.provenance.push_back(absl::StrCat(d.provenance,
                                            " API server latency per request: ", api_ms,
                                            " ms (", d.api_overhead_source, ")."));
    fleet.deployments.push_back(std::move(d));
    const Deployment& dep = fleet.deployments.back();
    // Each of the server's --data-parallel-size engines is a replica.
    const int dp = std::max(1, dep.data_parallel_size);
    // An MoE server's DP engines share the experts (DP attention + EP):
    // they step in lock-step (sim/engine.h ReplicaConfig::lockstep_group).
    const bool lockstep = dp > 1 && dep.expert_parallel_size > 1;
    for (int i = 0; i < count; ++i) {
      const int32_t group = lockstep ? next_lockstep_group++ : -1;
      for (int e = 0; e < dp; ++e) {
        ReplicaConfig rc;
        rc.lockstep_group = group;
        rc.scheduler = dep.scheduler;
        rc.kv_cache = dep.kv_cache;
        rc.step_model = dep.step_model.get();  // shared_ptr owned by the deployment
        rc.description = absl::StrCat(server.device(), "/", server.model(),
                                      dp > 1 ? absl::StrCat(" DP engine ", e) : "");
        fleet.replicas.push_back(std::move(rc));
      }
    }
  }
  return fleet;
}

absl::StatusOr<std::unique_ptr<RequestSource>> OpenRequestSource(
    const proto::ClientConfig& cl) {
  if (cl.trace().empty()) {
    ASSIGN_OR_RETURN(std::unique_ptr<RandomSource> src,
                     RandomSource::Create(ToRandomDataset(cl)));
    return std::unique_ptr<RequestSource>(std::move(src));
  }
  TraceOptions t;
  t.path = cl.trace();
  t.format = cl.trace_format();
  t.seed = cl.has_seed() ? cl.seed() : 0;
  t.max_requests = cl.num_prompts();
  // inf (the --request-rate default) replays the trace's own times.
  if (cl.request_rate() > 0 && std::isfinite(cl.request_rate())) {
    t.target_rate_per_s = cl.request_rate();
  }
  ASSIGN_OR_RETURN(std::unique_ptr<RequestSource> src, OpenTrace(t));
  if (cl.num_prompts() <= 0) return src;  // the whole trace
  return RequireCount(
      std::move(src), cl.num_prompts(),
      absl::StrCat("--num-prompts ", cl.num_prompts(),
                   " (omit it to replay the whole trace, or repeat the trace with "
                   "`servesim trace convert --loop-to N`)"));
}

std::string FleetRouterName(const proto::ExperimentConfig& config, const Fleet& fleet) {
  if (!config.fleet().router().empty()) return config.fleet().router();
  // Without a router named, data-parallel engines are balanced as vLLM's DP
  // load balancer does.
  for (const Deployment& d : fleet.deployments) {
    if (d.data_parallel_size > 1) return "vllm-dp";
  }
  return "";
}

absl::StatusOr<ExperimentRun> RunExperiment(proto::ExperimentConfig config,
                                            const EngineOptions& options,
                                            EngineObserver* observer) {
  ApplyDefaults(config);
  // Validate, with its length check as OutOfRange (see below).
  RETURN_IF_ERROR(ValidateRanges(config));
  if (config.server().max_model_len() > 0) {
    if (absl::Status st = CheckRandomLengthsFit(
            config.client(), config.server().max_model_len(), "--max-model-len");
        !st.ok()) {
      return absl::OutOfRangeError(st.message());
    }
  }
  ExperimentRun run;
  ASSIGN_OR_RETURN(run.fleet, BuildFleet(config));
  // One workload is one model's: a router would send its requests to the
  // replicas of another model as if they were interchangeable.
  for (size_t i = 1; i < run.fleet.deployments.size(); ++i) {
    if (run.fleet.deployments[i].model.id != run.fleet.deployments[0].model.id) {
      return absl::InvalidArgumentError(absl::StrCat(
          "fleet.replicas: ", run.fleet.deployments[0].model.id, " and ",
          run.fleet.deployments[i].model.id,
          ": a fleet serves one model (the workload's requests go to any replica); "
          "simulate each model's fleet on its own"));
    }
  }
  // The resolved context limit (the model's own when --max-model-len is not
  // given) must hold the longest random request, or every such request
  // would only be rejected.
  // OutOfRange: a real outcome for a sweep point (vLLM rejects every such
  // request), bad input for simulate.
  for (const ReplicaConfig& rc : run.fleet.replicas) {
    if (absl::Status st = CheckRandomLengthsFit(
            config.client(), rc.scheduler.max_model_len,
            absl::StrCat("the max_model_len of ", rc.description,
                         " (the model's limit or --max-model-len)"));
        !st.ok()) {
      return absl::OutOfRangeError(st.message());
    }
  }
  const std::string router_name = FleetRouterName(config, run.fleet);
  // A bad --router fails before the trace is opened.
  RETURN_IF_ERROR(MakeRouter(router_name).status());
  SimulationSpec spec;
  spec.replicas = run.fleet.replicas;
  spec.router = router_name;
  spec.client = ToClientConfig(config.client());
  spec.api_overhead_ms = run.fleet.api_overhead_ms;
  spec.options = options;
  run.client = WithApiOverhead(spec.client, spec.api_overhead_ms);
  ASSIGN_OR_RETURN(run.source, OpenRequestSource(config.client()));
  ASSIGN_OR_RETURN(run.engine, Simulate(std::move(spec), run.source.get(), observer));
  return run;
}

}  // namespace servesim
