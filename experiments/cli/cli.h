// Reading guide to experiments/cli/ (the command line; -> capacity/,
// calibration/). Start here, then servesim_main.cc; server_flags.h holds the
// `vllm serve` / `vllm bench serve` flags (CLI11) that fill an
// ExperimentConfig (its defaults and checks: experiments/runner/config.h);
// each cmd_<name>.cc binds one subcommand's flags to the libraries below
// and prints; progress.h is the stderr progress line. *_cli_test.cc run
// the built binary.
//
// The `servesim` command line: one binary, one subcommand per file
// (cmd_<name>.cc). Each Register* function adds its subcommand to `app`
// and, when that subcommand runs, stores the process exit code in
// `*exit_code`. No exception leaves a subcommand except CLI11's own parse
// errors, which main() turns into a message and exit code.
#ifndef SERVESIM_EXPERIMENTS_CLI_CLI_H_
#define SERVESIM_EXPERIMENTS_CLI_CLI_H_

#include <algorithm>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace servesim::cli {

void RegisterSimulateCommand(CLI::App& app, int* exit_code);
void RegisterMemoryCommand(CLI::App& app, int* exit_code);
void RegisterValidateCommand(CLI::App& app, int* exit_code);
void RegisterCalibrateCommand(CLI::App& app, int* exit_code);
void RegisterTraceCommand(CLI::App& app, int* exit_code);
void RegisterSweepCommand(CLI::App& app, int* exit_code);
void RegisterPlanCommand(CLI::App& app, int* exit_code);
void RegisterDevicesCommand(CLI::App& app, int* exit_code);
void RegisterModelsCommand(CLI::App& app, int* exit_code);
// `servesim sweep merge SHARD_DIR... --out DIR` under the sweep subcommand
// (cmd_sweep_merge.cc); returns it.
CLI::App* RegisterSweepMergeCommand(CLI::App* sweep, int* exit_code);

// Exit codes shared by every subcommand.
constexpr int kExitOk = 0;
constexpr int kExitBadInput = 2;  // bad flag, file or record
constexpr int kExitCheckFailed =
    3;  // validate: a point missed; plan: no fleet meets the SLO
// memory, simulate: the deployment does not fit in the device's memory
// (memory still prints its plan and what would fit).
constexpr int kExitDoesNotFit = 4;

// Default --jobs of `validate` and `calibrate` (their reports do not depend
// on it): every hardware thread, 1 when unknown. (It ignores container CPU
// limits.) `sweep` and `plan` default to 1.
inline int DefaultJobs() {
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

// A flag's help: "<text> (default <value>)", `value` read from the one home
// of that default (a struct's initialiser, a named constant), so a changed
// default changes its help. OnOff spells a bool default.
template <typename T>
std::string WithDefault(const std::string& text, const T& value) {
  return absl::StrCat(text, text.empty() ? "" : " ", "(default ", value, ")");
}
inline const char* OnOff(bool on) { return on ? "on" : "off"; }

// CLI11's parse error `e` of `app` in the form every subcommand's errors
// take: "servesim <subcommand>: error: <what>" (plain "servesim: error:"
// before a subcommand is known) and a line naming its --help. `args` are the
// words after the program name: where a command that needs a subcommand got
// none, its first word that is no flag is named as the unknown subcommand,
// with the choices (CLI11 says only "A subcommand is required").
inline std::string ParseErrorText(const CLI::App& app, const CLI::ParseError& e,
                                  const std::vector<std::string>& args) {
  std::string who = "servesim";
  std::vector<std::string> path;  // the subcommands parsed, outermost first
  const CLI::App* at = &app;
  while (true) {
    const std::vector<const CLI::App*> subs =
        at->get_subcommands([](const CLI::App* s) { return s->parsed(); });
    if (subs.empty()) break;
    at = subs.front();
    who += " " + at->get_name();
    path.push_back(at->get_name());
  }
  std::string what = e.what();
  const std::vector<const CLI::App*> choices =
      at->get_subcommands([](const CLI::App*) { return true; });
  if (dynamic_cast<const CLI::RequiredError*>(&e) != nullptr &&
      at->get_require_subcommand_min() > 0 && !choices.empty()) {
    std::vector<std::string> names;
    for (const CLI::App* c : choices) names.push_back(c->get_name());
    size_t matched = 0;  // words of `path` seen so far
    std::string unknown;
    for (const std::string& word : args) {
      if (word.empty() || word[0] == '-') continue;
      if (matched < path.size() && word == path[matched]) {
        ++matched;
        continue;
      }
      unknown = word;
      break;
    }
    what = unknown.empty() ? "a subcommand is required"
                           : absl::StrCat("unknown subcommand '", unknown, "'");
    absl::StrAppend(&what, " (one of: ", absl::StrJoin(names, ", "), ")");
  }
  // A single-value flag given twice: CLI11 says "FLAG: At Most 1 required
  // but received N"; name the values (vLLM's argparse would silently take
  // the last, a script's typo either way).
  if (const size_t at_most = what.find(": At Most 1 required but received ");
      dynamic_cast<const CLI::ArgumentMismatch*>(&e) != nullptr &&
      at_most != std::string::npos) {
    const std::string flag = what.substr(0, at_most);
    std::vector<std::string> values;
    for (size_t i = 0; i < args.size(); ++i) {
      if (args[i] == flag && i + 1 < args.size()) {
        values.push_back(args[i + 1]);
      } else if (absl::StartsWith(args[i], flag + "=")) {
        values.push_back(args[i].substr(flag.size() + 1));
      }
    }
    what = absl::StrCat(
        flag, ": given ", values.size() > 1 ? values.size() : 2, " times",
        values.empty() ? "" : absl::StrCat(" (", absl::StrJoin(values, ", "), ")"),
        "; give it once");
  }
  return who + ": error: " + what + "\n(run '" + who + " --help' for the flags)";
}

}  // namespace servesim::cli

#endif  // SERVESIM_EXPERIMENTS_CLI_CLI_H_
