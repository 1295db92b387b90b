// servesim validate: predicts every measured point of calibration/data the
// way it was measured, fits each (device, software build) with
// leave-one-cell-out cross-validation, checks the tolerances and
// the published tables' consistency. Exit 3 (kExitCheckFailed) when a point
// misses its tolerance; --refit also rewrites calibration/profiles/.
#include <cstdio>
#include <map>
#include <string>

#include "calibration/measurements.h"
#include "calibration/validation.h"
#include "experiments/cli.h"

namespace servesim::cli {
namespace {

struct ValidateFlags {
  bool json = false;
  std::string device;
  bool refit = false;
  bool no_held_out = false;
  std::string data_dir = kDefaultDataDir;
  std::string fit_config = kDefaultFitConfig;
  std::string profiles_dir = "calibration/profiles";
};

int RunValidate(const ValidateFlags& f) {
  auto db = MeasurementDb::LoadDir(f.data_dir);
  if (!db.ok()) {
    std::fprintf(stderr, "servesim validate: %s\n",
                 std::string(db.status().message()).c_str());
    return kExitBadInput;
  }
  auto config = LoadFitConfig(f.fit_config);
  if (!config.ok()) {
    std::fprintf(stderr, "servesim validate: %s\n",
                 std::string(config.status().message()).c_str());
    return kExitBadInput;
  }
  ValidateOptions options;
  options.device = f.device;
  options.skip_loo = f.no_held_out;
  auto report = RunValidation(*db, *config, options);
  if (!report.ok()) {
    std::fprintf(stderr, "servesim validate: %s\n",
                 std::string(report.status().message()).c_str());
    return kExitBadInput;
  }
  const std::string out = f.json ? FormatReportJson(*report) : FormatReportText(*report);
  std::fwrite(out.data(), 1, out.size(), stdout);
  if (f.refit) {
    // The device's main build: the group with the most fitted points.
    std::map<std::string, const GroupReport*> main;
    for (const GroupReport& g : report->groups) {
      auto& m = main[g.device];
      if (m == nullptr || g.num_fit_points > m->num_fit_points) m = &g;
    }
    for (const GroupReport& g : report->groups) {
      if (g.free_parameters.empty()) continue;
      const std::string path = ProfilePath(f.profiles_dir, g, main[g.device] == &g);
      auto st = WriteProfile(MakeProfile(g, report->points), path);
      if (!st.ok()) {
        std::fprintf(stderr, "servesim validate: %s\n",
                     std::string(st.message()).c_str());
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
  cmd->add_option("--device", flags->device,
                  "only this device (t4, l4, mi300x, tpu-v5e, tpu-v6e)");
  cmd->add_flag("--refit", flags->refit,
                "also write the fitted profiles to --profiles-dir (<device>.textproto)");
  cmd->add_flag("--no-held-out", flags->no_held_out,
                "skip the leave-one-cell-out refits (faster; held-out = in-sample)");
  cmd->add_option("--data", flags->data_dir, "folder of measurement *.textproto files")
      ->capture_default_str();
  cmd->add_option("--fit-config", flags->fit_config, "free parameters per device/build")
      ->capture_default_str();
  cmd->add_option("--profiles-dir", flags->profiles_dir, "where --refit writes profiles")
      ->capture_default_str();
  cmd->callback([flags, exit_code] { *exit_code = RunValidate(*flags); });
}

}  // namespace servesim::cli
