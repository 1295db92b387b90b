// servesim sweep merge SHARD_DIR... --out DIR: joins the folders of a
// sharded sweep (`servesim sweep --shard K/N`, e.g. one per Slurm array
// task) into the files a local run of the whole grid writes. See
// experiments/capacity/sweep_shard.h.
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "experiments/capacity/sweep_shard.h"
#include "experiments/cli/cli.h"
#include "experiments/cli/output_files.h"
#include "sim/base/json_writer.h"

namespace servesim::cli {

CLI::App* RegisterSweepMergeCommand(CLI::App* sweep, int* exit_code) {
  struct Flags {
    std::vector<std::string> shards;
    std::string out;
    bool overwrite = false;
    bool json = false;
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
  cmd->add_option("--out", flags->out,
                  "merged output directory (created if missing; one that holds results "
                  "only with --overwrite)")
      ->required();
  cmd->add_flag("--overwrite", flags->overwrite,
                "let --out replace the results already in that folder");
  cmd->add_flag("--json", flags->json,
                "print what was merged as one JSON object on stdout (points, folders, "
                "the files written)");
  cmd->callback([flags, exit_code] {
    for (const char* name : {"grid.textproto", "results.jsonl", "results.csv"}) {
      if (absl::Status st =
              CheckOutputTarget((std::filesystem::path(flags->out) / name).string(),
                                "--out", flags->overwrite);
          !st.ok()) {
        std::fprintf(stderr, "servesim sweep merge: error: %s\n",
                     std::string(st.message()).c_str());
        *exit_code = kExitBadInput;
        return;
      }
    }
    absl::StatusOr<MergeSummary> s = MergeSweepShards(flags->shards, flags->out);
    if (!s.ok()) {
      std::string msg(s.status().message());
      if (msg.starts_with("sweep merge: ")) msg.erase(0, 13);  // said once
      std::fprintf(stderr, "servesim sweep merge: error: %s\n", msg.c_str());
      *exit_code = kExitBadInput;
      return;
    }
    std::fprintf(stderr, "servesim sweep merge: %lld points from %lld folders -> %s\n",
                 static_cast<long long>(s->num_points),
                 static_cast<long long>(s->num_shards), flags->out.c_str());
    if (flags->json) {
      JsonWriter w(2);
      w.BeginObject();
      w.KV("num_points", s->num_points).KV("num_shards", s->num_shards);
      w.Key("shard_dirs").BeginArray();
      for (const std::string& d : flags->shards) w.String(d);
      w.EndArray();
      w.KV("out", flags->out);
      w.Key("files").BeginArray();
      for (const char* name : {"grid.textproto", "results.jsonl", "results.csv"}) {
        w.String((std::filesystem::path(flags->out) / name).string());
      }
      w.EndArray();
      w.EndObject();
      const std::string text = w.Take() + "\n";
      std::fwrite(text.data(), 1, text.size(), stdout);
    }
    *exit_code = kExitOk;
  });
  return cmd;
}

}  // namespace servesim::cli
