// servesim validate: predicts every measured point of calibration/data the
// way it was measured, fits each (device, software build) with
// leave-one-cell-out cross-validation, checks the tolerances and
// the published tables' consistency. Exit 3 (kExitCheckFailed) when a point
// misses its tolerance; --refit also rewrites calibration/profiles/.
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "calibration/coverage.h"
#include "calibration/measurements.h"
#include "calibration/validation.h"
#include "experiments/capacity/sweep.h"
#include "experiments/cli/cli.h"
#include "experiments/cli/progress.h"

namespace servesim::cli {
namespace {

constexpr char kDefaultProfilesDir[] = "calibration/profiles";

struct ValidateFlags {
  bool json = false;
  std::string device;
  bool refit = false;
  bool no_held_out = false;
  std::string data_dir = kDefaultDataDir;
  std::string fit_config = kDefaultFitConfig;
  std::string profiles_dir = kDefaultProfilesDir;
  bool device_given = false;  // --device was on the command line (even if empty)
  int jobs = DefaultJobs();
  int progress = -1;  // 1: always, 0: never, -1: when stderr is a terminal
};

void Err(const std::string& s) {
  std::fprintf(stderr, "servesim validate: error: %s\n", s.c_str());
}

// Which flag sets a path, and where a relative one is looked for.
std::string PathHint(const char* flag) {
  std::error_code ec;
  return absl::StrFormat(
      "(set by %s; a relative path is taken from the current "
      "directory %s)",
      flag, std::filesystem::current_path(ec).string());
}

int RunValidate(const ValidateFlags& f) {
  const std::string& data_dir = f.data_dir;
  auto db = MeasurementDb::LoadNamed(data_dir);
  if (!db.ok()) {
    Err(absl::StrFormat("%s %s", db.status().message(), PathHint("--data")));
    return kExitBadInput;
  }
  if (f.device_given) {
    std::set<std::string> devices;  // those with measurements, in name order
    for (const auto& m : db->measurements())
      devices.insert(db->FindRun(m.run())->device());
    if (!devices.contains(f.device)) {
      Err(
          absl::StrFormat("--device: '%s' has no measurements in %s; allowed: %s (or "
                          "leave the flag out for every device)",
                          f.device, data_dir, absl::StrJoin(devices, ", ")));
      return kExitBadInput;
    }
  }
  if (f.refit && f.profiles_dir.empty()) {
    // "" + "/" + name would write the profiles at the filesystem root.
    Err("--profiles-dir: empty; give the folder the profiles are written to (default " +
        std::string(kDefaultProfilesDir) + ")");
    return kExitBadInput;
  }
  auto config = LoadNamedFitConfig(f.fit_config);
  if (!config.ok()) {
    Err(absl::StrFormat("%s %s", config.status().message(), PathHint("--fit-config")));
    return kExitBadInput;
  }
  if (f.refit && f.device_given) {
    // A shared parameter belongs to every member's profile: refit them all.
    for (const auto& jf : config->joint_fits()) {
      for (const auto& mem : jf.members()) {
        if (mem.device() != f.device) continue;
        std::vector<std::string> names;
        for (const auto& other : jf.members()) {
          if (&other == &mem) continue;
          names.push_back(absl::StrCat(other.device(), " / ", other.software_build()));
        }
        Err(absl::StrFormat(
            "--refit with --device %s: %s / %s is fitted jointly with %s (shared: %s), "
            "so their profiles must be written together; leave --device out",
            f.device, mem.device(), mem.software_build(), absl::StrJoin(names, ", "),
            absl::StrJoin(jf.shared_parameters(), ", ")));
        return kExitBadInput;
      }
    }
  }
  ValidateOptions options;
  options.device = f.device;
  options.skip_loo = f.no_held_out;
  options.jobs = f.jobs;
  ProgressLine progress("validate", f.progress);
  if (progress.enabled()) options.on_fit = FitProgress(progress);
  auto report = RunValidation(*db, *config, options);
  progress.Finish(absl::StrFormat("%s in %s", report.ok() ? "fitted" : "stopped",
                                  FormatDuration(progress.elapsed_s())));
  if (!report.ok()) {
    Err(std::string(report.status().message()));
    return kExitBadInput;
  }
  std::string out = f.json ? FormatReportJson(*report) : FormatReportText(*report);
  if (!f.no_held_out) {
    // Interval coverage over the block-held-out predictions
    // (calibration/coverage.h): a section under the table, or a "coverage"
    // key closing the JSON object.
    const CoverageReport coverage = ComputeCoverage(*report);
    if (f.json) {
      const size_t close = out.rfind('}');
      if (close != std::string::npos) {
        out.insert(close, absl::StrCat(",\"coverage\":", FormatCoverageJson(coverage)));
      }
    } else {
      out += FormatCoverageText(coverage);
    }
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
  if (f.refit) {
    // The device's main build: the group with the most fitted throughput
    // cells (output throughput or decode rate points; a cell's latency
    // metrics do not make a build the main one).
    std::map<const GroupReport*, int> cells;
    for (const GroupReport& g : report->groups) {
      for (const ValidatedPoint& v : report->points) {
        if (v.fitted && v.device == g.device && v.software_build == g.software_build &&
            (v.metric == "output_throughput" || v.metric == "decode_rate")) {
          ++cells[&g];
        }
      }
    }
    std::map<std::string, const GroupReport*> main;
    for (const GroupReport& g : report->groups) {
      auto& m = main[g.device];
      if (m == nullptr || cells[&g] > cells[m]) m = &g;
    }
    for (const GroupReport& g : report->groups) {
      if (g.free_parameters.empty()) continue;
      const std::string path = ProfilePath(f.profiles_dir, g, main[g.device] == &g);
      auto st = WriteProfile(MakeProfile(g, report->points, *db), path);
      if (!st.ok()) {
        Err(absl::StrFormat("%s %s", st.message(), PathHint("--profiles-dir")));
        return kExitBadInput;
      }
      std::fprintf(stderr, "wrote %s\n", path.c_str());
    }
  }
  return report->all_pass ? kExitOk : kExitCheckFailed;
}

}  // namespace

void RegisterValidateCommand(CLI::App& app, int* exit_code) {
  auto flags = std::make_shared<ValidateFlags>();
  CLI::App* cmd = app.add_subcommand(
      "validate",
      "Predict every measured point (calibration/data) the way it was measured; report "
      "in-sample and held-out errors, cost and KV rows, infeasible cells and the "
      "published "
      "tables' consistency. Exit 3 when a point misses its tolerance.");
  cmd->add_flag("--json", flags->json, "JSON instead of the table");
  CLI::Option* device = cmd->add_option(
      "--device", flags->device, "only this device (t4, l4, mi300x, tpu-v5e, tpu-v6e)");
  cmd->add_flag("--refit", flags->refit,
                "also write the fitted profiles to --profiles-dir (<device>.textproto)");
  cmd->add_flag(
      "--no-held-out", flags->no_held_out,
      "skip the leave-one-cell-out and block-held-out refits (faster; held-out = "
      "in-sample)");
  cmd->add_option("--data", flags->data_dir,
                  "folder of measurement *.textproto files (default: the shipped data, "
                  "embedded in the binary; nothing is read from the current directory)");
  cmd->add_option("--fit-config", flags->fit_config,
                  "free parameters per device/build (default: the shipped config, "
                  "embedded in the binary)");
  cmd->add_option("--profiles-dir", flags->profiles_dir,
                  "where --refit writes profiles (relative to the current directory; "
                  "run from the source tree and rebuild to ship them)")
      ->capture_default_str();
  cmd->add_option("--jobs,-j", flags->jobs,
                  "threads for the held-out refits (default: all cores; the report is "
                  "byte-identical whatever the count)")
      ->check(CLI::Range(1, 1024));
  AddProgressFlags(cmd, &flags->progress);
  cmd->callback([flags, device, exit_code] {
    flags->device_given = device->count() > 0;
    *exit_code = RunValidate(*flags);
  });
}

}  // namespace servesim::cli
