// servesim simulate: one experiment (a replica or a fleet, a client, a
// dataset or trace) through the discrete-event simulator; prints a summary
// like `vllm bench serve`, or the result JSON with --json, and writes the
// optional files (--save-result, --requests-csv, --chrome-trace).
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "experiments/cli.h"
#include "experiments/cost.h"
#include "experiments/run_experiment.h"
#include "experiments/server_flags.h"
#include "sim/engine.h"
#include "sim/report.h"
#include "sim/status_macros.h"
#include "sim/version.h"

namespace servesim::cli {
namespace {

struct SimulateArgs {
  ExperimentFlags flags;
  bool json = false;
  bool explain = false;  // the provenance notes under the summary
  // As `vllm bench serve`: --save-result switches the result file on; it
  // goes to --result-dir / --result-filename, or vLLM's default name. A
  // path right after --save-result (a servesim extension) names the file.
  bool save_result_given = false;
  std::string save_result;
  std::string result_dir, result_filename;
  bool save_detailed = false;
  std::string requests_csv;
  std::string chrome_trace;
  std::string date = "19700101-000000";
  std::string router;
};

absl::Status WriteFile(const std::string& path, const std::string& text,
                       const char* flag) {
  std::ofstream out(path, std::ios::binary);
  if (!out)
    return absl::InvalidArgumentError(absl::StrFormat("%s: cannot write %s", flag, path));
  out << text;
  out.close();
  if (!out)
    return absl::InternalError(absl::StrFormat("%s: error writing %s", flag, path));
  return absl::OkStatus();
}

// vLLM's request-rate text in its default file name: Python's str(float).
std::string PythonFloat(double v) {
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  if (v == std::floor(v) && std::abs(v) < 1e16) return absl::StrFormat("%.1f", v);
  return absl::StrFormat("%.17g", v);
}

// Where --save-result writes: the explicit path, else --result-dir /
// (--result-filename or vLLM's "<label>-<rate>qps[-concurrency<c>]-<model>-<date>.json").
std::string ResultPath(const SimulateArgs& args, const proto::ExperimentConfig& config) {
  if (!args.save_result.empty()) return args.save_result;
  std::string name = args.result_filename;
  if (name.empty()) {
    const proto::ClientConfig& c = config.client();
    std::string model = config.fleet().replicas_size() > 0
                            ? config.fleet().replicas(0).server().model()
                            : config.server().model();
    if (const size_t slash = model.rfind('/'); slash != std::string::npos) {
      model = model.substr(slash + 1);
    }
    // 0 (unset) is the client default, inf.
    const double rate =
        c.request_rate() > 0 ? c.request_rate() : std::numeric_limits<double>::infinity();
    name = absl::StrCat("vllm-", PythonFloat(rate), "qps",
                        c.max_concurrency() > 0
                            ? absl::StrCat("-concurrency", c.max_concurrency())
                            : std::string(),
                        "-", model, "-", args.date, ".json");
  }
  if (args.result_dir.empty()) return name;
  return (std::filesystem::path(args.result_dir) / name).string();
}

// Returns the process exit code; prints errors to stderr.
int RunSimulate(SimulateArgs& args) {
  auto fail = [](const absl::Status& st) {
    std::fprintf(stderr, "servesim simulate: error: %s\n",
                 std::string(st.message()).c_str());
    return kExitBadInput;
  };
  if (!args.save_result_given &&
      (!args.result_dir.empty() || !args.result_filename.empty())) {
    return fail(absl::InvalidArgumentError(
        "--result-dir / --result-filename: given without --save-result (as in vllm "
        "bench serve, they place the file --save-result writes)"));
  }
  absl::StatusOr<proto::ExperimentConfig> resolved_early = args.flags.Resolve();
  if (!resolved_early.ok()) return fail(resolved_early.status());
  if (args.save_result_given) {
    args.save_result = ResultPath(args, *resolved_early);
    if (!args.result_dir.empty()) {
      std::error_code ec;
      std::filesystem::create_directories(args.result_dir, ec);
      if (ec) {
        return fail(absl::InvalidArgumentError(absl::StrFormat(
            "--result-dir: cannot create %s (%s)", args.result_dir, ec.message())));
      }
    }
  }
  // Two outputs to one path would silently keep only the last written.
  const std::pair<const char*, std::string> outputs[] = {
      {"--save-result", args.save_result},
      {"--save-result (its .config.textproto)",
       args.save_result.empty() ? "" : args.save_result + ".config.textproto"},
      {"--requests-csv", args.requests_csv},
      {"--chrome-trace", args.chrome_trace}};
  for (size_t i = 0; i < std::size(outputs); ++i) {
    for (size_t j = i + 1; j < std::size(outputs); ++j) {
      if (!outputs[i].second.empty() && outputs[i].second == outputs[j].second) {
        return fail(absl::InvalidArgumentError(
            absl::StrFormat("%s and %s: both write %s; give different files",
                            outputs[i].first, outputs[j].first, outputs[i].second)));
      }
    }
  }
  if (args.save_detailed && args.save_result.empty()) {
    return fail(absl::InvalidArgumentError(
        "--save-detailed: given without --save-result (it adds per-request arrays to "
        "that file)"));
  }
  proto::ExperimentConfig config = *std::move(resolved_early);
  if (!args.router.empty()) config.mutable_fleet()->set_router(args.router);

  EngineOptions opts;
  opts.keep_request_itls = args.save_detailed;
  std::unique_ptr<ChromeTraceRecorder> trace;
  if (!args.chrome_trace.empty()) trace = std::make_unique<ChromeTraceRecorder>();
  absl::StatusOr<ExperimentRun> run = RunExperiment(config, opts, trace.get());
  if (!run.ok()) return fail(run.status());
  for (const std::string& w : UncalibratedWarnings(run->fleet.deployments)) {
    std::fprintf(stderr, "servesim simulate: warning: %s\n", w.c_str());
  }
  const std::unique_ptr<Engine>& engine = run->engine;
  const std::vector<std::string>& provenance = run->fleet.provenance;
  const ClientConfig& client = run->client;
  const std::unique_ptr<RequestSource>& source = run->source;

  const RunResult result = engine->Result();
  const std::string config_text = ConfigToText(config);
  ReportContext ctx;
  ctx.date = args.date;
  ctx.model_id = config.fleet().replicas_size() > 0
                     ? config.fleet().replicas(0).server().model()
                     : config.server().model();
  ctx.request_rate = client.request_rate;
  ctx.burstiness = client.burstiness;
  ctx.max_concurrency = client.max_concurrency;
  ctx.provenance.push_back(absl::StrCat("servesim ", VersionString(), " (commit ",
                                        CommitString(), ") simulate"));
  ctx.provenance.push_back(engine->Describe());
  for (const std::string& p : provenance) ctx.provenance.push_back(p);
  ctx.provenance.push_back(absl::StrCat("client: ", source->Describe()));
  if (client.replay_arrivals)
    ctx.provenance.push_back("arrivals: replayed from the trace");
  if (!config.client().ignore_eos()) {
    ctx.provenance.push_back(
        "ignore_eos=false: simulated outputs still have exactly the requested lengths");
  }
  ctx.resolved_config = config_text;
  // What the fleet costs per 1M output tokens at its devices' first
  // published on-demand and spot prices (experiments/cost.h SelectOffer; a
  // tier is left out when a device lacks it).
  for (const char* tier : {"on-demand", "spot"}) {
    ReportContext::Cost cost;
    cost.tier = tier;
    bool complete = true;
    for (size_t k = 0; k < run->fleet.deployments.size() && complete; ++k) {
      const proto::Device& device = run->fleet.deployments[k].device;
      const int count =
          config.fleet().replicas_size() > 0
              ? std::max(1, config.fleet().replicas(static_cast<int>(k)).count())
              : 1;
      std::string note;
      // A tensor-parallel replica is priced as one instance of that many chips.
      auto offer =
          SelectOfferForDevices(OffersFromDevice(device), device.id(), tier,
                                run->fleet.deployments[k].tensor_parallel_size, &note);
      if (!offer.ok() || !note.empty()) {
        complete = false;
        break;
      }
      cost.usd_per_hour += count * offer->usd_per_hour;
      const int tp = run->fleet.deployments[k].tensor_parallel_size;
      absl::StrAppend(&cost.offers, cost.offers.empty() ? "" : " + ", count, "x ",
                      device.id(), tp > 1 ? absl::StrCat(" TP", tp) : "", " ",
                      offer->provider, " ", offer->instance,
                      offer->region.empty() ? "" : absl::StrCat(" ", offer->region),
                      absl::StrFormat(" $%g/h", offer->usd_per_hour));
    }
    if (!complete || cost.usd_per_hour <= 0 || !(result.output_throughput > 0)) continue;
    cost.usd_per_m_output_tokens =
        UsdPerMillionTokens(cost.usd_per_hour, result.output_throughput);
    cost.output_tok_s_per_usd_hour =
        TokensPerSecondPerUsdHour(result.output_throughput, cost.usd_per_hour);
    ctx.costs.push_back(std::move(cost));
  }

  const auto& records = engine->records();
  if (!args.save_result.empty()) {
    const std::string json =
        BenchResultJson(result, ctx, records, engine->request_itls(), args.save_detailed);
    if (absl::Status st = WriteFile(args.save_result, json, "--save-result"); !st.ok()) {
      return fail(st);
    }
    if (absl::Status st = WriteFile(args.save_result + ".config.textproto", config_text,
                                    "--save-result");
        !st.ok()) {
      return fail(st);
    }
  }
  if (!args.requests_csv.empty()) {
    if (absl::Status st =
            WriteFile(args.requests_csv, RequestsCsv(records), "--requests-csv");
        !st.ok()) {
      return fail(st);
    }
  }
  if (trace != nullptr) {
    if (absl::Status st = WriteFile(
            args.chrome_trace, trace->Finish(engine->num_replicas()), "--chrome-trace");
        !st.ok()) {
      return fail(st);
    }
  }
  if (args.json) {
    const std::string json =
        BenchResultJson(result, ctx, records, engine->request_itls(), args.save_detailed);
    std::fwrite(json.data(), 1, json.size(), stdout);
  } else {
    const std::string text = SummaryText(result, ctx);
    std::fwrite(text.data(), 1, text.size(), stdout);
    if (args.explain) {
      for (const std::string& p : provenance) std::printf("note: %s\n", p.c_str());
    } else {
      std::printf(
          "(where each number comes from: --explain, or servesim.provenance in "
          "--json)\n");
    }
  }
  return kExitOk;
}

}  // namespace

void RegisterSimulateCommand(CLI::App& app, int* exit_code) {
  auto args = std::make_shared<SimulateArgs>();
  CLI::App* cmd = app.add_subcommand(
      "simulate",
      "Simulate `vllm serve` + `vllm bench serve`: TTFT, TPOT, ITL, throughput, KV use");
  args->flags.RegisterServerFlags(cmd);
  args->flags.RegisterClientFlags(cmd);
  args->flags.RegisterConfigFlags(cmd);
  cmd->add_option(
      "--router", args->router,
      "fleet router: round-robin | least-outstanding | kv-aware | prefix-aware");
  cmd->add_flag("--json", args->json, "print the result JSON instead of the summary");
  cmd->add_flag("--explain", args->explain,
                "print the provenance under the summary: memory plan, step-time formula, "
                "each parameter's value and source (always whole in the JSON and the "
                ".config.textproto)");
  CLI::Option* save = cmd->add_option(
      "--save-result", args->save_result,
      "write the result JSON (vllm bench serve keys) and <file>.config.textproto: to\n"
      "--result-dir/--result-filename or vLLM's default name, or to the path given\n"
      "right after the flag");
  save->expected(0, 1);
  cmd->add_option("--result-dir", args->result_dir,
                  "folder for the --save-result file (created if missing)");
  cmd->add_option("--result-filename", args->result_filename,
                  "name of the --save-result file (default: vLLM's "
                  "<label>-<rate>qps[-concurrency<c>]-<model>-<date>.json)");
  cmd->add_flag("--save-detailed", args->save_detailed,
                "add per-request arrays (input_lens, ttfts, itls, ...) to the JSON");
  cmd->add_option("--requests-csv", args->requests_csv,
                  "one row per request with its timeline");
  cmd->add_option("--chrome-trace", args->chrome_trace,
                  "Chrome/Perfetto trace of steps and requests");
  cmd->add_option(
      "--date", args->date,
      "value of the JSON \"date\" key (fixed by default for reproducible output)");
  cmd->callback([args, save, exit_code] {
    args->save_result_given = save->count() > 0;
    *exit_code = RunSimulate(*args);
  });
}

}  // namespace servesim::cli
