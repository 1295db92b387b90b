// The result files of a sweep (results.jsonl / results.csv) as lines: one
// home for reading them back (resume in sweep.cc, merge in sweep_shard.cc)
// and for replacing a file atomically.
#ifndef SERVESIM_EXPERIMENTS_CAPACITY_SWEEP_ROWS_H_
#define SERVESIM_EXPERIMENTS_CAPACITY_SWEEP_ROWS_H_

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace servesim {

// The complete ('\n'-terminated, terminator kept) lines of `text`; a torn
// last line (a run killed mid-write) is dropped.
std::vector<std::string> CompleteLines(std::string_view text);

// CompleteLines of the file at `path`. A missing file is no lines when
// `missing_ok`, else InvalidArgument "PATH: cannot open".
absl::StatusOr<std::vector<std::string>> ReadCompleteLines(
    const std::filesystem::path& path, bool missing_ok);

// The point id and config hash a result line starts with:
// `{"point":ID,"config_hash":"HEX"` ... `}}\n` (jsonl) or `ID,HEX,` (csv).
// False for anything else (a header, a torn or foreign line).
bool ParseRowKey(std::string_view line, bool jsonl, int64_t* id, std::string* hash);

// The status both result lines of one point give ("ok", "infeasible" or
// "error"), read from the jsonl line's "status" key and the csv row's
// status column (after the `num_axes` axis cells); "" when either is
// missing or not one of those, or they differ (a corrupted line).
std::string AgreedStatus(std::string_view jsonl, std::string_view csv, size_t num_axes);

}  // namespace servesim

#endif  // SERVESIM_EXPERIMENTS_CAPACITY_SWEEP_ROWS_H_
