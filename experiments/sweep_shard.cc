#include "experiments/sweep_shard.h"

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
#include "experiments/sweep.h"
#include "sim/status_macros.h"

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

// The complete ('\n'-terminated) lines of `text`; a torn last line (a task
// killed mid-write) is dropped, as RunSweep's resume drops it.
std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) break;
    lines.push_back(text.substr(pos, nl + 1 - pos));
    pos = nl + 1;
  }
  return lines;
}

// The point id and config hash a results line starts with: `{"point":ID,
// "config_hash":"HEX"` (jsonl) or `ID,HEX,` (csv). False for anything else.
bool LineKey(std::string_view line, bool jsonl, int64_t* id, std::string* hash) {
  absl::string_view rest(line.data(), line.size());
  if (jsonl &&
      (!absl::ConsumePrefix(&rest, "{\"point\":") || !absl::EndsWith(rest, "}}\n")))
    return false;
  const size_t comma = rest.find(',');
  if (comma == absl::string_view::npos || !absl::SimpleAtoi(rest.substr(0, comma), id))
    return false;
  rest.remove_prefix(comma + 1);
  if (jsonl && !absl::ConsumePrefix(&rest, "\"config_hash\":\"")) return false;
  if (rest.size() < 17 || rest[16] != (jsonl ? '"' : ',')) return false;
  *hash = std::string(rest.substr(0, 16));
  return true;
}

absl::Status WriteAtomic(const fs::path& path, const std::string& text) {
  const fs::path tmp = path.string() + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr)
    return absl::InternalError(absl::StrCat(tmp.string(), ": cannot write"));
  const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  if (std::fclose(f) != 0 || !ok)
    return absl::InternalError(absl::StrCat(tmp.string(), ": write failed"));
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec)
    return absl::InternalError(absl::StrCat("rename ", tmp.string(), ": ", ec.message()));
  return absl::OkStatus();
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
    ASSIGN_OR_RETURN(std::string jsonl_text, ReadWhole(dir / "results.jsonl"));
    ASSIGN_OR_RETURN(std::string csv_text, ReadWhole(dir / "results.csv"));
    const std::vector<std::string> jl = Lines(jsonl_text);
    const std::vector<std::string> cl = Lines(csv_text);
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
      if (LineKey(line, true, &id, &hash) && id >= 0 && id < num &&
          hash == points[id].config_hash) {
        jmap[id] = line;
      }
    }
    for (size_t i = 1; i < cl.size(); ++i) {
      if (LineKey(cl[i], false, &id, &hash) && id >= 0 && id < num &&
          hash == points[id].config_hash) {
        cmap[id] = cl[i];
      }
    }
    for (int64_t p = 0; p < num; ++p) {
      if (!jmap[p] || !cmap[p]) continue;
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
  RETURN_IF_ERROR(WriteAtomic(fs::path(out_dir) / "grid.textproto", grid_text));
  RETURN_IF_ERROR(WriteAtomic(fs::path(out_dir) / "results.jsonl", jsonl));
  RETURN_IF_ERROR(WriteAtomic(fs::path(out_dir) / "results.csv", csv));
  MergeSummary s;
  s.num_points = static_cast<int64_t>(found.size());
  s.num_shards = static_cast<int64_t>(shard_dirs.size());
  return s;
}

}  // namespace servesim
