// servesim sweep --grid FILE --out DIR [--jobs N]: runs every point of a
// grid (proto/sweep.proto) through the simulator; resumable; results in
// point order whatever N. See experiments/sweep.h.
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "experiments/cli.h"
#include "experiments/sweep.h"
#include "hwmodels/deployment.h"
#include "sim/engine.h"
#include "sim/random_source.h"
#include "sim/router_aware.h"
#include "sim/status_macros.h"
#include "traces/open_trace.h"

namespace servesim {

namespace {

ServerSpec SpecFromProto(const proto::ServerConfig& c) {
  ServerSpec s;
  s.device = c.device();
  s.model = c.model();
  s.dtype = c.dtype().empty() ? "auto" : c.dtype();
  s.quantization = c.quantization().empty() ? "none" : c.quantization();
  s.max_model_len = c.max_model_len();
  if (c.has_gpu_memory_utilization())
    s.gpu_memory_utilization = c.gpu_memory_utilization();
  s.max_num_seqs = c.max_num_seqs();
  s.max_num_batched_tokens = c.max_num_batched_tokens();
  if (c.has_block_size()) s.block_size = c.block_size();
  if (c.has_enable_prefix_caching()) s.enable_prefix_caching = c.enable_prefix_caching();
  if (c.has_async_scheduling()) s.async_scheduling = c.async_scheduling();
  s.calibration_profile = c.calibration_profile();
  return s;
}

// Builds the fleet, the client and the request source of `config` and runs
// the simulation. Stand-in for the lead's RunExperiment (same inputs).
absl::StatusOr<RunResult> SimulateExperiment(const proto::ExperimentConfig& config) {
  std::vector<std::pair<const proto::ServerConfig*, int>> parts;
  if (config.fleet().replicas_size() > 0) {
    for (const auto& r : config.fleet().replicas()) {
      if (r.count() < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("fleet.replicas.count: ", r.count(), " is negative"));
      }
      parts.emplace_back(&r.server(), r.count() == 0 ? 1 : r.count());
    }
  } else {
    parts.emplace_back(&config.server(), 1);
  }
  std::vector<Deployment> deployments;
  deployments.reserve(parts.size());
  std::vector<ReplicaConfig> replicas;
  for (const auto& [server, count] : parts) {
    ASSIGN_OR_RETURN(Deployment d, BuildDeployment(SpecFromProto(*server)));
    if (!d.memory.fits) {
      return absl::FailedPreconditionError(
          absl::StrCat(server->model(), " on ", server->device(), ": ", d.memory.reason));
    }
    deployments.push_back(std::move(d));
    const Deployment& dep = deployments.back();
    for (int i = 0; i < count; ++i) {
      ReplicaConfig rc;
      rc.scheduler = dep.scheduler;
      rc.kv_cache = dep.kv_cache;
      rc.step_model = dep.step_model.get();
      rc.description = dep.spec.device;
      replicas.push_back(std::move(rc));
    }
  }
  ASSIGN_OR_RETURN(std::unique_ptr<Router> router,
                   MakeFleetRouter(config.fleet().router()));

  const proto::ClientConfig& c = config.client();
  ClientConfig client;
  if (c.request_rate() > 0) client.request_rate = c.request_rate();
  if (c.has_burstiness()) client.burstiness = c.burstiness();
  client.max_concurrency = c.max_concurrency();
  client.client_overhead_ns =
      static_cast<TimeNs>(std::llround(c.client_overhead_s() * 1e9));
  client.seed = c.has_seed() ? c.seed() : 0;
  std::unique_ptr<RequestSource> source;
  if (!c.trace().empty()) {
    TraceOptions t;
    t.path = c.trace();
    t.format = c.trace_format();
    t.max_requests = c.num_prompts();
    t.seed = client.seed;
    // Replay the trace's arrivals; a request_rate rescales its timeline to
    // that mean rate.
    client.replay_arrivals = true;
    if (c.request_rate() > 0) t.target_rate_per_s = c.request_rate();
    ASSIGN_OR_RETURN(source, OpenTrace(t));
  } else {
    RandomDatasetConfig r;
    if (c.num_prompts() > 0) r.num_prompts = c.num_prompts();
    if (c.random_input_len() > 0) r.input_len = c.random_input_len();
    if (c.random_output_len() > 0) r.output_len = c.random_output_len();
    r.range_ratio = c.random_range_ratio();
    r.seed = client.seed;
    ASSIGN_OR_RETURN(source, RandomSource::Create(r));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine,
                   Engine::Create(std::move(replicas), std::move(router), client));
  RETURN_IF_ERROR(engine->Run(source.get()));
  return engine->Result();
}

}  // namespace

