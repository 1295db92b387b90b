// servesim simulate: placeholder until its issue lands (exits non-zero).
#include <cstdio>

#include "experiments/cli.h"

namespace servesim::cli {

void RegisterSimulateCommand(CLI::App& app, int* exit_code) {
  CLI::App* cmd = app.add_subcommand("simulate", "(not built yet)");
  cmd->callback([exit_code] {
    std::fprintf(stderr, "servesim simulate: not built yet\n");
    *exit_code = 1;
  });
}

}  // namespace servesim::cli
