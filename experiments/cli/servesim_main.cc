// servesim: simulate LLM inference serving (vLLM V1) without the hardware.
#include <cstdio>
#include <exception>
#include <string>

#include "experiments/cli/cli.h"
#include "sim/base/version.h"

int main(int argc, char** argv) {
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
      return app.exit(e);
    std::fprintf(stderr, "%s\n", servesim::cli::ParseErrorText(app, e).c_str());
    return servesim::cli::kExitBadInput;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "servesim: error: %s\n", e.what());
    return 1;
  }
  return exit_code;
}
