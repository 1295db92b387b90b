// servesim._servesim: the pybind11 core of the Python module `servesim`
// (experiments/python/servesim/__init__.py wraps it). Two entry points,
// both over the CLI's own code:
//  - Simulate(argv): the flags of `servesim simulate` parsed by the same
//    ExperimentFlags, run by RunExperiment, reported by BenchResultJson with
//    SimulateReportContext: the JSON is the bytes `servesim simulate --json`
//    prints. Request records and (optionally) steps come back as numpy
//    arrays. The GIL is released while the simulation runs; calls from
//    several Python threads run in parallel.
//  - Cli(argv): any subcommand (memory, validate, calibrate, sweep, plan,
//    ...) run in-process exactly as `servesim ARGV...` runs it, with its
//    stdout and stderr captured. Capture redirects the process's file
//    descriptors 1 and 2, so these calls are serialised by a mutex (their
//    own --jobs threads still run in parallel inside).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <iostream>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "CLI/CLI.hpp"
#include "experiments/capacity/memory_fit.h"
#include "experiments/capacity/simulate_report.h"
#include "experiments/cli/cli.h"
#include "experiments/cli/server_flags.h"
#include "experiments/runner/run_experiment.h"
#include "sim/base/version.h"
#include "sim/engine.h"
#include "sim/report.h"
#include "sim/scheduler.h"

namespace py = pybind11;

