#include "sim/base/read_file.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace servesim {

absl::StatusOr<std::string> ReadTextFile(const std::string& path,
                                         const std::string& what) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " ", path, ": is a directory, not a file"));
  }
  errno = 0;
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(absl::StrCat(what, " ", path, ": cannot open",
                                            errno != 0 ? ": " : "",
                                            errno != 0 ? std::strerror(errno) : ""));
  }
  std::stringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return absl::DataLossError(absl::StrCat(what, " ", path, ": read error"));
  std::string text = ss.str();
  if (text.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " ", path, ": the file is empty"));
  }
  return text;
}

}  // namespace servesim
