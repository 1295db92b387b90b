// servesim calibrate: fits a calibration profile from a user's own
// `vllm bench serve` result files (closed or open loop; fixed lengths, or
// per-request lengths replayed from the file's arrays), reports
// the in-sample fit and leave-one-cell-out errors, and saves the profile for
// `simulate --calibration PROFILE`.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "calibration/bench_import.h"
#include "calibration/measurements.h"
#include "calibration/predictor.h"
#include "calibration/validation.h"
#include "experiments/capacity/sweep.h"
#include "experiments/cli/cli.h"
#include "experiments/cli/output_files.h"
#include "experiments/cli/progress.h"
#include "experiments/cli/server_flags.h"
#include "hwmodels/catalog.h"
#include "hwmodels/catalog_priors.h"
#include "sim/metrics.h"

namespace servesim::cli {
namespace {

struct CalibrateFlags {
  ServerFlags server;  // the server the files were measured on
  std::vector<std::string> bench;
  std::string software_build = "user";
  std::string out;
  double tolerance_pct = 5;
  std::string fit_config = kDefaultFitConfig;
  bool json = false;
  int jobs = DefaultJobs();
  int progress = -1;  // 1: always, 0: never, -1: when stderr is a terminal
  bool overwrite = false;
};

std::string AllowedDeviceNamesForFit(const servesim::proto::FitConfig& c) {
  std::vector<std::string> names;
  for (const auto& s : c.fits()) {
    if (std::find(names.begin(), names.end(), s.device()) == names.end())
      names.push_back(s.device());
  }
  return absl::StrJoin(names, ", ");
}

constexpr double kMaxTolerancePct = 1000;

// The read line's median TTFT: the file's, and when some requests streamed
// no token or failed (older clients count their TTFT as 0), the median over
// the measured requests' ttfts, the one calibrate fits.
std::string MedianTtftText(const ImportedCell& c) {
  std::vector<double> measured_ms;
  const size_t n = c.ttfts.size();
  if (n > 0 && c.output_lens.size() == n) {
    measured_ms.reserve(n);
    for (size_t i = 0; i < n; ++i) {
      const bool error = c.errors.size() == n && !c.errors[i].empty();
      if (!error && c.output_lens[i] > 0) measured_ms.push_back(c.ttfts[i] * 1e3);
    }
  }
  if (measured_ms.empty() || measured_ms.size() == n) {
    return absl::StrFormat("median TTFT %.2f ms", c.median_ttft_ms);
  }
  const size_t measured = measured_ms.size();
  const LatencySummary t = Summarize(measured_ms);
  return absl::StrFormat(
      "median TTFT %.2f ms over the %d measured requests (the file's %.2f ms counts "
      "%d that streamed no token or failed)",
      t.median_ms, measured, c.median_ttft_ms, n - measured);
}

void Err(const std::string& s) {
  std::fprintf(stderr, "servesim calibrate: error: %s\n", s.c_str());
}

// Files, with folders expanded to their *.json / *.json.gz (sorted).
std::vector<std::string> ExpandPaths(const std::vector<std::string>& in) {
  std::vector<std::string> out;
  for (const std::string& p : in) {
    std::error_code ec;
    if (std::filesystem::is_directory(p, ec)) {
      std::vector<std::string> files;
      for (const auto& e : std::filesystem::directory_iterator(p, ec)) {
        const std::string name = e.path().filename().string();
        if (name.ends_with(".json") || name.ends_with(".json.gz"))
          files.push_back(e.path().string());
      }
      std::sort(files.begin(), files.end());
      out.insert(out.end(), files.begin(), files.end());
    } else {
      out.push_back(p);
    }
  }
  return out;
}

int RunCalibrate(const CalibrateFlags& f) {
  proto::ServerConfig server;
  if (absl::Status st = f.server.ApplyTo(server); !st.ok()) {
    Err(std::string(st.message()));
    return kExitBadInput;
  }
  for (const std::string& name : f.server.GivenNames()) {
    // A measurement run records neither (the fit starts from the device's
    // priors and assumes vLLM's 16-token blocks).
    if (name == "--calibration") {
      Err("--calibration: does not apply to calibrate (it fits a new profile, starting "
          "from the device's priors)");
      return kExitBadInput;
    }
    if (name == "--block-size") {
      Err("--block-size: does not apply to calibrate (a measurement run records no block "
          "size: the fit assumes vLLM's default 16-token KV blocks)");
      return kExitBadInput;
    }
  }
  // As memory and simulate check it (0, a negative value and NaN were
  // written into the profile's run).
  if (server.has_gpu_memory_utilization() &&
      !(server.gpu_memory_utilization() > 0 && server.gpu_memory_utilization() <= 1)) {
    Err(absl::StrCat("--gpu-memory-utilization: ", server.gpu_memory_utilization(),
                     " is outside (0, 1]"));
    return kExitBadInput;
  }
  // A measured server is re-simulated as one engine of
  // --tensor-parallel-size chips: a file measured behind vLLM's DP balancer,
  // over pipeline stages or with expert parallelism cannot be fitted yet.
  for (const auto& [value, name] :
       {std::pair{server.pipeline_parallel_size(), "--pipeline-parallel-size"},
        std::pair{server.data_parallel_size(), "--data-parallel-size"}}) {
    if (value > 1) {
      Err(
          absl::StrFormat("%s: %d is not supported by calibrate (allowed: 1; it fits one "
                          "engine of --tensor-parallel-size chips)",
                          name, value));
      return kExitBadInput;
    }
  }
  if (server.enable_expert_parallel()) {
    Err("--enable-expert-parallel: not supported by calibrate (expert parallelism is not "
        "modelled yet)");
    return kExitBadInput;
  }
  const std::string model_flag = server.model();
  ApplyServerDefaults(server);
  const std::string& device = server.device();
  // 0 or NaN would turn every per-point check off ("0 checks, 0 missed").
  if (!(std::isfinite(f.tolerance_pct) && f.tolerance_pct > 0 &&
        f.tolerance_pct <= kMaxTolerancePct)) {
    Err(
        absl::StrFormat("--tolerance-pct: %g is out of range (allowed: a finite "
                        "percentage > 0 and <= %g)",
                        f.tolerance_pct, kMaxTolerancePct));
    return kExitBadInput;
  }
  // The build label names the profile file (<device>@<build>.textproto):
  // checked before the fit, so a bad one costs nothing.
  if (f.software_build.empty() ||
      !std::all_of(f.software_build.begin(), f.software_build.end(), [](char ch) {
        return absl::ascii_isalnum(static_cast<unsigned char>(ch)) || ch == '.' ||
               ch == '_' || ch == '-' || ch == '+';
      })) {
    Err(
        absl::StrFormat("--software-build '%s': allowed: a non-empty label of letters, "
                        "digits and . _ - + "
                        "(it names the profile file <device>@<build>.textproto)",
                        f.software_build));
    return kExitBadInput;
  }
  const std::vector<std::string> paths = ExpandPaths(f.bench);
  if (paths.empty()) {
    Err(
        absl::StrFormat("--bench: no result files given (folders given: %s; a folder "
                        "contributes its *.json and *.json.gz files)",
                        absl::StrJoin(f.bench, ", ")));
    return kExitBadInput;
  }
  // One file given twice (directly and through its folder, or under two
  // names) would be fitted twice.
  for (size_t i = 0; i < paths.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      std::error_code ec;
      if (std::filesystem::equivalent(paths[i], paths[j], ec)) {
        Err(absl::StrFormat("--bench: %s and %s are the same file; give it once",
                            paths[j], paths[i]));
        return kExitBadInput;
      }
    }
  }
  // Measurement ids start with the file name; two files of one name (two
  // days' result.json) take their folder in the id as well.
  std::map<std::string, int> name_count;
  for (const std::string& p : paths)
    ++name_count[std::filesystem::path(p).filename().string()];
  // With --json, stdout carries exactly one JSON object: progress goes to stderr.
  FILE* const progress = f.json ? stderr : stdout;
  std::vector<ImportedCell> cells;
  for (const std::string& p : paths) {
    auto c = ImportBenchFile(p);
    if (!c.ok()) {
      Err(std::string(c.status().message()));
      return kExitBadInput;
    }
    if (const std::filesystem::path path(p); name_count[path.filename().string()] > 1) {
      c->id_stem = (path.parent_path().filename() / path.filename()).string();
    }
    std::fprintf(
        progress,
        "read %s: model %s, %lld requests, concurrency %s, request rate %s, %.1f in / "
        "%.1f out "
        "tokens%s%s; output %.1f tok/s, %s, median TPOT %.3f ms\n",
        p.c_str(), c->model_id.empty() ? "?" : c->model_id.c_str(),
        static_cast<long long>(c->num_prompts),
        c->max_concurrency > 0 ? std::to_string(c->max_concurrency).c_str() : "unlimited",
        std::isfinite(c->request_rate) ? absl::StrFormat("%g/s", c->request_rate).c_str()
                                       : "inf",
        c->input_tokens, c->output_tokens, c->fixed_lengths ? "" : " (varying lengths)",
        c->has_per_request ? ", per-request arrays" : "", c->output_throughput,
        MedianTtftText(*c).c_str(), c->median_tpot_ms);
    cells.push_back(*std::move(c));
  }
  // Repeats of one cell (same client and lengths) are averaged by the fit;
  // ones far apart are not run-to-run noise (write-up B's worst repeat CV
  // is 8%): another server, other flags or a warm cache. Said, not refused.
  for (size_t i = 0; i < cells.size(); ++i) {
    for (size_t j = i + 1; j < cells.size(); ++j) {
      const ImportedCell& a = cells[i];
      const ImportedCell& b = cells[j];
      if (a.max_concurrency != b.max_concurrency || a.request_rate != b.request_rate ||
          a.input_tokens != b.input_tokens || a.output_tokens != b.output_tokens ||
          !a.fixed_lengths || !b.fixed_lengths || !(a.output_throughput > 0) ||
          !(b.output_throughput > 0)) {
        continue;
      }
      const double ratio = std::max(a.output_throughput, b.output_throughput) /
                           std::min(a.output_throughput, b.output_throughput);
      if (ratio > 1.25) {
        std::fprintf(
            stderr,
            "servesim calibrate: warning: %s and %s measure the same cell, %.0f%% "
            "apart (output %.1f vs %.1f tok/s): more than run-to-run noise (another "
            "server, other flags, a warm cache?); the fit averages them\n",
            a.path.c_str(), b.path.c_str(), 100 * (ratio - 1), a.output_throughput,
            b.output_throughput);
      }
    }
  }

