#include "sim/base/read_file.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <system_error>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace servesim {

absl::StatusOr<std::string> ReadTextFile(const std::string& path, const std::string& what,
                                         size_t max_bytes) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " ", path, ": is a directory, not a file"));
  }
  // A regular file's size is known before reading: one over the cap is
  // refused without loading it (a 600 MB file took 534 MB to refuse).
  if (std::filesystem::is_regular_file(path, ec)) {
    if (const auto size = std::filesystem::file_size(path, ec); !ec && size > max_bytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, " ", path, ": larger than ", max_bytes,
          " bytes (servesim's text formats are far smaller: is it the right file?)"));
    }
  }
  errno = 0;
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(absl::StrCat(what, " ", path, ": cannot open",
                                            errno != 0 ? ": " : "",
                                            errno != 0 ? std::strerror(errno) : ""));
  }
  // Read in chunks up to the cap: an endless source (/dev/zero, a FIFO fed
  // forever) is an error, not a process that grows until it is killed.
  std::string text;
  char buf[1 << 16];
  while (in.read(buf, sizeof(buf)) || in.gcount() > 0) {
    text.append(buf, static_cast<size_t>(in.gcount()));
    if (text.size() > max_bytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, " ", path, ": larger than ", max_bytes,
          " bytes (servesim's text formats are far smaller: is it the right file?)"));
    }
  }
  if (in.bad()) return absl::DataLossError(absl::StrCat(what, " ", path, ": read error"));
  if (text.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " ", path, ": the file is empty"));
  }
  return text;
}

}  // namespace servesim
