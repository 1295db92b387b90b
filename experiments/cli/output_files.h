// The one rule for every file or folder servesim writes results to, named
// by the user or by default (simulate --save-result and its sidecar,
// --requests-csv, --chrome-trace; trace convert / generate OUTPUT;
// calibrate --out; sweep merge --out): an existing target is refused unless
// --overwrite. A FIFO or device (/dev/stdout, /dev/null) is never refused:
// writing to it replaces no file. (`sweep --out DIR` resumes a folder of
// the same grid and refuses another grid's results unless --overwrite;
// `validate --refit` rewrites the profiles folder by design.)
#ifndef SERVESIM_EXPERIMENTS_CLI_OUTPUT_FILES_H_
#define SERVESIM_EXPERIMENTS_CLI_OUTPUT_FILES_H_

#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace servesim::cli {

// OK when `path` is empty (no output), does not exist, is not a regular
// file or folder, or `overwrite` is set; else AlreadyExists
// "FLAG: PATH exists; give --overwrite to replace it[, or HINT]".
absl::Status CheckOutputTarget(const std::string& path, std::string_view flag,
                               bool overwrite, std::string_view hint = {});

}  // namespace servesim::cli

#endif  // SERVESIM_EXPERIMENTS_CLI_OUTPUT_FILES_H_