namespace servesim::python {
namespace {

// Per-step batch composition and KV occupancy, one entry per step.
class StepRecorder : public EngineObserver {
 public:
  void OnStep(int32_t replica, TimeNs start_ns, TimeNs duration_ns, const Scheduler& s,
              const StepCost& cost) override {
    replica_.push_back(replica);
    start_ns_.push_back(start_ns);
    duration_ns_.push_back(duration_ns);
    num_seqs_.push_back(s.batch_num_seqs());
    num_tokens_.push_back(s.batch_num_tokens());
    num_prefills_.push_back(s.batch_num_prefills());
    num_decodes_.push_back(static_cast<int32_t>(s.batch().decode_context_lens.size()));
    preempted_.push_back(s.step_preemptions());
    running_.push_back(s.num_running());
    waiting_.push_back(s.num_waiting());
    kv_used_.push_back(s.kv().num_used_blocks());
    kv_total_.push_back(s.kv().num_blocks());
    host_ns_.push_back(cost.host_ns);
    device_ns_.push_back(cost.device_ns);
  }
  std::vector<int32_t> replica_, num_seqs_, num_tokens_, num_prefills_, num_decodes_,
      preempted_, running_, waiting_;
  std::vector<int64_t> start_ns_, duration_ns_, kv_used_, kv_total_, host_ns_, device_ns_;
};

template <typename T>
py::array_t<T> ToArray(std::vector<T>&& v) {
  auto* heap = new std::vector<T>(std::move(v));
  py::capsule owner(heap, [](void* p) { delete static_cast<std::vector<T>*>(p); });
  return py::array_t<T>(static_cast<py::ssize_t>(heap->size()), heap->data(), owner);
}

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
double Seconds(TimeNs t) { return t < 0 ? kNaN : static_cast<double>(t) / 1e9; }

// The records as columns (see RequestsCsv in sim/report.h: same columns,
// times in seconds, NaN where the CSV leaves a cell empty).
py::dict RequestColumns(const std::vector<RequestRecord>& records) {
  const size_t n = records.size();
  std::vector<int64_t> id(n);
  std::vector<int32_t> replica(n), input(n), output(n), preemptions(n), hits(n);
  std::vector<int8_t> status(n);
  std::vector<double> intended(n), send(n), arrival(n), sched(n), first(n), finish(n),
      ttft(n), e2el(n), queueing(n);
  for (size_t i = 0; i < n; ++i) {
    const RequestRecord& r = records[i];
    id[i] = r.id;
    replica[i] = r.replica;
    input[i] = r.input_tokens;
    output[i] = r.output_tokens;
    status[i] = static_cast<int8_t>(r.reject);
    intended[i] = Seconds(r.intended_ns);
    send[i] = Seconds(r.send_ns);
    arrival[i] = Seconds(r.arrival_ns);
    sched[i] = Seconds(r.first_scheduled_ns);
    first[i] = Seconds(r.first_token_ns);
    finish[i] = Seconds(r.finish_ns);
    const bool ok = r.ok();
    ttft[i] = ok ? static_cast<double>(r.first_token_ns - r.send_ns) / 1e6 : kNaN;
    e2el[i] = ok ? static_cast<double>(r.finish_ns - r.send_ns) / 1e6 : kNaN;
    queueing[i] =
        ok ? static_cast<double>(r.first_scheduled_ns - r.arrival_ns) / 1e6 : kNaN;
    preemptions[i] = r.preemptions;
    hits[i] = r.prefix_hit_tokens;
  }
  py::dict d;
  d["id"] = ToArray(std::move(id));
  d["replica"] = ToArray(std::move(replica));
  d["input_tokens"] = ToArray(std::move(input));
  d["output_tokens"] = ToArray(std::move(output));
  d["status"] = ToArray(std::move(status));
  d["intended_s"] = ToArray(std::move(intended));
  d["send_s"] = ToArray(std::move(send));
  d["arrival_s"] = ToArray(std::move(arrival));
  d["first_scheduled_s"] = ToArray(std::move(sched));
  d["first_token_s"] = ToArray(std::move(first));
  d["finish_s"] = ToArray(std::move(finish));
  d["ttft_ms"] = ToArray(std::move(ttft));
  d["e2el_ms"] = ToArray(std::move(e2el));
  d["queueing_ms"] = ToArray(std::move(queueing));
  d["preemptions"] = ToArray(std::move(preemptions));
  d["prefix_hit_tokens"] = ToArray(std::move(hits));
  return d;
}

std::vector<double> NsToSeconds(const std::vector<int64_t>& v) {
  std::vector<double> s(v.size());
  for (size_t i = 0; i < v.size(); ++i) s[i] = static_cast<double>(v[i]) / 1e9;
  return s;
}

py::dict StepColumns(StepRecorder& r) {
  py::dict d;
  d["replica"] = ToArray(std::move(r.replica_));
  d["start_s"] = ToArray(NsToSeconds(r.start_ns_));
  d["duration_s"] = ToArray(NsToSeconds(r.duration_ns_));
  d["num_seqs"] = ToArray(std::move(r.num_seqs_));
  d["num_tokens"] = ToArray(std::move(r.num_tokens_));
  d["num_prefills"] = ToArray(std::move(r.num_prefills_));
  d["num_decodes"] = ToArray(std::move(r.num_decodes_));
  d["preempted"] = ToArray(std::move(r.preempted_));
  d["running"] = ToArray(std::move(r.running_));
  d["waiting"] = ToArray(std::move(r.waiting_));
  d["kv_used_blocks"] = ToArray(std::move(r.kv_used_));
  d["kv_total_blocks"] = ToArray(std::move(r.kv_total_));
  d["host_s"] = ToArray(NsToSeconds(r.host_ns_));
  d["device_s"] = ToArray(NsToSeconds(r.device_ns_));
  return d;
}

// The request records of a run; columns() converts them on demand.
struct Records {
  std::vector<RequestRecord> records;
};

// argv without the program name, in order.
void ParseArgs(CLI::App& app, const std::vector<std::string>& argv) {
  std::vector<std::string> reversed(argv.rbegin(), argv.rend());
  app.parse(reversed);
}

// The flags of `servesim simulate` that shape its JSON; the others (files it
// writes, --explain) have Python equivalents.
py::dict Simulate(const std::vector<std::string>& argv, bool detailed,
                  bool record_steps) {
  cli::ExperimentFlags flags;
  std::string router;
  std::string date = "19700101-000000";
  std::optional<std::string> label;  // as cmd_simulate.cc: null when not given
  std::vector<std::string> goodput;  // --goodput KEY:VALUE ...
  CLI::App app("servesim simulate");
  flags.RegisterServerFlags(&app);
  flags.RegisterClientFlags(&app);
  flags.RegisterConfigFlags(&app);
  app.add_option("--router", router);
  app.add_option("--date", date);
  app.add_option_function<std::string>("--label",
                                       [&label](const std::string& v) { label = v; });
  app.add_option("--goodput", goodput)->expected(1, -1);
  try {
    ParseArgs(app, argv);
  } catch (const CLI::ParseError& e) {
    throw py::value_error(e.what());
  }
  absl::StatusOr<proto::ExperimentConfig> resolved = flags.Resolve();
  if (!resolved.ok()) throw py::value_error(std::string(resolved.status().message()));
  proto::ExperimentConfig config = *std::move(resolved);
  if (!router.empty()) config.mutable_fleet()->set_router(router);
  absl::StatusOr<GoodputSlos> slos = ParseGoodput(goodput);
  if (!slos.ok()) throw py::value_error(std::string(slos.status().message()));

  std::string json;
  std::vector<std::string> warnings;
  std::string error;
  std::unique_ptr<StepRecorder> steps;
  if (record_steps) steps = std::make_unique<StepRecorder>();
  auto records = std::make_shared<Records>();
  std::string config_text;
  {
    py::gil_scoped_release release;
    EngineOptions opts;
    opts.keep_request_itls = detailed;
    absl::StatusOr<ExperimentRun> run = RunExperiment(config, opts, steps.get());
    if (!run.ok()) {
      error = std::string(WithFitHint(run.status(), config).message());
    } else {
      warnings = UncalibratedWarnings(run->fleet.deployments);
      for (std::string& w : FitRangeWarnings(*run, run->engine->Result())) {
        warnings.push_back(std::move(w));
      }
      ReportContext ctx = SimulateReportContext(config, *run, date);
      ctx.label = label;
      SetRequestGoodput(ctx, run->engine->Result(), run->engine->records(), *slos);
      json = BenchResultJson(run->engine->Result(), ctx, run->engine->records(),
                             run->engine->request_itls(), detailed);
      config_text = ctx.resolved_config;
      records->records = run->engine->records();
    }
  }
  if (!error.empty()) throw py::value_error(error);
  py::dict out;
  out["json"] = py::bytes(json);
  out["config"] = config_text;
  out["warnings"] = warnings;
  out["requests"] = py::cast(records);
  out["steps"] = steps ? py::object(StepColumns(*steps)) : py::object(py::none());
  return out;
}

// Redirects file descriptor `fd` to a temporary file until Finish().
class FdCapture {
 public:
  explicit FdCapture(int fd) : fd_(fd), file_(std::tmpfile()) {
    if (file_ == nullptr)
      throw std::runtime_error("servesim: cannot create a temporary file");
    saved_ = dup(fd_);
    dup2(fileno(file_), fd_);
  }
  FdCapture(const FdCapture&) = delete;
  FdCapture& operator=(const FdCapture&) = delete;
  ~FdCapture() {
    if (saved_ >= 0) Restore();
    if (file_ != nullptr) std::fclose(file_);
  }
  std::string Finish() {
    Restore();
    std::string text;
    std::rewind(file_);
    char buf[65536];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, file_)) > 0) text.append(buf, n);
    return text;
  }

 private:
  void Restore() {
    dup2(saved_, fd_);
    close(saved_);
    saved_ = -1;
  }
  int fd_;
  FILE* file_;
  int saved_ = -1;
};

