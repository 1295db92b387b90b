// servesim sweep --grid FILE --out DIR [--jobs N]: runs every point of a
// grid (proto/sweep.proto) through the simulator; resumable; results in
// point order whatever N. See experiments/capacity/sweep.h.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "experiments/capacity/intervals.h"
#include "experiments/capacity/memory_fit.h"
#include "experiments/capacity/sweep.h"
#include "experiments/capacity/sweep_shard.h"
#include "experiments/cli/cli.h"
#include "experiments/cli/server_flags.h"
#include "experiments/runner/run_experiment.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"
#include "hwmodels/deployment.h"
#include "sim/base/json_writer.h"
#include "sim/base/status_macros.h"
#include "sim/router.h"

namespace servesim {

namespace {

// The names of every server of `config` (device, model, quantization,
// dtype, calibration profile) and its router, checked as the run would
// check them; a deployment that merely does not fit is a result, not an
// error. `seen` skips servers already checked.
absl::Status CheckNames(const proto::ExperimentConfig& config,
                        std::set<std::string>& seen) {
  RETURN_IF_ERROR(MakeRouter(config.fleet().router()).status());
  std::vector<proto::ServerConfig> servers;
  if (config.fleet().replicas_size() == 0) servers.push_back(config.server());
  for (const proto::FleetReplica& r : config.fleet().replicas()) {
    servers.push_back(r.server());
  }
  for (const proto::ServerConfig& server : servers) {
    proto::ExperimentConfig tmp;
    *tmp.mutable_server() = server;
    ApplyDefaults(tmp);
    if (!seen.insert(tmp.server().SerializeAsString()).second) continue;
    absl::StatusOr<Deployment> d = BuildDeployment(ToServerSpec(tmp.server()));
    if (!d.ok() && !absl::IsResourceExhausted(d.status())) return d.status();
  }
  return absl::OkStatus();
}

// Set by SIGINT (Ctrl-C) or SIGTERM (Slurm's time limit, scancel) while a
// sweep runs: it takes no new point, writes the ones in flight and says how
// to resume. The handler resets itself, so a second signal ends the process
// at once (what is in the files stays: each point is one flushed append).
std::atomic<bool> g_interrupted{false};
volatile std::sig_atomic_t g_signal = 0;

extern "C" void OnSweepSignal(int sig) {
  g_signal = sig;
  g_interrupted.store(true);
  static constexpr char kMsg[] =
      "\nservesim sweep: interrupted: finishing the points in flight (signal again to "
      "quit now; finished results are kept)\n";
  const ssize_t written = write(STDERR_FILENO, kMsg, sizeof kMsg - 1);
  (void)written;
}

// Installs OnSweepSignal for SIGINT and SIGTERM while it lives, and puts the
// previous handlers back (the Python module runs sweeps in-process).
class SweepSignals {
 public:
  SweepSignals() {
    g_interrupted.store(false);
    g_signal = 0;
    struct sigaction sa = {};
    sa.sa_handler = OnSweepSignal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESETHAND;
    sigaction(SIGINT, &sa, &old_int_);
    sigaction(SIGTERM, &sa, &old_term_);
  }
  ~SweepSignals() {
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
  }
  SweepSignals(const SweepSignals&) = delete;
  SweepSignals& operator=(const SweepSignals&) = delete;

