// Helpers for tests that run the built `servesim` binary: a scratch path
// unique to the running test, and one command's exit code, stdout and
// stderr. Header-only; the including target defines SERVESIM_BINARY and
// SERVESIM_SOURCE_DIR.
#ifndef SERVESIM_TESTS_CLI_RUN_H_
#define SERVESIM_TESTS_CLI_RUN_H_

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "gtest/gtest.h"

namespace servesim::cli_test {

inline std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

// Scratch file unique to the running test and process (ctest runs tests in
// parallel, and several checkouts may run the same test at once: /tmp is
// shared). The process is named by its pid and its start time: pids are
// reused, and a file left by an earlier process of the same pid made a
// test that writes without --overwrite fail now and then.
inline std::string Scratch(const std::string& suffix) {
  static const std::string kProcess =
      std::to_string(::getpid()) + "-" +
      std::to_string(std::chrono::system_clock::now().time_since_epoch().count());
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  return ::testing::TempDir() + "/cli_" + kProcess + "_" + info->test_suite_name() + "_" +
         info->name() + "_" + suffix;
}

struct CliRun {
  int exit_code = -1;
  std::string out, err;
};

// `servesim ARGS` run in `dir` (the repository root by default).
inline CliRun Servesim(const std::string& args,
                       const std::string& dir = SERVESIM_SOURCE_DIR) {
  const std::string out = Scratch("stdout.txt"), err = Scratch("stderr.txt");
  const std::string cmd = "cd '" + dir + "' && '" + SERVESIM_BINARY + "' " + args +
                          " >'" + out + "' 2>'" + err + "'";
  const int status = std::system(cmd.c_str());
  CliRun r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = ReadText(out);
  r.err = ReadText(err);
  return r;
}

}  // namespace servesim::cli_test

#endif  // SERVESIM_TESTS_CLI_RUN_H_
