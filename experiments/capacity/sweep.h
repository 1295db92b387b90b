// Reading guide to experiments/capacity/ (capacity what-ifs; -> runner/).
// Start here: a sweep runs a grid of configs through a PointRunner
// (experiments/runner/point_runner.h). Then plan.h (the cheapest fleet that
// meets an SLO: SearchSingle, SearchPair), cost.h ($/h and $ per 1M
// tokens), intervals.h (prediction intervals, SLO probability),
// memory_fit.h (what fits when a deployment does not), simulate_report.h
// (what `simulate` reports beyond the engine), sweep_shard.h and
// sweep_rows.h (Slurm shards and their merge).
//
// Parameter sweeps over experiment configs: a grid (proto/sweep.proto) is a
// base ExperimentConfig plus axes, each a field path set by protobuf
// reflection from text; the points are the cross product (zipped axes move
// together). RunSweep runs the points on worker threads and streams each
// finished point to DIR/results.jsonl and DIR/results.csv (flushed per
// line, so a kill loses no finished point); at the end both files are
// rewritten in point order (atomic rename), so they are byte-identical
// whatever the number of jobs. Points are decoded from their ids as workers
// take them (GridPoints); what a sweep holds is the finished points'
// result lines (for that ordered rewrite), one pointer per point, and the
// points in flight. A rerun with the same grid resumes: points
// already in both files with the same config hash are kept, not rerun.
#ifndef SERVESIM_EXPERIMENTS_CAPACITY_SWEEP_H_
#define SERVESIM_EXPERIMENTS_CAPACITY_SWEEP_H_

#include <atomic>
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

// The points of a grid, decoded one at a time from their id: point `id`'s
// value of each axis group is a digit of `id` in the mixed radix of the
// group sizes (first axis outermost), so a grid of 10^7 points costs
// O(axes) memory, not a config per point. Make checks every value of every
// axis against the base config first: InvalidArgument "axis 2
// (client.max_concurrency) value 'x': ..." for an unknown path or a value
// that does not parse for the field's type; also for an axis without
// values, zipped axes of unequal lengths, or more than 10^7 points.
class GridPoints {
 public:
  static absl::StatusOr<GridPoints> Make(const proto::SweepGrid& grid);

  int64_t size() const { return total_; }
  // Point `id` in [0, size()); InvalidArgument "point ID: axis ..." only when
  // axes interact (one replaces the message another set a field of).
  absl::StatusOr<SweepPoint> Point(int64_t id) const;

 private:
  proto::SweepGrid grid_;
  std::vector<std::vector<int>> groups_;  // axis indices, zipped ones together
  std::vector<int64_t> sizes_;            // values per group
  int64_t total_ = 0;
};

// Every point of `grid` in their stable order (see proto/sweep.proto):
// GridPoints::Make, then each Point. It holds every config: for small grids
// and tests; RunSweep decodes points as it goes.
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
  // When set and it turns true (the CLI's SIGINT / SIGTERM handler), workers
  // take no new point; in-flight ones finish and are written, and RunSweep
  // returns with complete = false: a rerun resumes.
  const std::atomic<bool>* interrupt = nullptr;
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
