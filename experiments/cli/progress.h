// The progress line of a long subcommand (simulate, plan, validate,
// calibrate): "\r<command>: <text>" rewritten in place on stderr, never on
// stdout, so the output a script reads is the same with or without it.
// On by default when stderr is a terminal; --progress forces it on,
// --no-progress off (AddProgressFlags). Thread-safe.
#ifndef SERVESIM_EXPERIMENTS_CLI_PROGRESS_H_
#define SERVESIM_EXPERIMENTS_CLI_PROGRESS_H_

#include <chrono>
#include <cstddef>
#include <functional>
#include <mutex>
#include <string>

#include "CLI/CLI.hpp"

namespace servesim::cli {

// --progress (sets *mode = 1) and --no-progress (*mode = 0) on `cmd`;
// leave *mode at -1 for "when stderr is a terminal".
void AddProgressFlags(CLI::App* cmd, int* mode);

class ProgressLine {
 public:
  // `mode`: 1 always, 0 never, -1 when stderr is a terminal. The clock
  // starts here.
  ProgressLine(std::string command, int mode);
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;

  bool enabled() const { return enabled_; }
  // Wall seconds since construction.
  double elapsed_s() const;
  // Rewrites the line with `text`, at most twice a second unless `force`
  // (padded with spaces over a longer previous line). No-op when disabled.
  void Update(const std::string& text, bool force = false);
  // Writes the closing line `text` and a newline (once; when enabled).
  void Finish(const std::string& text);

 private:
  const std::string command_;
  const bool enabled_;
  const std::chrono::steady_clock::time_point start_;
  std::mutex mu_;
  double last_s_ = -1;      // guarded by mu_
  size_t last_length_ = 0;  // guarded by mu_
  bool finished_ = false;   // guarded by mu_
};

// ValidateOptions::on_fit for `line`: "3/7 fits done in 12s (now: l4 /
// v0.11.0)".
std::function<void(int, int, const std::string&)> FitProgress(ProgressLine& line);

}  // namespace servesim::cli

#endif  // SERVESIM_EXPERIMENTS_CLI_PROGRESS_H_
