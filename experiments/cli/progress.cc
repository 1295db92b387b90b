#include "experiments/cli/progress.h"

#include <unistd.h>

#include <cstdio>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "experiments/capacity/sweep.h"

namespace servesim::cli {

void AddProgressFlags(CLI::App* cmd, int* mode) {
  cmd->add_flag_function(
      "--progress", [mode](int64_t) { *mode = 1; },
      "progress line on stderr even when it is no terminal");
  cmd->add_flag_function(
      "--no-progress", [mode](int64_t) { *mode = 0; }, "no progress line");
}

ProgressLine::ProgressLine(std::string command, int mode)
    : command_(std::move(command)),
      enabled_(mode > 0 || (mode < 0 && isatty(STDERR_FILENO) == 1)),
      start_(std::chrono::steady_clock::now()) {}

double ProgressLine::elapsed_s() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

void ProgressLine::Update(const std::string& text, bool force) {
  if (!enabled_) return;
  const double now = elapsed_s();
  std::lock_guard<std::mutex> lock(mu_);
  if (finished_ || (!force && last_s_ >= 0 && now - last_s_ < 0.5)) return;
  last_s_ = now;
  std::string line = command_ + ": " + text;
  const size_t length = line.size();
  if (length < last_length_) line.append(last_length_ - length, ' ');
  last_length_ = length;
  std::fprintf(stderr, "\r%s", line.c_str());
  std::fflush(stderr);
}

void ProgressLine::Finish(const std::string& text) {
  if (!enabled_) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (finished_) return;
  finished_ = true;
  std::string line = command_ + ": " + text;
  if (line.size() < last_length_) line.append(last_length_ - line.size(), ' ');
  std::fprintf(stderr, "\r%s\n", line.c_str());
  std::fflush(stderr);
}

std::function<void(int, int, const std::string&)> FitProgress(ProgressLine& line) {
  return [&line](int done, int total, const std::string& label) {
    line.Update(absl::StrFormat("%d/%d fits done in %s%s", done, total,
                                FormatDuration(line.elapsed_s()),
                                label.empty() ? "" : absl::StrCat(" (now: ", label, ")")),
                /*force=*/done == 0 || done == total);
  };
}

}  // namespace servesim::cli
