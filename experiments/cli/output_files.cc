#include "experiments/cli/output_files.h"

#include <filesystem>

#include "absl/strings/str_cat.h"

namespace servesim::cli {

absl::Status CheckOutputTarget(const std::string& path, std::string_view flag,
                               bool overwrite, std::string_view hint) {
  namespace fs = std::filesystem;
  if (path.empty() || overwrite) return absl::OkStatus();
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (ec || !fs::exists(st)) return absl::OkStatus();
  if (!fs::is_regular_file(st) && !fs::is_directory(st)) return absl::OkStatus();
  return absl::AlreadyExistsError(absl::StrCat(
      std::string(flag), ": ", path, " exists; give --overwrite to replace it",
      hint.empty() ? "" : ", or ", std::string(hint)));
}

}  // namespace servesim::cli
