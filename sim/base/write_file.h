// Whole-file writes for every result file servesim writes (simulate's
// --save-result, --requests-csv and --chrome-trace, calibrate --out, the
// sweep's results and merge output, trace convert / generate OUTPUT): a
// file is written whole or not at all. The bytes go to a temporary beside
// the target (same folder, so the same file system), which is renamed over
// the target only once every byte is written and closed; on any failure the
// temporary is removed and the error names the target and the system's
// reason ("No space left on device"). A target that exists and is not a
// regular file (/dev/stdout, a FIFO) is written in place: no rename can
// replace it. A symlink's target is replaced, not the link; an existing
// file keeps its permission bits.
//
// Interrupted runs: every temporary is registered while it exists, and
// RemoveTemporariesOnSignals() makes SIGINT and SIGTERM remove the
// registered ones before the process dies of the signal (a `trace generate`
// stopped with Ctrl-C left a hidden temporary of gigabytes). A command that
// handles the signals itself (`sweep`: it finishes the points in flight)
// installs its own handlers over these and restores them after.
//
// Thread-safe (at most kMaxTemporaries temporaries registered at once;
// more are written but not removed on a signal).
#ifndef SERVESIM_SIM_BASE_WRITE_FILE_H_
#define SERVESIM_SIM_BASE_WRITE_FILE_H_

#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace servesim {

// Writes `text` to `path` whole, as above. Errors (DataLoss, or
// PermissionDenied when the folder cannot take a file): "PATH: cannot
// write: REASON".
absl::Status WriteFileWhole(const std::string& path, std::string_view text);

// Creates a new, empty temporary beside `path` (".NAME.tmp.PID.N" in its
// folder), registered for removal on a signal, and returns its file
// descriptor (open for writing) and its name. Errors name `path` and the
// reason.
struct TemporaryFile {
  int fd = -1;
  std::string path;
};
absl::Status CreateTemporaryBeside(const std::string& path, TemporaryFile* out);

// Stops removing `temporary` on a signal (after it was renamed or
// removed).
void UnregisterTemporary(const std::string& temporary);

// Installs the SIGINT / SIGTERM handlers above (once per process; later
// calls do nothing). The handler removes the registered temporaries, then
// dies of the signal with its default action (exit status 128 + signal in
// a shell).
void RemoveTemporariesOnSignals();

inline constexpr int kMaxTemporaries = 16;

}  // namespace servesim

#endif  // SERVESIM_SIM_BASE_WRITE_FILE_H_