  // --device is an id or a device file; the profile names the file's hash.
  absl::StatusOr<servesim::proto::Device> device_file = FindDevice(device);
  if (!device_file.ok()) {
    Err(std::string(device_file.status().message()));
    return kExitBadInput;
  }
  // Checked before the fit, so that a refusal costs nothing.
  const std::string out =
      f.out.empty()
          ? absl::StrFormat("%s@%s.textproto", device_file->id(), f.software_build)
          : f.out;
  if (absl::Status st = CheckOutputTarget(out, "--out", f.overwrite); !st.ok()) {
    Err(std::string(st.message()));
    return kExitBadInput;
  }
  if (const std::filesystem::path folder = std::filesystem::path(out).parent_path();
      !folder.empty()) {
    std::error_code ec;
    if (!std::filesystem::is_directory(folder, ec)) {
      Err(absl::StrFormat("--out %s: folder %s does not exist (create it first)", out,
                          folder.string()));
      return kExitBadInput;
    }
  }
  servesim::proto::MeasurementSet set;
  auto* run = set.add_runs();
  run->set_id("user-run");
  run->set_device(device);
  std::string model = model_flag;
  if (model.empty()) {
    for (const ImportedCell& c : cells) {
      if (!c.model_id.empty()) {
        model = c.model_id;  // the first file's; the others must agree
        break;
      }
    }
  }
  if (model.empty()) {
    Err("--model is required (the result files name no model_id)");
    return kExitBadInput;
  }
  if (model_flag.empty()) {
    // The name came from the files, not from a flag: say so.
    if (auto known = FindModel(model); !known.ok()) {
      Err(absl::StrFormat(
          "the result files' model_id '%s' is not a model servesim knows (%s); pass "
          "--model with one of its ids, or a Hugging Face config.json path",
          model, known.status().message()));
      return kExitBadInput;
    }
  }
  // Every file must have measured that model: a result file of another
  // model in the folder would otherwise be fitted as this one. Ids compare
  // by the catalog entry they name (google/gemma-4-E2B-it is gemma-4-e2b);
  // an id servesim does not know (a private fine-tune's name) is taken as
  // the model given, with a note.
  if (absl::StatusOr<servesim::proto::ModelArch> want = FindModel(model); want.ok()) {
    for (const ImportedCell& c : cells) {
      if (c.model_id.empty()) continue;
      absl::StatusOr<servesim::proto::ModelArch> got = FindModel(c.model_id);
      if (!got.ok()) {
        // Taken as the model (a private fine-tune's name), but said as the
        // risk it is: another model's file here is fitted as this one's.
        std::fprintf(
            stderr,
            "servesim calibrate: warning: %s: model_id '%s' is not a model servesim "
            "knows; taken as %s (if it measured another model, leave the file out: "
            "its cells are fitted as %s's)\n",
            c.path.c_str(), c.model_id.c_str(), model.c_str(), model.c_str());
        continue;
      }
      if (got->id() != want->id()) {
        Err(absl::StrFormat(
            "%s: model_id '%s' (%s) is not the model being calibrated, %s (%s%s); "
            "calibrate one model at a time: leave this file out or pass its model",
            c.path, c.model_id, got->id(), model, want->id(),
            model_flag.empty() ? ", from another file's model_id" : ", from --model"));
        return kExitBadInput;
      }
    }
  }
  // vLLM refuses a request longer than the context (HTTP 400), so a result
  // file whose successful requests exceed it was measured under another
  // --max-model-len (or is not a vLLM file): fitting it would simulate
  // requests the server never ran.
  if (absl::StatusOr<servesim::proto::ModelArch> arch = FindModel(model); arch.ok()) {
    const int64_t context = server.max_model_len() > 0 ? server.max_model_len()
                                                       : arch->max_position_embeddings();
    for (const ImportedCell& c : cells) {
      if (context <= 0) break;
      std::string what;
      double longest = 0;
      if (!c.input_lens.empty()) {
        for (size_t i = 0; i < c.input_lens.size() && i < c.output_lens.size(); ++i) {
          if (i < c.errors.size() && !c.errors[i].empty()) continue;  // refused or failed
          const double n = static_cast<double>(c.input_lens[i]) + c.output_lens[i];
          if (n > longest) {
            longest = n;
            what = absl::StrFormat("input_lens[%d] + output_lens[%d]", i, i);
          }
        }
      } else {
        longest = c.input_tokens + c.output_tokens;
        what = "(total_input_tokens + total_output_tokens) / completed";
      }
      if (longest > static_cast<double>(context)) {
        Err(absl::StrFormat(
            "%s: %s: %.0f tokens is out of range (allowed: at most the context, %s %lld; "
            "vLLM refuses a longer request, so calibrate with the --max-model-len the "
            "server ran)",
            c.path, what, longest,
            server.max_model_len() > 0 ? "--max-model-len" : "the model's limit",
            static_cast<long long>(context)));
        return kExitBadInput;
      }
    }
  }
  run->set_model(model);
  run->set_dtype(server.dtype());
  run->set_quantization(server.quantization());
  run->set_software_build(f.software_build);
  run->set_max_model_len(server.max_model_len());
  run->set_gpu_memory_utilization(server.gpu_memory_utilization());
  run->set_max_num_seqs(server.max_num_seqs());
  run->set_max_num_batched_tokens(server.max_num_batched_tokens());
  run->set_async_scheduling(server.async_scheduling());
  run->set_enable_prefix_caching(server.enable_prefix_caching());
  run->set_tensor_parallel_size(std::max(1, server.tensor_parallel_size()));
  run->set_kv_cache_dtype(server.kv_cache_dtype());
  std::vector<std::string> refused;
  for (const ImportedCell& c : cells) {
    auto ms = CellMeasurements(c, run->id(), f.tolerance_pct);
    if (!ms.ok()) {
      refused.push_back(std::string(ms.status().message()));
      continue;
    }
    for (auto& m : *ms) *set.add_measurements() = std::move(m);
  }
  for (const std::string& r : refused) {
    std::fprintf(stderr, "servesim calibrate: note: not fitted: %s\n", r.c_str());
  }
  if (set.measurements().empty()) {
    Err("no result file gives a cell that can be re-simulated: nothing to fit");
    return kExitBadInput;
  }
  auto db = MeasurementDb::FromSets({set}, "calibrate");
  if (!db.ok()) {
    Err(std::string(db.status().message()));
    return kExitBadInput;
  }
  auto shipped = LoadNamedFitConfig(f.fit_config);
  if (!shipped.ok()) {
    std::error_code ec;
    Err(absl::StrFormat(
        "%s (set by --fit-config; a relative path is taken from the "
        "current directory %s)",
        shipped.status().message(), std::filesystem::current_path(ec).string()));
    return kExitBadInput;
  }
  // The device's entry for this --software-build, else its "user" entry
  // (the set meant for a user's own bench files), else its first one.
  const servesim::proto::FitSpec* chosen = nullptr;
  for (const std::string& build :
       {f.software_build, std::string("user"), std::string()}) {
    for (const auto& spec : shipped->fits()) {
      if (spec.device() == device && (build.empty() || spec.software_build() == build)) {
        chosen = &spec;
        break;
      }
    }
    if (chosen != nullptr) break;
  }
  // A device without its own entry (a user's device file, or a shipped
  // device nobody calibrated) takes the "user" entry of a calibrated device
  // of its vendor (by id), else of any calibrated device.
  std::string fit_rule;
  if (chosen == nullptr) {
    for (const bool same_vendor : {true, false}) {
      for (const servesim::proto::Device& d : EmbeddedDevices()) {
        if (!IsCalibratedDevice(d) ||
            (same_vendor && d.vendor() != device_file->vendor()))
          continue;
        for (const auto& spec : shipped->fits()) {
          if (spec.device() == d.id() && spec.software_build() == "user") {
            chosen = &spec;
            break;
          }
        }
        if (chosen != nullptr) break;
      }
      if (chosen != nullptr) break;
    }
    if (chosen != nullptr) {
      fit_rule =
          absl::StrFormat(" (%s has no entry: %s's user entry, by vendor %s)",
                          device_file->id(), chosen->device(), device_file->vendor());
    }
  }
  if (chosen == nullptr) {
    Err(absl::StrFormat("device '%s' has no fit specification in %s (devices: %s)",
                        device, f.fit_config, AllowedDeviceNamesForFit(*shipped)));
    return kExitBadInput;
  }
  servesim::proto::FitConfig config;
  auto* spec = config.add_fits();
  *spec = *chosen;
  spec->set_device(device);
  spec->set_software_build(f.software_build);
  // Keep the free parameters this deployment has: no quant_kernel_eff for
  // an unquantized model, no client parameter of write-up A's SageMaker
  // method (bench files never use it).
  auto predictor = Predictor::Create(*db, {db->measurements().front().id()});
  if (!predictor.ok()) {
    Err(std::string(predictor.status().message()));
    return kExitBadInput;
  }
  spec->clear_free_parameters();
  std::vector<std::string> dropped;
  for (const std::string& name : chosen->free_parameters()) {
    const bool has =
        name == kApiOverheadParam || (name != kParallelCallExtraParam &&
                                      predictor->base_params().Find(name) != nullptr);
    if (has) {
      spec->add_free_parameters(name);
    } else {
      dropped.push_back(name);
    }
  }
  std::fprintf(progress, "fit: %s / %s parameters of %s%s (%s)%s%s\n",
               chosen->device().c_str(), chosen->software_build().c_str(),
               f.fit_config.c_str(), fit_rule.c_str(),
               absl::StrJoin(spec->free_parameters(), ", ").c_str(),
               dropped.empty() ? "" : "; not in this deployment: ",
               absl::StrJoin(dropped, ", ").c_str());
  ValidateOptions options;
  options.shipped_data_checks = false;
  options.jobs = f.jobs;
  ProgressLine progress_line("calibrate", f.progress);
  if (progress_line.enabled()) options.on_fit = FitProgress(progress_line);
  auto report = RunValidation(*db, config, options);
  progress_line.Finish(absl::StrFormat("%s in %s", report.ok() ? "fitted" : "stopped",
                                       FormatDuration(progress_line.elapsed_s())));
  if (!report.ok()) {
    Err(std::string(report.status().message()));
    return kExitBadInput;
  }
  const std::string text = f.json ? FormatReportJson(*report) : FormatReportText(*report);
  std::fwrite(text.data(), 1, text.size(), stdout);
  servesim::proto::CalibrationProfile profile =
      MakeProfile(report->groups.front(), report->points, *db);
  // Named by id, and bound to this exact device file by its hash.
  profile.set_device(device_file->id());
  profile.set_device_content_hash(device_file->content_hash());
  std::vector<std::string> names;
  names.reserve(paths.size());
  for (const std::string& p : paths) names.push_back(std::filesystem::path(p).filename());
  profile.set_notes(absl::StrFormat(
      "Written by `servesim calibrate` from %s (model %s%s); parameters not listed keep "
      "their priors.",
      absl::StrJoin(names, ", "), model,
      run->tensor_parallel_size() > 1
          ? absl::StrFormat(", tensor parallel %d", run->tensor_parallel_size())
          : std::string()));
  auto st = WriteProfile(profile, out);
  if (!st.ok()) {
    Err(std::string(st.message()));
    return kExitBadInput;
  }
  std::fprintf(stderr, "wrote %s (use: servesim simulate --calibration %s ...)\n",
               out.c_str(), out.c_str());
  return report->all_pass ? kExitOk : kExitCheckFailed;
}

}  // namespace

