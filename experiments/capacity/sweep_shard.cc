#include "experiments/capacity/sweep_shard.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "experiments/capacity/sweep.h"
#include "experiments/capacity/sweep_rows.h"
#include "sim/base/status_macros.h"
#include "sim/base/write_file.h"

namespace servesim {
namespace {

namespace fs = std::filesystem;

absl::StatusOr<std::string> ReadWhole(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return absl::InvalidArgumentError(absl::StrCat(path.string(), ": cannot open"));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

absl::StatusOr<ShardSpec> ParseShard(std::string_view shard) {
  const absl::string_view text(shard.data(), shard.size());  // absl's is not std's here
  auto bad = [&] {
    return absl::InvalidArgumentError(
        absl::StrCat("--shard '", text,
                     "': expected K/N with N in [1, 100000] and K in [0, N-1] (K as "
                     "SLURM_ARRAY_TASK_ID counts)"));
  };
  const size_t slash = text.find('/');
  if (slash == absl::string_view::npos) return bad();
  ShardSpec s;
  if (!absl::SimpleAtoi(text.substr(0, slash), &s.index) ||
      !absl::SimpleAtoi(text.substr(slash + 1), &s.count) || s.count < 1 ||
      s.count > 100000 || s.index < 0 || s.index >= s.count) {
    return bad();
  }
  return s;
}

absl::StatusOr<MergeSummary> MergeSweepShards(const std::vector<std::string>& shard_dirs,
                                              const std::string& out_dir) {
  if (shard_dirs.empty())
    return absl::InvalidArgumentError("sweep merge: no shard folder");
  std::string grid_text, header;
  std::vector<SweepPoint> points;
  struct Found {
    std::string jsonl, csv;
    size_t dir = 0;
  };
  std::vector<std::optional<Found>> found;
  std::vector<std::optional<ShardSpec>> specs(shard_dirs.size());
  for (size_t d = 0; d < shard_dirs.size(); ++d) {
    const fs::path dir(shard_dirs[d]);
    const fs::path grid_path = dir / "grid.textproto";
    ASSIGN_OR_RETURN(std::string text, ReadWhole(grid_path));
    if (d == 0) {
      grid_text = text;
      ASSIGN_OR_RETURN(proto::SweepGrid grid, ReadGridFile(grid_path.string()));
      ASSIGN_OR_RETURN(points, ExpandGrid(grid));
      found.resize(points.size());
    } else if (text != grid_text) {
      return absl::InvalidArgumentError(
          absl::StrCat(grid_path.string(), ": a different grid from ",
                       (fs::path(shard_dirs[0]) / "grid.textproto").string(),
                       " (every shard must run the same grid and flags)"));
    }
    if (std::error_code ec; fs::exists(dir / "shard.txt", ec)) {
      ASSIGN_OR_RETURN(std::string s, ReadWhole(dir / "shard.txt"));
      const absl::string_view line = absl::StripSuffix(s, "\n");
      absl::StatusOr<ShardSpec> spec =
          ParseShard(std::string_view(line.data(), line.size()));
      if (!spec.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat((dir / "shard.txt").string(), ": ", spec.status().message()));
      }
      specs[d] = *spec;
    }
    ASSIGN_OR_RETURN(const std::vector<std::string> jl,
                     ReadCompleteLines(dir / "results.jsonl", /*missing_ok=*/false));
    ASSIGN_OR_RETURN(const std::vector<std::string> cl,
                     ReadCompleteLines(dir / "results.csv", /*missing_ok=*/false));
    if (cl.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat((dir / "results.csv").string(), ": no header line"));
    }
    if (d == 0) {
      header = cl[0];
    } else if (cl[0] != header) {
      return absl::InvalidArgumentError(
          absl::StrCat((dir / "results.csv").string(), ": header differs from ",
                       (fs::path(shard_dirs[0]) / "results.csv").string()));
    }
    // This folder's lines by point (a later line of a point replaces an
    // earlier one, as a resumed run keeps the last).
    std::vector<std::optional<std::string>> jmap(points.size()), cmap(points.size());
    int64_t id;
    std::string hash;
    const int64_t num = static_cast<int64_t>(points.size());
    for (const std::string& line : jl) {
      if (ParseRowKey(line, true, &id, &hash) && id >= 0 && id < num &&
          hash == points[id].config_hash) {
        jmap[id] = line;
      }
    }
    for (size_t i = 1; i < cl.size(); ++i) {
      if (ParseRowKey(cl[i], false, &id, &hash) && id >= 0 && id < num &&
          hash == points[id].config_hash) {
        cmap[id] = cl[i];
      }
    }
    for (int64_t p = 0; p < num; ++p) {
      if (!jmap[p] || !cmap[p]) continue;
      if (AgreedStatus(*jmap[p], *cmap[p], points[p].axis_values.size()).empty()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "sweep merge: point ", p, " in ", shard_dirs[d],
            ": results.jsonl and results.csv do not agree on a status (ok, infeasible "
            "or error); a corrupted line: rerun that shard to resume (it reruns the "
            "point)"));
      }
      if (found[p]) {
        return absl::InvalidArgumentError(absl::StrCat(
            "sweep merge: point ", p, " is in both ", shard_dirs[found[p]->dir], " and ",
            shard_dirs[d], " (give each shard's folder once)"));
      }
      found[p] = Found{*jmap[p], *cmap[p], d};
    }
  }
  std::string jsonl, csv = header;
  for (size_t p = 0; p < found.size(); ++p) {
    if (!found[p]) {
      std::string owner;
      for (size_t d = 0; d < specs.size(); ++d) {
        if (specs[d] &&
            OwnsPoint(specs[d]->index, specs[d]->count, static_cast<int64_t>(p)))
          owner =
              absl::StrCat(" (its shard ", specs[d]->index, "/", specs[d]->count, ", ",
                           shard_dirs[d], ", is unfinished: rerun it to resume)");
      }
      return absl::InvalidArgumentError(absl::StrCat("sweep merge: point ", p, " of ",
                                                     found.size(),
                                                     " is in no shard folder", owner));
    }
    jsonl += found[p]->jsonl;
    csv += found[p]->csv;
  }
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec) {
    return absl::InvalidArgumentError(
        absl::StrCat("--out ", out_dir, ": cannot create: ", ec.message()));
  }
  RETURN_IF_ERROR(
      WriteFileWhole((fs::path(out_dir) / "grid.textproto").string(), grid_text));
  RETURN_IF_ERROR(WriteFileWhole((fs::path(out_dir) / "results.jsonl").string(), jsonl));
  RETURN_IF_ERROR(WriteFileWhole((fs::path(out_dir) / "results.csv").string(), csv));
  MergeSummary s;
  s.num_points = static_cast<int64_t>(found.size());
  s.num_shards = static_cast<int64_t>(shard_dirs.size());
  return s;
}

}  // namespace servesim