PointRunner SimulatorPointRunner() {
  PointRunner r;
  r.metric_names = SimulatorMetricNames();
  r.run = [](const proto::ExperimentConfig& c) -> absl::StatusOr<std::vector<double>> {
    ASSIGN_OR_RETURN(RunResult result, SimulateExperiment(c));
    return SimulatorMetrics(result);
  };
  return r;
}

namespace cli {

void RegisterSweepCommand(CLI::App& app, int* exit_code) {
  struct Flags {
    std::string grid;
    std::string out;
    int jobs = 1;
    int64_t stop_after = -1;
    bool progress = false;
    bool no_progress = false;
  };
  auto flags = std::make_shared<Flags>();
  CLI::App* cmd = app.add_subcommand(
      "sweep",
      "Run a grid of experiments (cross product of axes over a base config) on N "
      "threads.\n"
      "Results stream to DIR/results.jsonl and DIR/results.csv and are rewritten in "
      "point\n"
      "order at the end (identical bytes whatever --jobs). Rerunning with the same grid\n"
      "resumes: finished points (same id and config hash) are kept.");
  cmd->add_option("--grid", flags->grid,
                  "grid file (text-format servesim.proto.SweepGrid)")
      ->required();
  cmd->add_option("--out", flags->out, "output directory (created if missing)")
      ->required();
  cmd->add_option("--jobs,-j", flags->jobs, "worker threads")->check(CLI::Range(1, 1024));
  cmd->add_option("--stop-after", flags->stop_after,
                  "stop taking new points after K finished (testing resumption)")
      ->group("");
  cmd->add_flag("--progress", flags->progress,
                "progress line even when stderr is no terminal");
  cmd->add_flag("--no-progress", flags->no_progress, "no progress line");
  cmd->callback([flags, exit_code] {
    absl::StatusOr<proto::SweepGrid> grid = ReadGridFile(flags->grid);
    if (!grid.ok()) {
      std::fprintf(stderr, "servesim sweep: %s\n",
                   std::string(grid.status().message()).c_str());
      *exit_code = kExitBadInput;
      return;
    }
    SweepOptions options;
    options.jobs = flags->jobs;
    options.stop_after = flags->stop_after;
    options.progress = flags->no_progress ? 0 : (flags->progress ? 1 : -1);
    absl::StatusOr<SweepSummary> s =
        RunSweep(*grid, flags->out, SimulatorPointRunner(), options);
    if (!s.ok()) {
      std::fprintf(stderr, "servesim sweep: %s: %s\n", flags->grid.c_str(),
                   std::string(s.status().message()).c_str());
      *exit_code =
          s.status().code() == absl::StatusCode::kInvalidArgument ? kExitBadInput : 1;
      return;
    }
    std::fprintf(
        stderr,
        "servesim sweep: %lld points (%lld resumed, %lld run, %lld failed)%s -> %s\n",
        static_cast<long long>(s->num_points), static_cast<long long>(s->num_resumed),
        static_cast<long long>(s->num_run), static_cast<long long>(s->num_failed),
        s->complete ? "" : " [stopped early; rerun to resume]", flags->out.c_str());
    *exit_code = s->complete ? kExitOk : 1;
  });
}

}  // namespace cli
}  // namespace servesim