void RegisterCalibrateCommand(CLI::App& app, int* exit_code) {
  auto f = std::make_shared<CalibrateFlags>();
  CLI::App* cmd = app.add_subcommand("calibrate",
                                     "Fit a calibration profile from your own `vllm "
                                     "bench serve` result files (closed loop or "
                                     "--request-rate; fixed lengths, or per-request "
                                     "lengths from --save-detailed files), report "
                                     "in-sample and leave-one-out errors, save the "
                                     "profile. Exit 3 when a point misses its "
                                     "tolerance (the profile is still written).");
  f->server.Register(cmd);  // the flags the measured server ran with
  f->server.device()->required();
  cmd->add_option("--bench", f->bench,
                  "result files (.json, .json.gz) or folders of them")
      ->required()
      ->expected(1, -1);
  cmd->add_option("--software-build", f->software_build,
                  "label stored in the profile (letters, digits, . _ - +)")
      ->capture_default_str();
  cmd->add_option("--out", f->out,
                  "profile to write (default <device>@<build>.textproto; an existing "
                  "file only with --overwrite)");
  cmd->add_flag("--overwrite", f->overwrite, "let --out replace an existing profile");
  cmd->add_option("--tolerance-pct", f->tolerance_pct, "per-point check")
      ->capture_default_str();
  cmd->add_option("--fit-config", f->fit_config,
                  "free parameters per device (default: the shipped config, embedded in "
                  "the binary)");
  cmd->add_flag("--json", f->json, "JSON report");
  cmd->add_option("--jobs,-j", f->jobs,
                  "threads for the held-out refits (default: all cores; the report is "
                  "byte-identical whatever the count)")
      ->check(CLI::Range(1, 1024));
  AddProgressFlags(cmd, &f->progress);
  cmd->callback([f, exit_code] { *exit_code = RunCalibrate(*f); });
}

}  // namespace servesim::cli
