// servesim simulate: one experiment (a replica or a fleet, a client, a
// dataset or trace) through the discrete-event simulator; prints a summary
// like `vllm bench serve`, or the result JSON with --json, and writes the
// optional files (--save-result, --requests-csv, --chrome-trace).
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "experiments/capacity/cost.h"
#include "experiments/capacity/intervals.h"
#include "experiments/capacity/memory_fit.h"
#include "experiments/capacity/simulate_report.h"
#include "experiments/capacity/sweep.h"
#include "experiments/cli/cli.h"
#include "experiments/cli/output_files.h"
#include "experiments/cli/progress.h"
#include "experiments/cli/server_flags.h"
#include "experiments/runner/point_runner.h"
#include "experiments/runner/run_experiment.h"
#include "hwmodels/catalog.h"
#include "sim/base/status_macros.h"
#include "sim/base/version.h"
#include "sim/base/write_file.h"
#include "sim/engine.h"
#include "sim/random_source.h"
#include "sim/report.h"
#include "traces/bench_result.h"
#include "traces/open_trace.h"

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
  int64_t chrome_trace_max_steps = ChromeTraceRecorder::kDefaultMaxSteps;
  std::string date;  // empty: now (local time, as vLLM names its files)
  bool force = false;
  int progress = -1;  // 1: always, 0: never, -1: when stderr is a terminal
  bool overwrite = false;
  std::string router;
  // --interval LEVEL (0: off), --interval-samples K, --jobs.
  double interval = 0;
  bool interval_given = false;
  bool interval_samples_given = false;
  int interval_samples = kDefaultIntervalSamples;
  int jobs = 1;
  std::optional<std::string> label;  // --label (vLLM: null when not given)
  std::vector<std::string> goodput;  // --goodput KEY:VALUE ...
};

// Whole or not at all (sim/base/write_file.h): a full disk leaves no
// truncated file that a rerun would refuse without --overwrite.
absl::Status WriteFile(const std::string& path, const std::string& text,
                       const char* flag) {
  absl::Status s = WriteFileWhole(path, text);
  if (s.ok()) return s;
  return {s.code(), absl::StrCat(flag, " ", s.message())};
}

// Days of `month` (1-12) in `year` (Gregorian).
int DaysInMonth(int year, int month) {
  static constexpr int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  const bool leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
  return month == 2 && leap ? 29 : kDays[month - 1];
}

// vLLM's request-rate text in its default file name: Python's str(float).
std::string PythonFloat(double v) {
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  if (v == std::floor(v) && std::abs(v) < 1e16) return absl::StrFormat("%.1f", v);
  return absl::StrFormat("%.17g", v);
}

// "l4", or "mi300x+tpu-v6e" for a mixed fleet (each device once, in order).
std::string DevicesLabel(const proto::ExperimentConfig& config) {
  std::vector<std::string> ids;
  if (config.fleet().replicas_size() == 0) ids.push_back(config.server().device());
  for (const proto::FleetReplica& r : config.fleet().replicas()) {
    if (std::find(ids.begin(), ids.end(), r.server().device()) == ids.end()) {
      ids.push_back(r.server().device());
    }
  }
  return absl::StrJoin(ids, "+");
}

// The progress line while the engine runs: requests done of the total,
// rate and ETA; forwards every call to `inner` (the Chrome trace recorder,
// or none).
class ProgressObserver : public EngineObserver {
 public:
  ProgressObserver(EngineObserver* inner, int64_t total, int mode)
      : inner_(inner), total_(total), line_("simulate", mode) {}
  bool enabled() const { return line_.enabled(); }
  void OnStep(int32_t replica, TimeNs start_ns, TimeNs duration_ns, const Scheduler& s,
              const StepCost& cost) override {
    if (inner_ != nullptr) inner_->OnStep(replica, start_ns, duration_ns, s, cost);
  }
  void OnRequestDone(const RequestRecord& record) override {
    if (inner_ != nullptr) inner_->OnRequestDone(record);
    if ((++done_ & 1023) != 0) return;
    const double rate = done_ / std::max(line_.elapsed_s(), 1e-9);
    line_.Update(
        absl::StrFormat("%d/%d requests, %.0f/s, ETA %s", done_, total_, rate,
                        FormatDuration(total_ > 0 ? (total_ - done_) / rate : -1)));
  }
  // The closing line: requests and wall time.
  void Finish() {
    line_.Finish(
        absl::StrFormat("%d requests in %s", done_, FormatDuration(line_.elapsed_s())));
  }

