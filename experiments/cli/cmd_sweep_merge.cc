// servesim sweep merge SHARD_DIR... --out DIR: joins the folders of a
// sharded sweep (`servesim sweep --shard K/N`, e.g. one per Slurm array
// task) into the files a local run of the whole grid writes. See
// experiments/capacity/sweep_shard.h.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "experiments/capacity/sweep_shard.h"
#include "experiments/cli/cli.h"

namespace servesim::cli {

CLI::App* RegisterSweepMergeCommand(CLI::App* sweep, int* exit_code) {
  struct Flags {
    std::vector<std::string> shards;
    std::string out;
  };
  auto flags = std::make_shared<Flags>();
  CLI::App* cmd = sweep->add_subcommand(
      "merge",
      "Merge the output folders of `sweep --shard K/N` runs into DIR: grid.textproto,\n"
      "results.jsonl and results.csv in point order, the bytes a local run writes.\n"
      "Every point must be in exactly one folder (an unfinished shard is an error).");
  cmd->add_option("shard_dirs", flags->shards, "the shards' --out folders")
      ->required()
      ->expected(1, -1);
  cmd->add_option("--out", flags->out, "merged output directory (created if missing)")
      ->required();
  cmd->callback([flags, exit_code] {
    absl::StatusOr<MergeSummary> s = MergeSweepShards(flags->shards, flags->out);
    if (!s.ok()) {
      std::fprintf(stderr, "servesim sweep merge: %s\n",
                   std::string(s.status().message()).c_str());
      *exit_code = kExitBadInput;
      return;
    }
    std::fprintf(stderr, "servesim sweep merge: %lld points from %lld folders -> %s\n",
                 static_cast<long long>(s->num_points),
                 static_cast<long long>(s->num_shards), flags->out.c_str());
    *exit_code = kExitOk;
  });
  return cmd;
}

}  // namespace servesim::cli
