// servesim memory: placeholder until its issue lands (exits non-zero).
#include <cstdio>

#include "experiments/cli.h"

namespace servesim::cli {

void RegisterMemoryCommand(CLI::App& app, int* exit_code) {
  CLI::App* cmd = app.add_subcommand("memory", "(not built yet)");
  cmd->callback([exit_code] {
    std::fprintf(stderr, "servesim memory: not built yet\n");
    *exit_code = 1;
  });
}

}  // namespace servesim::cli
