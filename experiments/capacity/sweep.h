// Parameter sweeps over experiment configs: a grid (proto/sweep.proto) is a
// base ExperimentConfig plus axes, each a field path set by protobuf
// reflection from text; the points are the cross product (zipped axes move
// together). RunSweep runs the points on worker threads and streams each
// finished point to DIR/results.jsonl and DIR/results.csv (flushed per
// line, so a kill loses no finished point); at the end both files are
// rewritten in point order (atomic rename), so they are byte-identical
// whatever the number of jobs. A rerun with the same grid resumes: points
// already in both files with the same config hash are kept, not rerun.
#ifndef SERVESIM_EXPERIMENTS_CAPACITY_SWEEP_H_
#define SERVESIM_EXPERIMENTS_CAPACITY_SWEEP_H_

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "experiments/runner/point_runner.h"
#include "proto/experiment.pb.h"
#include "proto/sweep.pb.h"

namespace servesim {

// Sets the field at `path` ("server.device", "fleet.replicas[0].count") of
// `config` from its text form. A repeated field's index may be past its end:
// elements are added up to it. A message field takes text format and
// replaces the message. InvalidArgument names the path segment and value.
absl::Status SetFieldByPath(proto::ExperimentConfig& config, std::string_view path,
                            std::string_view value);

// FNV-1a 64 of the config's deterministic binary serialisation.
uint64_t ConfigHash(const proto::ExperimentConfig& config);
std::string ConfigHashHex(const proto::ExperimentConfig& config);  // 16 hex digits

struct SweepPoint {
  int64_t id = 0;
  proto::ExperimentConfig config;
  std::vector<std::string> axis_values;  // one per grid axis, as written
  std::string config_hash;               // ConfigHashHex(config)
};

// The column name of each axis (SweepAxis.name, else its path).
std::vector<std::string> AxisColumns(const proto::SweepGrid& grid);

// The points of `grid` in their stable order (see proto/sweep.proto).
// Every value of every axis is checked against the base config first:
// InvalidArgument "axis 2 (client.max_concurrency) value 'x': ..." for an
// unknown path or a value that does not parse for the field's type; also
// for an axis without values or zipped axes of unequal lengths.
absl::StatusOr<std::vector<SweepPoint>> ExpandGrid(const proto::SweepGrid& grid);

// "42s", "3m07s", "2h05m" for a progress line's ETA; "?" when unknown.
std::string FormatDuration(double seconds);

// The number of points of `grid` (zipped axes counted once, by their first
// axis), without expanding it; saturates at INT64_MAX. O(axes).
int64_t CountGridPoints(const proto::SweepGrid& grid);

// Reads a text-format SweepGrid; errors name the file and line.
absl::StatusOr<proto::SweepGrid> ReadGridFile(const std::string& path);

struct SweepOptions {
  int jobs = 1;
  // Progress line with ETA on stderr: -1 when stderr is a terminal, 0 never,
  // 1 always.
  int progress = -1;
  // Test hook: once this many points have finished in this run, workers take
  // no new point (in-flight ones finish) and RunSweep returns with
  // complete = false, leaving the files as a kill would (completion order).
  // -1: run everything.
  int64_t stop_after = -1;
  // Let the sweep discard results in the directory that belong to another
  // grid (no point in common); refused (AlreadyExists) otherwise.
  bool replace_other_results = false;
  // Run only shard `shard_index` of `shard_count` (experiments/capacity/sweep_shard.h
  // OwnsPoint: point id % count == index); DIR then holds that shard's
  // points and shard.txt ("K/N"), to be merged by MergeSweepShards.
  int shard_index = 0;
  int shard_count = 1;
};

struct SweepSummary {
  int64_t num_points = 0;
  int64_t num_resumed = 0;  // already finished in DIR, not rerun
  int64_t num_run = 0;      // run now
  // Points whose runner returned an error (any run): "infeasible" when the
  // deployment does not fit or its requests exceed max_model_len
  // (ResourceExhausted, OutOfRange: real outcomes), else "error" (invalid
  // input, counted in num_failed).
  int64_t num_failed = 0;
  int64_t num_infeasible = 0;
  bool complete = false;  // every point is in the files, in point order
};

// Runs every point of `grid` not already finished in `out_dir` (created if
// missing) and writes grid.textproto, results.jsonl and results.csv there.
// results.jsonl: one object per point:
//   {"point":ID,"config_hash":"HEX","axes":{COLUMN:VALUE,...},
//    "status":"ok"|"infeasible"|"error","error":MSG,"metrics":{NAME:NUMBER|null,...}}
// results.csv: point,config_hash,<axis columns>,status,error,<metric names>.
// Errors: a bad grid (InvalidArgument) or file I/O.
absl::StatusOr<SweepSummary> RunSweep(const proto::SweepGrid& grid,
                                      const std::string& out_dir,
                                      const PointRunner& runner,
                                      const SweepOptions& options);

}  // namespace servesim

#endif  // SERVESIM_EXPERIMENTS_CAPACITY_SWEEP_H_
