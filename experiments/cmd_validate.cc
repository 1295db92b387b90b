// servesim validate: placeholder until its issue lands (exits non-zero).
#include <cstdio>

#include "experiments/cli.h"

namespace servesim::cli {

void RegisterValidateCommand(CLI::App& app, int* exit_code) {
  CLI::App* cmd = app.add_subcommand("validate", "(not built yet)");
  cmd->callback([exit_code] {
    std::fprintf(stderr, "servesim validate: not built yet\n");
    *exit_code = 1;
  });
}

}  // namespace servesim::cli