std::mutex& CliMutex() {
  static std::mutex m;
  return m;
}

// `servesim ARGV...` in-process, as servesim_main.cc runs it: (exit code,
// stdout, stderr).
py::tuple Cli(const std::vector<std::string>& argv) {
  int exit_code = 0;
  std::string out, err;
  {
    py::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(CliMutex());
    std::fflush(stdout);
    std::fflush(stderr);
    std::cout.flush();
    std::cerr.flush();
    FdCapture cap_out(1), cap_err(2);
    CLI::App app{"servesim"};
    app.require_subcommand(1, 1);
    app.set_version_flag("--version", std::string("servesim ") + VersionString() +
                                          " (commit " + CommitString() + ")");
    cli::RegisterSimulateCommand(app, &exit_code);
    cli::RegisterMemoryCommand(app, &exit_code);
    cli::RegisterValidateCommand(app, &exit_code);
    cli::RegisterCalibrateCommand(app, &exit_code);
    cli::RegisterTraceCommand(app, &exit_code);
    cli::RegisterSweepCommand(app, &exit_code);
    cli::RegisterPlanCommand(app, &exit_code);
    try {
      ParseArgs(app, argv);
    } catch (const CLI::ParseError& e) {
      // As servesim_main.cc: --help prints, an error reads as the CLI's.
      if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) {
        exit_code = app.exit(e);
      } else {
        std::fprintf(stderr, "%s\n", cli::ParseErrorText(app, e, argv).c_str());
        exit_code = cli::kExitBadInput;
      }
    } catch (const std::exception& e) {
      std::fprintf(stderr, "servesim: error: %s\n", e.what());
      exit_code = 1;
    }
    std::fflush(stdout);
    std::fflush(stderr);
    std::cout.flush();
    std::cerr.flush();
    out = cap_out.Finish();
    err = cap_err.Finish();
  }
  return py::make_tuple(exit_code, py::bytes(out), py::bytes(err));
}

}  // namespace
}  // namespace servesim::python

PYBIND11_MODULE(_servesim, m) {
  m.doc() = "servesim's C++ core; use the `servesim` package, not this module.";
  py::class_<servesim::python::Records, std::shared_ptr<servesim::python::Records>>(
      m, "Records")
      .def("__len__", [](const servesim::python::Records& r) { return r.records.size(); })
      .def(
          "columns",
          [](const servesim::python::Records& r) {
            return servesim::python::RequestColumns(r.records);
          },
          "The records as numpy columns (REQUEST_COLUMNS order, status as codes).");
  m.def("simulate", &servesim::python::Simulate, py::arg("argv"), py::arg("detailed"),
        py::arg("record_steps"),
        "Runs `servesim simulate ARGV --json` in-process; returns a dict with "
        "json (bytes), config (str), warnings, requests (columns) and steps.");
  m.def("cli", &servesim::python::Cli, py::arg("argv"),
        "Runs `servesim ARGV...` in-process; returns (exit_code, stdout, stderr).");
  m.def(
      "status_names",
      [] {
        // Code i of requests["status"]: "ok", then RejectReasonName(i).
        std::vector<std::string> names = {"ok"};
        for (int i = 1;
             i <= static_cast<int>(servesim::RejectReason::kExceedsBatchTokens); ++i) {
          names.emplace_back(
              servesim::RejectReasonName(static_cast<servesim::RejectReason>(i)));
        }
        return names;
      },
      "The status of each request code, as --requests-csv spells them.");
  m.def("version", [] {
    return std::string(servesim::VersionString()) + " (commit " +
           std::string(servesim::CommitString()) + ")";
  });
}
