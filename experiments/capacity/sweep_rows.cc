#include "experiments/capacity/sweep_rows.h"

#include <cstdio>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "traces/parse_util.h"

namespace servesim {

std::vector<std::string> CompleteLines(std::string_view text) {
  std::vector<std::string> lines;
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) break;
    lines.emplace_back(text.substr(pos, nl + 1 - pos));
    pos = nl + 1;
  }
  return lines;
}

absl::StatusOr<std::vector<std::string>> ReadCompleteLines(
    const std::filesystem::path& path, bool missing_ok) {
  std::error_code ec;
  if (missing_ok && !std::filesystem::exists(path, ec)) return std::vector<std::string>();
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return absl::InvalidArgumentError(absl::StrCat(path.string(), ": cannot open"));
  std::stringstream ss;
  ss << in.rdbuf();
  return CompleteLines(ss.str());
}

bool ParseRowKey(std::string_view line, bool jsonl, int64_t* id, std::string* hash) {
  absl::string_view rest(line.data(), line.size());
  if (jsonl &&
      (!absl::ConsumePrefix(&rest, "{\"point\":") || !absl::EndsWith(rest, "}}\n"))) {
    return false;
  }
  const size_t comma = rest.find(',');
  if (comma == absl::string_view::npos || !absl::SimpleAtoi(rest.substr(0, comma), id)) {
    return false;
  }
  rest.remove_prefix(comma + 1);
  if (jsonl && !absl::ConsumePrefix(&rest, "\"config_hash\":\"")) return false;
  if (rest.size() < 17 || rest[16] != (jsonl ? '"' : ',')) return false;
  *hash = std::string(rest.substr(0, 16));
  return true;
}

std::string AgreedStatus(std::string_view jsonl, std::string_view csv, size_t num_axes) {
  // `"},"status":"` cannot occur inside a JSON string (its quotes would be
  // escaped): the first match is the key after the axes object.
  constexpr std::string_view kKey = "},\"status\":\"";
  const size_t at = jsonl.find(kKey);
  if (at == std::string_view::npos) return "";
  const size_t begin = at + kKey.size();
  const size_t end = jsonl.find('"', begin);
  if (end == std::string_view::npos) return "";
  const std::string_view status = jsonl.substr(begin, end - begin);
  if (status != "ok" && status != "infeasible" && status != "error") return "";
  std::vector<std::string_view> cells;
  std::vector<std::string> scratch;
  if (csv.ends_with('\n')) csv.remove_suffix(1);
  if (!SplitCsvLine(csv, cells, scratch) || cells.size() <= 2 + num_axes ||
      cells[2 + num_axes] != status) {
    return "";
  }
  return std::string(status);
}

}  // namespace servesim