 private:
  struct sigaction old_int_ = {}, old_term_ = {};
};

}  // namespace

namespace cli {

// What a sweep holds per point: a finished point's two result lines (JSONL
// + CSV, every simulator metric: 1.24-1.49 KB of text in
// experiments/results/*/results.*) with string overheads, and its pointer.
constexpr double kResultBytesPerPoint = 2048;

void RegisterSweepCommand(CLI::App& app, int* exit_code) {
  struct Flags {
    std::string grid;
    std::string out;
    std::string shard;
    int jobs = 1;
    int64_t stop_after = -1;
    bool progress = false;
    bool no_progress = false;
    bool json = false;
    ServerFlags server;  // override the grid's base server
    bool replace = false;
    bool force = false;
    double memory_limit_gb = 0;  // 0: half of this machine's memory
    double interval = 0;         // --interval LEVEL; 0: off
    int interval_samples = kDefaultIntervalSamples;
  };
  auto flags = std::make_shared<Flags>();
  CLI::App* cmd = app.add_subcommand(
      "sweep",
      "Run a grid of experiments (cross product of axes over a base config) on N "
      "threads.\n"
      "Results stream to DIR/results.jsonl and DIR/results.csv and are rewritten in "
      "point\n"
      "order at the end (identical bytes whatever --jobs). Rerunning with the same grid\n"
      "resumes: finished points (same id and config hash) are kept.\n"
      "Memory: points are decoded one at a time as they run (a 10^7-point grid is not\n"
      "expanded); what is held is each finished point's result lines (about 2 KB) for\n"
      "the ordered rewrite, estimated before the run (--memory-limit-gb, --force).");
  CLI::Option* grid_opt =
      cmd->add_option("--grid", flags->grid,
                      "grid file (text-format servesim.proto.SweepGrid); required");
  CLI::Option* out_opt = cmd->add_option(
      "--out", flags->out, "output directory (created if missing); required");
  cmd->add_option("--shard", flags->shard,
                  "K/N: run only the points of shard K of N (point id % N == K; K as "
                  "SLURM_ARRAY_TASK_ID counts); join the shards with `sweep merge`");
  CLI::App* merge = RegisterSweepMergeCommand(cmd, exit_code);
  cmd->require_subcommand(0, 1);
  cmd->add_option("--jobs,-j", flags->jobs, "worker threads")->check(CLI::Range(1, 1024));
  cmd->add_option("--stop-after", flags->stop_after,
                  "stop taking new points after K finished and exit 1, resumable as an "
                  "interrupted run (for testing resumption, or a run in slices)");
  cmd->add_flag("--progress", flags->progress,
                "progress line even when stderr is no terminal");
  cmd->add_flag("--no-progress", flags->no_progress, "no progress line");
  cmd->add_flag("--json", flags->json, "print the summary as one JSON object on stdout");
  flags->server.Register(cmd);  // set on the grid's base server (axes still win)
  cmd->add_flag("--force", flags->force,
                "run a grid whose results may not fit this machine's memory");
  cmd->add_option("--memory-limit-gb", flags->memory_limit_gb,
                  "memory a grid may need (default: half of this machine's)")
      ->check(CLI::Range(0.001, 1e6));
  cmd->add_flag(
      "--overwrite,--replace", flags->replace,
      "discard finished results in --out that this run would not keep: another\n"
      "grid's, points an edited grid no longer has, another shard's, a results.csv\n"
      "with other columns (refused otherwise; results of this grid are resumed)");
  CLI::Option* interval_opt = cmd->add_option(
      "--interval", flags->interval,
      "add <metric>_lo / <metric>_hi columns: prediction intervals at this level\n"
      "(0 < LEVEL < 1) as simulate --interval makes them (2K + 1 more runs a point),\n"
      "and interval_saturated_runs: re-simulations that fell behind the offered rate");
  CLI::Option* samples_opt =
      cmd->add_option("--interval-samples", flags->interval_samples,
                      WithDefault("K for --interval: parameter draws and workload seeds",
                                  kDefaultIntervalSamples));
  cmd->callback([flags, exit_code, merge, grid_opt, out_opt, interval_opt, samples_opt] {
    if (merge->parsed()) return;  // `sweep merge` ran
    for (const CLI::Option* o : {grid_opt, out_opt}) {
      if (o->count() == 0) {
        std::fprintf(stderr, "servesim sweep: error: %s is required\n",
                     o->get_name().c_str());
        *exit_code = kExitBadInput;
        return;
      }
    }
    if (samples_opt->count() > 0 && interval_opt->count() == 0) {
      std::fprintf(stderr,
                   "servesim sweep: error: --interval-samples: given without --interval "
                   "(it sets the draws of the --interval re-simulations)\n");
      *exit_code = kExitBadInput;
      return;
    }
    ShardSpec shard;
    if (!flags->shard.empty()) {
      absl::StatusOr<ShardSpec> s = ParseShard(flags->shard);
      if (!s.ok()) {
        std::fprintf(stderr, "servesim sweep: error: %s\n",
                     std::string(s.status().message()).c_str());
        *exit_code = kExitBadInput;
        return;
      }
      shard = *s;
    }
    // DIR/grid.textproto is where the sweep writes its resolved grid: a grid
    // of the user's own kept there was overwritten (its comments lost). The
    // folder's own resolved grid may be given back (it is rewritten alike).
    if (std::error_code ec; std::filesystem::equivalent(
            flags->grid, std::filesystem::path(flags->out) / "grid.textproto", ec)) {
      std::ifstream in(flags->grid);
      std::string first;
      std::getline(in, first);
      if (!absl::StartsWith(first, "# servesim sweep: resolved grid")) {
        std::fprintf(
            stderr,
            "servesim sweep: error: --grid %s: is %s/grid.textproto, where the "
            "sweep writes its resolved grid; keep your grid file outside --out\n",
            flags->grid.c_str(), flags->out.c_str());
        *exit_code = kExitBadInput;
        return;
      }
    }
    absl::StatusOr<proto::SweepGrid> grid = ReadGridFile(flags->grid);
    if (!grid.ok()) {
      std::fprintf(stderr, "servesim sweep: error: %s\n",
                   std::string(grid.status().message()).c_str());
      *exit_code = kExitBadInput;
      return;
    }
    if (const auto given = flags->server.GivenNames();
        !given.empty() && grid->base().fleet().replicas_size() > 0) {
      std::fprintf(stderr,
                   "servesim sweep: error: %s: the grid's base defines a fleet "
                   "(fleet.replicas); set it in each replica's server instead\n",
                   given.front().c_str());
      *exit_code = kExitBadInput;
      return;
    }
    // A flag whose field an axis sweeps would be overridden at every point
    // (the axis wins): refused, naming both.
    {
      proto::ServerConfig given;
      if (flags->server.ApplyTo(given).ok()) {
        std::vector<const google::protobuf::FieldDescriptor*> set;
        given.GetReflection()->ListFields(given, &set);
        for (const auto* fd : set) {
          for (int a = 0; a < grid->axes_size(); ++a) {
            const std::string& path = grid->axes(a).path();
            const std::string field = absl::StrCat("server.", fd->name());
            if (path == field || absl::StartsWith(path, field + ".") ||
                absl::StartsWith(path, field + "[")) {
              std::string flag = fd->name();
              std::replace(flag.begin(), flag.end(), '_', '-');
              std::fprintf(
                  stderr,
                  "servesim sweep: error: --%s: axis %d (%s) of the grid sets it "
                  "at every point, so the flag would be ignored; drop the flag "
                  "or the axis\n",
                  flag.c_str(), a, path.c_str());
              *exit_code = kExitBadInput;
              return;
            }
          }
        }
      }
    }
    if (absl::Status st = flags->server.ApplyTo(*grid->mutable_base()->mutable_server());
        !st.ok()) {
      std::fprintf(stderr, "servesim sweep: error: %s\n",
                   std::string(st.message()).c_str());
      *exit_code = kExitBadInput;
      return;
    }
    auto bad = [&](const std::string& msg) {
      std::fprintf(stderr, "servesim sweep: error: %s\n", msg.c_str());
      *exit_code = kExitBadInput;
    };
    if (flags->out.empty()) return bad("--out: empty; give an output directory");
    if (std::error_code ec; std::filesystem::exists(flags->out, ec) &&
                            !std::filesystem::is_directory(flags->out, ec)) {
      return bad(absl::StrCat("--out ", flags->out, ": exists and is not a directory"));
    }
    // Points are decoded as they run (GridPoints), but every finished
    // point's two result lines stay in memory until the ordered rewrite:
    // refuse a grid whose results cannot fit unless forced.
    {
      const int64_t n = CountGridPoints(*grid);
      // --interval writes each metric three times (value, _lo, _hi): about
      // 5 KB of lines a point (measured), so the estimate triples.
      const double per_point = kResultBytesPerPoint * (flags->interval > 0 ? 3 : 1);
      const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
      const double limit = flags->memory_limit_gb > 0
                               ? flags->memory_limit_gb * 1e9
                               : (pages > 0 && page > 0 ? 0.5 * pages * page : 0);
      const double need = static_cast<double>(n) * per_point;
      if (!flags->force && limit > 0 && need > limit) {
        return bad(absl::StrFormat(
            "%s: %lld points need about %.3g GB in memory (%.0f B of results per point, "
            "held for the ordered rewrite), more than the %.3g GB allowed "
            "(--memory-limit-gb; default half "
            "of this machine's memory); split the grid, or --force",
            flags->grid, static_cast<long long>(n), need / 1e9, per_point, limit / 1e9));
      }
    }
    // Every point's configuration is range-checked before anything runs: a
    // bad value in a grid is an input error, not a failed point.
    // (One point decoded at a time: nothing is held per point.)
    absl::StatusOr<GridPoints> points = GridPoints::Make(*grid);
    if (!points.ok()) {
      return bad(absl::StrCat(flags->grid, ": ", points.status().message()));
    }
    std::set<std::string> seen;
    for (int64_t id = 0; id < points->size(); ++id) {
      absl::StatusOr<SweepPoint> p = points->Point(id);
      if (!p.ok()) return bad(absl::StrCat(flags->grid, ": ", p.status().message()));
      proto::ExperimentConfig c = p->config;
      ApplyDefaults(c);
      absl::Status st = ValidateRanges(c);
      if (st.ok()) st = CheckNames(p->config, seen);
      // A missing trace failed every point at run time (and, from another
      // folder, a relative path that holds in the repository does).
      if (const std::string& trace = c.client().trace();
          st.ok() && !trace.empty() && seen.insert("trace:" + trace).second) {
        std::error_code ec;
        if (!std::filesystem::is_regular_file(trace, ec)) {
          st = absl::InvalidArgumentError(absl::StrCat(
              "client.trace '", trace,
              "': no such file (a relative path is taken from the ",
              "current directory, ", std::filesystem::current_path(ec).string(), ")"));
        }
      }
      if (!st.ok()) {
        return bad(absl::StrCat(flags->grid, ": point ", p->id, " (",
                                absl::StrJoin(p->axis_values, ", "), "): ", st.message(),
                                " (no point was run)"));
      }
    }
    SweepOptions options;
    options.jobs = flags->jobs;
    options.stop_after = flags->stop_after;
    options.replace_other_results = flags->replace;
    options.shard_index = shard.index;
    options.shard_count = shard.count;
    options.progress = flags->no_progress ? 0 : (flags->progress ? 1 : -1);
    // An infeasible point's error says what would fit.
    PointRunner runner = WithFitHints(SimulatorPointRunner());
    if (interval_opt->count() > 0) {
      IntervalOptions io;
      io.level = flags->interval;
      io.num_samples = flags->interval_samples;
      if (absl::Status st = ValidateIntervalOptions(io); !st.ok()) {
        return bad(std::string(st.message()));
      }
      runner = WithIntervals(std::move(runner), io);
    }
    absl::StatusOr<SweepSummary> s;
    int signal_received = 0;
    {
      SweepSignals signals;
      options.interrupt = &g_interrupted;
      s = RunSweep(*grid, flags->out, runner, options);
      signal_received = g_signal;
    }
    if (!s.ok()) {
      std::fprintf(stderr, "servesim sweep: error: %s: %s\n", flags->grid.c_str(),
                   std::string(s.status().message()).c_str());
      // Bad input, or an output that cannot be written (a full disk, a
      // folder without write permission): 2. Anything else is a bug: 1.
      *exit_code =
          absl::IsInvalidArgument(s.status()) || absl::IsAlreadyExists(s.status()) ||
                  absl::IsDataLoss(s.status()) || absl::IsPermissionDenied(s.status())
              ? kExitBadInput
              : 1;
      return;
    }
    std::fprintf(
        stderr,
        "servesim sweep: %lld points (%lld resumed, %lld run, %lld infeasible, %lld "
        "failed)%s -> %s\n",
        static_cast<long long>(s->num_points), static_cast<long long>(s->num_resumed),
        static_cast<long long>(s->num_run), static_cast<long long>(s->num_infeasible),
        static_cast<long long>(s->num_failed),
        s->complete ? "" : " [stopped early; rerun to resume]", flags->out.c_str());
    if (signal_received != 0 && !s->complete) {
      std::fprintf(
          stderr,
          "servesim sweep: interrupted by %s: the %lld finished points are in "
          "%s; rerun the same command to run the rest\n",
          signal_received == SIGTERM ? "SIGTERM" : "SIGINT",
          static_cast<long long>(s->num_resumed) + static_cast<long long>(s->num_run),
          flags->out.c_str());
    }
    if (s->num_infeasible > 0) {
      std::fprintf(
          stderr,
          "servesim sweep: note: %lld infeasible point(s): status \"infeasible\" "
          "in %s/results.csv; for a model that does not fit, its error "
          "says what would (the fewest chips, the largest --max-model-len)\n",
          static_cast<long long>(s->num_infeasible), flags->out.c_str());
    }
    if (flags->json) {
      JsonWriter w(2);
      w.BeginObject().KV("grid", flags->grid).KV("out", flags->out);
      w.KV("points", s->num_points).KV("resumed", s->num_resumed);
      w.KV("run", s->num_run).KV("infeasible", s->num_infeasible);
      w.KV("failed", s->num_failed).KV("complete", s->complete);
      w.KV("interrupted", signal_received != 0 && !s->complete);
      w.KV("results_csv", absl::StrCat(flags->out, "/results.csv"));
      w.KV("results_jsonl", absl::StrCat(flags->out, "/results.jsonl"));
      w.EndObject();
      std::printf("%s\n", w.str().c_str());
    }
    // Infeasible points (the model does not fit) are results, recorded with
    // their reason. A point that failed for any other reason (a trace that
    // cannot be read, ...) is an input error: exit 2 (after every point ran).
    if (s->num_failed > 0) {
      std::fprintf(stderr,
                   "servesim sweep: error: %lld point(s) failed (status \"error\" in "
                   "%s/results.csv)\n",
                   static_cast<long long>(s->num_failed), flags->out.c_str());
      *exit_code = kExitBadInput;
      return;
    }
    // Interrupted: the shell's code for the signal (130 for SIGINT).
    *exit_code =
        s->complete ? kExitOk : (signal_received != 0 ? 128 + signal_received : 1);
  });
}

}  // namespace cli
}  // namespace servesim