 private:
  EngineObserver* inner_;
  int64_t total_;
  int64_t done_ = 0;
  ProgressLine line_;
};

// vLLM's current_dt: datetime.now().strftime("%Y%m%d-%H%M%S"), local time.
std::string NowDate() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y%m%d-%H%M%S", &tm);
  return buf;
}

// Where --save-result writes: the explicit path, else --result-dir /
// (--result-filename or vLLM's "vllm-<rate>qps[-concurrency<c>]-<model>-<date>.json"
// with the device(s) before the date, so runs on two devices do not collide).
std::string ResultPath(const SimulateArgs& args, const proto::ExperimentConfig& config) {
  if (!args.save_result.empty()) return args.save_result;
  std::string name = args.result_filename;
  if (name.empty()) {
    const proto::ClientConfig& c = config.client();
    std::string model = ResultModelId(config);
    if (const size_t slash = model.rfind('/'); slash != std::string::npos) {
      model = model.substr(slash + 1);
    }
    // 0 (unset) is the client default, inf.
    const double rate =
        c.request_rate() > 0 ? c.request_rate() : std::numeric_limits<double>::infinity();
    // vLLM: label = args.label or args.backend.
    name = absl::StrCat(args.label && !args.label->empty() ? *args.label : "vllm", "-",
                        PythonFloat(rate), "qps",
                        c.max_concurrency() > 0
                            ? absl::StrCat("-concurrency", c.max_concurrency())
                            : std::string(),
                        "-", model, "-", DevicesLabel(config), "-", args.date, ".json");
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
  if (args.save_result_given && !args.save_result.empty() &&
      (!args.result_dir.empty() || !args.result_filename.empty())) {
    return fail(absl::InvalidArgumentError(absl::StrCat(
        "--save-result ", args.save_result,
        " and --result-dir / --result-filename: give one (a path after --save-result "
        "names the file; without one, --result-dir and --result-filename place it)")));
  }
  if (args.interval_samples_given && !args.interval_given) {
    return fail(absl::InvalidArgumentError(
        "--interval-samples: given without --interval (it sets the draws of the "
        "--interval re-simulations)"));
  }
  absl::StatusOr<proto::ExperimentConfig> resolved_early = args.flags.Resolve();
  if (!resolved_early.ok()) return fail(resolved_early.status());
  absl::StatusOr<GoodputSlos> goodput = ParseGoodput(args.goodput);
  if (!goodput.ok()) return fail(goodput.status());
  if (args.date.empty()) {
    args.date = NowDate();
  } else if (const auto field =
                 [&](size_t at) {  // two digits, once all are known to be digits
                   return (args.date[at] - '0') * 10 + (args.date[at + 1] - '0');
                 };
             args.date.size() != 15 || args.date[8] != '-' ||
             !std::all_of(args.date.begin(), args.date.begin() + 8,
                          [](char c) { return c >= '0' && c <= '9'; }) ||
             !std::all_of(args.date.begin() + 9, args.date.end(),
                          [](char c) { return c >= '0' && c <= '9'; }) ||
             field(4) < 1 || field(4) > 12 || field(6) < 1 ||
             field(6) > DaysInMonth(field(0) * 100 + field(2), field(4)) ||
             field(9) > 23 || field(11) > 59 || field(13) > 59) {
    return fail(absl::InvalidArgumentError(absl::StrFormat(
        "--date: '%s' is not a date-time YYYYMMDD-HHMMSS (as vLLM's current_dt)",
        args.date)));
  }
  if (args.save_result_given) {
    // A label names the default result file (vLLM's): a '/' in it would put
    // the file in another folder, which vLLM does silently.
    if (args.save_result.empty() && args.result_filename.empty() && args.label &&
        args.label->find('/') != std::string::npos) {
      return fail(absl::InvalidArgumentError(absl::StrFormat(
          "--label %s: contains '/', which would put the default result file in "
          "another folder; give --result-dir / --result-filename for where it goes, "
          "or a label without '/'",
          *args.label)));
    }
    // Whatever names it (--save-result PATH, --result-dir, --result-filename
    // or the default name), an existing file is kept unless --overwrite.
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
  // Compared as the files they name (./x.json, d/../x.json and a link to
  // x.json are x.json), and never one of the run's inputs, --overwrite or
  // not (a --save-result over the --trace it replays replaced the trace).
  const auto same_file = [](const std::string& a, const std::string& b) {
    // (weakly_canonical leaves a relative path with no existing prefix
    // relative: made absolute first.)
    std::error_code ea, eb;
    const auto ca =
        std::filesystem::weakly_canonical(std::filesystem::absolute(a, ea), ea);
    const auto cb =
        std::filesystem::weakly_canonical(std::filesystem::absolute(b, eb), eb);
    return a == b || (!ea && !eb && ca == cb);
  };
  for (size_t i = 0; i < std::size(outputs); ++i) {
    for (size_t j = i + 1; j < std::size(outputs); ++j) {
      if (!outputs[i].second.empty() && !outputs[j].second.empty() &&
          same_file(outputs[i].second, outputs[j].second)) {
        return fail(absl::InvalidArgumentError(
            absl::StrFormat("%s and %s: both write %s; give different files",
                            outputs[i].first, outputs[j].first, outputs[i].second)));
      }
    }
  }
  const std::pair<const char*, std::string> inputs[] = {
      {"--trace", resolved_early->client().trace()},
      {"--config", args.flags.config_path()},
      {"--calibration", resolved_early->server().calibration_profile()}};
  for (const auto& [out_flag, out_path] : outputs) {
    for (const auto& [in_flag, in_path] : inputs) {
      if (!out_path.empty() && !in_path.empty() && same_file(out_path, in_path)) {
        return fail(absl::InvalidArgumentError(absl::StrFormat(
            "%s %s: the %s file of this run; give another file (even --overwrite does "
            "not write over an input)",
            out_flag, out_path, in_flag)));
      }
    }
  }
  // Checked before the run, not after it: a folder that is not there, or
  // a path that is a folder (the error came after minutes of --interval).
  for (const auto& [flag, path] : outputs) {
    if (path.empty()) continue;
    std::error_code ec;
    const std::filesystem::path parent = std::filesystem::path(path).parent_path();
    if (!parent.empty() && !std::filesystem::is_directory(parent, ec)) {
      return fail(absl::InvalidArgumentError(
          absl::StrFormat("%s %s: folder %s does not exist (create it first)", flag, path,
                          parent.string())));
    }
    if (std::filesystem::is_directory(path, ec)) {
      return fail(absl::InvalidArgumentError(
          absl::StrFormat("%s %s: is a folder; give a file path", flag, path)));
    }
  }
  for (const auto& [flag, path] : outputs) {
    const bool result = std::string_view(flag).starts_with("--save-result");
    if (absl::Status st = CheckOutputTarget(
            path, flag, args.overwrite,
            result ? "another --result-filename / --date" : "another file name");
        !st.ok()) {
      return fail(st);
    }
  }
  if (args.save_detailed && args.save_result.empty()) {
    return fail(absl::InvalidArgumentError(
        "--save-detailed: given without --save-result (it adds per-request arrays to "
        "that file)"));
  }
  proto::ExperimentConfig config = *std::move(resolved_early);
  if (!args.router.empty()) config.mutable_fleet()->set_router(args.router);
  // A router needs engines to choose between: with one it is ignored.
  if (!config.fleet().router().empty()) {
    int64_t engines = 0;
    for (const auto& r : config.fleet().replicas())
      engines +=
          int64_t{std::max(1, r.count())} * std::max(1, r.server().data_parallel_size());
    if (config.fleet().replicas_size() == 0)
      engines = std::max(1, config.server().data_parallel_size());
    if (engines <= 1) {
      return fail(absl::InvalidArgumentError(absl::StrFormat(
          "--router %s: the run has one engine (no fleet replicas, --data-parallel-size "
          "1), so there is nothing to route; give a fleet in --config or "
          "--data-parallel-size > 1, or drop --router",
          config.fleet().router())));
    }
  }
  IntervalOptions interval_options;
  interval_options.level = args.interval;
  interval_options.num_samples = args.interval_samples;
  interval_options.jobs = args.jobs;
  if (args.interval_given) {
    if (absl::Status st = ValidateIntervalOptions(interval_options); !st.ok()) {
      return fail(st);
    }
  }
  if (const double need = EstimateRunBytes(config, args.save_detailed),
      have = PhysicalMemoryBytes();
      !args.force && have > 0 && need > 0.8 * have) {
    return fail(absl::InvalidArgumentError(absl::StrFormat(
        "--num-prompts %d: the run needs at least %.3g GB (%.0f B per request kept%s), "
        "more than 80%% of this machine's %.3g GB; lower --num-prompts, give "
        "--max-concurrency or a finite --request-rate, or --force",
        config.client().num_prompts(), need / 1e9, kRecordBytes,
        EstimateRunBytes(config, false) > config.client().num_prompts() * kRecordBytes
            ? absl::StrFormat(", %.0f B per request in flight, all at once",
                              kInFlightBytes)
            : std::string(),
        have / 1e9)));
  }

  const std::string arrival_note = BenchArrivalNote(config.client());
  if (!arrival_note.empty()) {
    std::fprintf(stderr, "servesim simulate: note: %s\n", arrival_note.c_str());
  }
  EngineOptions opts;
  opts.keep_request_itls = args.save_detailed;
  std::unique_ptr<ChromeTraceRecorder> trace;
  if (!args.chrome_trace.empty()) {
    trace = std::make_unique<ChromeTraceRecorder>(args.chrome_trace_max_steps);
  }
  std::unique_ptr<ProgressObserver> progress_observer =
      std::make_unique<ProgressObserver>(trace.get(), config.client().num_prompts(),
                                         args.progress);
  if (!progress_observer->enabled()) progress_observer.reset();
  absl::StatusOr<ExperimentRun> run = RunExperiment(
      config, opts,
      progress_observer ? static_cast<EngineObserver*>(progress_observer.get())
                        : trace.get());
  if (progress_observer) progress_observer->Finish();
  if (!run.ok()) {
    // A deployment that does not fit: the error says what would.
    const absl::Status hinted = WithFitHint(run.status(), config);
    fail(hinted);
    if (!absl::IsResourceExhausted(run.status())) return kExitBadInput;
    std::fprintf(stderr,
                 "servesim simulate: note: `servesim memory` with the same server flags "
                 "shows the memory plan\n");
    if (args.json) {
      // A script reads the answer on stdout too (as `memory --json` gives it).
      JsonWriter w(2);
      w.BeginObject().KV("fits", false).KV("error", std::string(hinted.message()));
      w.KV("memory_plan", "servesim memory --json with the same server flags");
      w.EndObject();
      std::printf("%s\n", w.str().c_str());
    }
    return kExitDoesNotFit;
  }
  for (const std::string& w : UncalibratedWarnings(run->fleet.deployments)) {
    std::fprintf(stderr, "servesim simulate: warning: %s\n", w.c_str());
  }
  const std::unique_ptr<Engine>& engine = run->engine;

  const RunResult result = engine->Result();
  for (const std::string& w : FitRangeWarnings(*run, result)) {
    std::fprintf(stderr, "servesim simulate: warning: %s\n", w.c_str());
  }
  const std::string config_text = ConfigToText(config);
  ReportContext ctx = SimulateReportContext(config, *run, args.date);
  std::optional<IntervalReport> intervals;
  if (args.interval_given) {
    absl::StatusOr<IntervalReport> ir =
        ComputeIntervals(config, *run, ctx, interval_options,
                         config.client().has_seed() ? config.client().seed() : 0);
    if (!ir.ok()) return fail(ir.status());
    intervals = *std::move(ir);
    ctx.write_servesim_extra = [&intervals](JsonWriter& w) {
      WriteIntervalsJson(*intervals, w);
    };
  }

  const auto& records = engine->records();
  ctx.label = args.label;
  SetRequestGoodput(ctx, result, records, *goodput);

  if (!args.save_result.empty()) {
    const std::string json =
        BenchResultJson(result, ctx, records, engine->request_itls(), args.save_detailed);
    if (absl::Status st = WriteFile(args.save_result, json, "--save-result"); !st.ok()) {
      return fail(st);
    }
    // The config beside the result file; none beside a device (/dev/null,
    // /dev/stdout), where it would be a new file in /dev.
    std::error_code ec;
    const auto target = std::filesystem::status(args.save_result, ec);
    if (!std::filesystem::exists(target) || std::filesystem::is_regular_file(target)) {
      if (absl::Status st = WriteFile(args.save_result + ".config.textproto", config_text,
                                      "--save-result");
          !st.ok()) {
        return fail(st);
      }
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
    if (trace->dropped_steps() > 0) {
      std::fprintf(
          stderr,
          "servesim simulate: note: --chrome-trace %s holds the first %lld steps; "
          "%lld later steps were dropped (raise --chrome-trace-max-steps)\n",
          args.chrome_trace.c_str(), static_cast<long long>(args.chrome_trace_max_steps),
          static_cast<long long>(trace->dropped_steps()));
    }
  }
  if (args.json) {
    const std::string json =
        BenchResultJson(result, ctx, records, engine->request_itls(), args.save_detailed);
    std::fwrite(json.data(), 1, json.size(), stdout);
  } else {
    std::string text = SummaryText(result, ctx);
    if (intervals.has_value()) text += IntervalsText(*intervals);
    std::fwrite(text.data(), 1, text.size(), stdout);
    if (args.explain) {
      for (const std::string& p : ctx.provenance) std::printf("note: %s\n", p.c_str());
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
      "fleet router: round-robin | least-outstanding | vllm-dp | kv-aware "
      "|\nprefix-aware (default round-robin; vllm-dp with --data-parallel-size > 1)");
  cmd->add_option_function<std::string>(
      "--label", [args](const std::string& v) { args->label = v; },
      "the result's \"label\" key and the prefix of the default --save-result name "
      "(as vllm bench serve; default: null, the name starts with the backend, vllm)");
  cmd->add_option("--goodput", args->goodput,
                  "SLOs for request_goodput as vllm bench serve takes them: KEY:VALUE "
                  "pairs,\nKEY ttft, tpot or e2el, VALUE ms (e.g. --goodput ttft:500 "
                  "tpot:50);\nrequest_goodput is null when not given")
      ->expected(1, -1);
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
                  "<label>-<rate>qps[-concurrency<c>]-<model>-<device>-<date>.json,\n"
                  "<label> vllm unless --label: the device before the date, so two "
                  "devices do not collide)");
  cmd->add_flag("--save-detailed", args->save_detailed,
                "add per-request arrays (input_lens, ttfts, itls, ...) to the JSON");
  cmd->add_option("--requests-csv", args->requests_csv,
                  "one row per request with its timeline");
  cmd->add_option("--chrome-trace", args->chrome_trace,
                  "Chrome/Perfetto trace of steps and requests");
  cmd->add_option("--chrome-trace-max-steps", args->chrome_trace_max_steps,
                  absl::StrCat("steps kept in the --chrome-trace (default ",
                               ChromeTraceRecorder::kDefaultMaxSteps,
                               "; later ones are dropped, with a note on stderr)"))
      ->check(CLI::Range(int64_t{1}, int64_t{1'000'000'000}));
  cmd->add_option("--date", args->date,
                  "date-time YYYYMMDD-HHMMSS of the JSON \"date\" key and the default\n"
                  "--save-result name (default: now, as vLLM; pin it for reproducible "
                  "output)");
  AddProgressFlags(cmd, &args->progress);
  CLI::Option* interval = cmd->add_option(
      "--interval", args->interval,
      "prediction intervals at this level (0 < LEVEL < 1, e.g. 0.9) on every metric:\n"
      "parameter draws, workload seeds and the device's validate errors, apart and\n"
      "combined (servesim.intervals in the JSON; 2K more simulations)");
  CLI::Option* interval_samples = cmd->add_option(
      "--interval-samples", args->interval_samples,
      WithDefault("K: parameter draws, and workload seeds, per --interval run",
                  kDefaultIntervalSamples));
  cmd->add_option("--jobs,-j", args->jobs,
                  "threads for the --interval re-simulations (the output is "
                  "byte-identical whatever the count)")
      ->check(CLI::Range(1, 1024));
  cmd->add_flag("--force", args->force,
                "run even when the memory estimate exceeds 80% of this machine's");
  cmd->add_flag("--overwrite", args->overwrite,
                "let --save-result, --requests-csv and --chrome-trace replace\n"
                "existing files (refused otherwise, whoever named them)");
  cmd->callback([args, save, interval, interval_samples, exit_code] {
    args->save_result_given = save->count() > 0;
    args->interval_given = interval->count() > 0;
    args->interval_samples_given = interval_samples->count() > 0;
    *exit_code = RunSimulate(*args);
  });
}

}  // namespace servesim::cli
