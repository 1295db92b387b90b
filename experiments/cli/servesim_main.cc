// servesim: simulate LLM inference serving (vLLM V1) without the hardware.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "experiments/cli/cli.h"
#include "google/protobuf/stubs/logging.h"
#include "sim/base/version.h"
#include "sim/base/write_file.h"

namespace {

// Standard output that could not be written (a full disk, a closed or
// broken descriptor) fails the run: a script redirecting `--json` into a
// file must not get a truncated file and exit status 0. stdio reports a
// failed write through ferror, a failed final flush through fflush (with
// errno, named when it is this flush's; an earlier write's is not known).
// The message names the subcommand, as every other error does.
int FinishStdout(const CLI::App& app, int exit_code) {
  errno = 0;
  const bool failed = std::fflush(stdout) != 0 || std::ferror(stdout) != 0;
  if (!failed) return exit_code;
  const int err = errno;
  std::string who = "servesim";
  for (const CLI::App* at = &app;;) {
    const std::vector<const CLI::App*> subs =
        at->get_subcommands([](const CLI::App* s) { return s->parsed(); });
    if (subs.empty()) break;
    at = subs.front();
    who += " " + at->get_name();
  }
  std::fprintf(stderr, "%s: error: could not write standard output%s%s\n", who.c_str(),
               err != 0 ? ": " : "", err != 0 ? std::strerror(err) : "");
  return exit_code == servesim::cli::kExitOk ? servesim::cli::kExitBadInput : exit_code;
}

}  // namespace

int main(int argc, char** argv) {
  // Ctrl-C or a kill while a result file is written leaves no temporary.
  servesim::RemoveTemporariesOnSignals();
  // Every parse failure is reported as servesim's own error (file, record,
  // field); libprotobuf's log lines ("[libprotobuf ERROR ...] String field
  // contains invalid UTF-8") would only repeat it in another form.
  google::protobuf::SetLogHandler(nullptr);
  CLI::App app{
      "servesim: a discrete-event simulator of vLLM-style LLM inference serving.\n"
      "Predicts TTFT, TPOT/ITL, throughput, KV-cache fit and cost on t4, l4, "
      "mi300x, tpu-v5e and tpu-v6e."};
  app.require_subcommand(1, 1);
  app.set_version_flag("--version", std::string("servesim ") + servesim::VersionString() +
                                        " (commit " + servesim::CommitString() + ")");
  int exit_code = 0;
  servesim::cli::RegisterSimulateCommand(app, &exit_code);
  servesim::cli::RegisterMemoryCommand(app, &exit_code);
  servesim::cli::RegisterValidateCommand(app, &exit_code);
  servesim::cli::RegisterCalibrateCommand(app, &exit_code);
  servesim::cli::RegisterTraceCommand(app, &exit_code);
  servesim::cli::RegisterSweepCommand(app, &exit_code);
  servesim::cli::RegisterPlanCommand(app, &exit_code);
  servesim::cli::RegisterDevicesCommand(app, &exit_code);
  servesim::cli::RegisterModelsCommand(app, &exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version print and exit 0; parse errors take the form of
    // every other error: "servesim <subcommand>: error: ...".
    if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success))
      return FinishStdout(app, app.exit(e));
    const std::vector<std::string> args(argv + 1, argv + argc);
    std::fprintf(stderr, "%s\n", servesim::cli::ParseErrorText(app, e, args).c_str());
    return servesim::cli::kExitBadInput;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "servesim: error: %s\n", e.what());
    return 1;
  }
  return FinishStdout(app, exit_code);
}
