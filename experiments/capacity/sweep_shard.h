// A sweep split over a cluster: `servesim sweep --shard K/N` runs the points
// shard K owns (one Slurm array task each, K = SLURM_ARRAY_TASK_ID), and
// `servesim sweep merge SHARD_DIR... --out DIR` joins the shards' outputs
// into the files a local run of the whole grid writes, byte for byte.
// Shard K of N owns the points whose id % N == K: deterministic, and each
// shard gets a share of every region of the grid (neighbouring points,
// which cost about the same, go to different shards).
#ifndef SERVESIM_EXPERIMENTS_CAPACITY_SWEEP_SHARD_H_
#define SERVESIM_EXPERIMENTS_CAPACITY_SWEEP_SHARD_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace servesim {

// REQUIRES: 0 <= index < count.
inline bool OwnsPoint(int index, int count, int64_t point_id) {
  return point_id % count == index;
}

struct ShardSpec {
  int index = 0;
  int count = 1;
};

// Parses "K/N" (0 <= K < N <= 100000); the error names --shard and the range.
absl::StatusOr<ShardSpec> ParseShard(std::string_view text);

struct MergeSummary {
  int64_t num_points = 0;
  int64_t num_shards = 0;
};

// Merges the sweep output folders `shard_dirs` (each written by RunSweep
// with a shard, or a whole run) into `out_dir`: grid.textproto, and
// results.jsonl / results.csv in point order, the bytes a complete local
// run writes. Every shard must have the same grid.textproto and CSV header;
// every point of the grid must be in exactly one shard's files, with that
// point's config hash, in both files. Errors (InvalidArgument) name the
// folder, the file and the point: a missing point (an unfinished shard),
// a point found in two folders, a different grid.
absl::StatusOr<MergeSummary> MergeSweepShards(const std::vector<std::string>& shard_dirs,
                                              const std::string& out_dir);

}  // namespace servesim

#endif  // SERVESIM_EXPERIMENTS_CAPACITY_SWEEP_SHARD_H_
