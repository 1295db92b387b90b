// Reading a whole text file for the loaders of the project's own formats
// (calibration profiles, fit configs, measurement sets, sweep grids,
// experiment configs). One place for what every such loader must refuse:
// a path that is a directory (std::ifstream opens one on Linux and reads it
// as empty), a missing or unreadable file, and an empty file (a text proto
// parses as an all-defaults message, silently: a mistyped profile path
// must not turn into "no calibration").
#ifndef SERVESIM_SIM_BASE_READ_FILE_H_
#define SERVESIM_SIM_BASE_READ_FILE_H_

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"

namespace servesim {

// The most bytes ReadTextFile reads (256 MiB).
inline constexpr size_t kMaxTextFileBytes = size_t{256} << 20;

// The bytes of the regular file at `path`. `what` names the expected
// content in errors ("calibration profile", "--config"), which read
// "<what> <path>: <reason>". Errors: InvalidArgument for a directory or an
// empty file or one over kMaxTextFileBytes, NotFound for a file that cannot be opened
// (with errno's text), DataLoss for a read error.
// `max_bytes`: the cap (tests set a small one).
absl::StatusOr<std::string> ReadTextFile(const std::string& path, const std::string& what,
                                         size_t max_bytes = kMaxTextFileBytes);

}  // namespace servesim

#endif  // SERVESIM_SIM_BASE_READ_FILE_H_
