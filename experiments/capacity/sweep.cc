#include "experiments/capacity/sweep.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <system_error>
#include <unordered_map>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "experiments/capacity/sweep_rows.h"
#include "experiments/capacity/sweep_shard.h"
#include "experiments/runner/config.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/protobuf/message.h"
#include "google/protobuf/text_format.h"
#include "proto/text_format.h"
#include "sim/base/hash.h"
#include "sim/base/json_writer.h"
#include "sim/base/parallel.h"
#include "sim/base/read_file.h"
#include "sim/base/status_macros.h"
#include "sim/base/version.h"
#include "sim/base/write_file.h"

namespace servesim {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

// The installed Abseil has its own string_view (not std::string_view).
absl::string_view A(std::string_view s) { return {s.data(), s.size()}; }

constexpr int kMaxRepeatedIndex = 1024;
constexpr int64_t kMaxPoints = 10'000'000;

struct Segment {
  std::string name;
  int index = -1;  // -1: no [i]
};

absl::StatusOr<std::vector<Segment>> ParsePath(std::string_view path) {
  std::vector<Segment> out;
  if (path.empty()) return absl::InvalidArgumentError("empty field path");
  for (absl::string_view part : absl::StrSplit(A(path), '.')) {
    Segment seg;
    const size_t lb = part.find('[');
    if (lb == std::string_view::npos) {
      seg.name = std::string(part);
    } else {
      if (part.back() != ']') {
        return absl::InvalidArgumentError(
            absl::StrCat("path segment '", part, "': expected name[index]"));
      }
      seg.name = std::string(part.substr(0, lb));
      absl::string_view idx = part.substr(lb + 1, part.size() - lb - 2);
      if (!absl::SimpleAtoi(idx, &seg.index) || seg.index < 0 ||
          seg.index > kMaxRepeatedIndex) {
        return absl::InvalidArgumentError(
            absl::StrCat("path segment '", part, "': index '", idx, "' is not in [0, ",
                         kMaxRepeatedIndex, "]"));
      }
    }
    if (seg.name.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("empty segment in path '", A(path), "'"));
    }
    out.push_back(std::move(seg));
  }
  return out;
}

std::string FieldNames(const Descriptor* d) {
  std::vector<std::string> names;
  names.reserve(d->field_count());
  for (int i = 0; i < d->field_count(); ++i) names.push_back(d->field(i)->name());
  return absl::StrJoin(names, ", ");
}

void AddDefaultElement(Message* msg, const FieldDescriptor* f) {
  const Reflection* r = msg->GetReflection();
  switch (f->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32:
      r->AddInt32(msg, f, 0);
      break;
    case FieldDescriptor::CPPTYPE_INT64:
      r->AddInt64(msg, f, 0);
      break;
    case FieldDescriptor::CPPTYPE_UINT32:
      r->AddUInt32(msg, f, 0);
      break;
    case FieldDescriptor::CPPTYPE_UINT64:
      r->AddUInt64(msg, f, 0);
      break;
    case FieldDescriptor::CPPTYPE_DOUBLE:
      r->AddDouble(msg, f, 0);
      break;
    case FieldDescriptor::CPPTYPE_FLOAT:
      r->AddFloat(msg, f, 0);
      break;
    case FieldDescriptor::CPPTYPE_BOOL:
      r->AddBool(msg, f, false);
      break;
    case FieldDescriptor::CPPTYPE_ENUM:
      r->AddEnumValue(msg, f, 0);
      break;
    case FieldDescriptor::CPPTYPE_STRING:
      r->AddString(msg, f, "");
      break;
    case FieldDescriptor::CPPTYPE_MESSAGE:
      r->AddMessage(msg, f);
      break;
  }
}

absl::Status BadValue(std::string_view value, std::string_view what,
                      const FieldDescriptor* f) {
  return absl::InvalidArgumentError(
      absl::StrCat("'", A(value), "' is not ", A(what), " (field ", f->full_name(), ")"));
}

// Sets the scalar or message field `f` of `msg` (element `index` when
// repeated) from text.
absl::Status SetFromText(Message* msg, const FieldDescriptor* f, int index,
                         std::string_view value) {
  const Reflection* r = msg->GetReflection();
  const bool rep = f->is_repeated();
  const std::string v(absl::StripAsciiWhitespace(A(value)));
  switch (f->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32: {
      int32_t x;
      if (!absl::SimpleAtoi(v, &x)) return BadValue(value, "an int32", f);
      rep ? r->SetRepeatedInt32(msg, f, index, x) : r->SetInt32(msg, f, x);
      break;
    }
    case FieldDescriptor::CPPTYPE_INT64: {
      int64_t x;
      if (!absl::SimpleAtoi(v, &x)) return BadValue(value, "an int64", f);
      rep ? r->SetRepeatedInt64(msg, f, index, x) : r->SetInt64(msg, f, x);
      break;
    }
    case FieldDescriptor::CPPTYPE_UINT32: {
      uint32_t x;
      if (!absl::SimpleAtoi(v, &x)) return BadValue(value, "a uint32", f);
      rep ? r->SetRepeatedUInt32(msg, f, index, x) : r->SetUInt32(msg, f, x);
      break;
    }
    case FieldDescriptor::CPPTYPE_UINT64: {
      uint64_t x;
      if (!absl::SimpleAtoi(v, &x)) return BadValue(value, "a uint64", f);
      rep ? r->SetRepeatedUInt64(msg, f, index, x) : r->SetUInt64(msg, f, x);
      break;
    }
    case FieldDescriptor::CPPTYPE_DOUBLE: {
      double x;
      if (!absl::SimpleAtod(v, &x)) return BadValue(value, "a number", f);
      rep ? r->SetRepeatedDouble(msg, f, index, x) : r->SetDouble(msg, f, x);
      break;
    }
    case FieldDescriptor::CPPTYPE_FLOAT: {
      float x;
      if (!absl::SimpleAtof(v, &x)) return BadValue(value, "a number", f);
      rep ? r->SetRepeatedFloat(msg, f, index, x) : r->SetFloat(msg, f, x);
      break;
    }
    case FieldDescriptor::CPPTYPE_BOOL: {
      bool x;
      if (v == "true" || v == "1") {
        x = true;
      } else if (v == "false" || v == "0") {
        x = false;
      } else {
        return BadValue(value, "true or false", f);
      }
      rep ? r->SetRepeatedBool(msg, f, index, x) : r->SetBool(msg, f, x);
      break;
    }
    case FieldDescriptor::CPPTYPE_ENUM: {
      const auto* ev = f->enum_type()->FindValueByName(v);
      int num = 0;
      if (ev == nullptr) {
        if (!absl::SimpleAtoi(v, &num) ||
            f->enum_type()->FindValueByNumber(num) == nullptr) {
          return BadValue(value, absl::StrCat("a value of enum ", f->enum_type()->name()),
                          f);
        }
      } else {
        num = ev->number();
      }
      rep ? r->SetRepeatedEnumValue(msg, f, index, num) : r->SetEnumValue(msg, f, num);
      break;
    }
    case FieldDescriptor::CPPTYPE_STRING: {
      // Values are taken as written (not trimmed) for strings.
      std::string s(value);
      rep ? r->SetRepeatedString(msg, f, index, std::move(s))
          : r->SetString(msg, f, std::move(s));
      break;
    }
    case FieldDescriptor::CPPTYPE_MESSAGE: {
      Message* sub =
          rep ? r->MutableRepeatedMessage(msg, f, index) : r->MutableMessage(msg, f);
      sub->Clear();
      if (absl::Status st = ParseTextProto(value, "value", sub); !st.ok()) {
        return BadValue(value,
                        absl::StrCat("a text-format ", sub->GetDescriptor()->name(), " (",
                                     st.message(), ")"),
                        f);
      }
      break;
    }
  }
  return absl::OkStatus();
}

std::string Hex16(uint64_t h) { return absl::StrFormat("%016x", h); }

// --- result files -------------------------------------------------------

std::string CsvHeader(const std::vector<std::string>& axis_columns,
                      const std::vector<std::string>& metric_names) {
  std::string out = "point,config_hash";
  for (const auto& c : axis_columns) {
    out.push_back(',');
    AppendCsvCell(out, c);
  }
  out += ",status,error";
  for (const auto& m : metric_names) {
    out.push_back(',');
    AppendCsvCell(out, m);
  }
  out += ",servesim_version,servesim_commit\n";
  return out;
}

struct PointLines {
  std::string jsonl;
  std::string csv;
};

PointLines FormatPoint(const SweepPoint& p, const std::vector<std::string>& axis_columns,
                       const std::vector<std::string>& metric_names,
                       const absl::StatusOr<std::vector<double>>& result) {
  PointLines out;
  std::string& j = out.jsonl;
  absl::StrAppend(&j, "{\"point\":", p.id, ",\"config_hash\":\"", p.config_hash, "\"");
  // The build that ran the point (a resumed point keeps its own).
  j += ",\"servesim_version\":";
  AppendJsonString(j, VersionString());
  j += ",\"servesim_commit\":";
  AppendJsonString(j, CommitString());
  j += ",\"axes\":{";
  for (size_t a = 0; a < axis_columns.size(); ++a) {
    if (a) j.push_back(',');
    AppendJsonString(j, axis_columns[a]);
    j.push_back(':');
    AppendJsonString(j, p.axis_values[a]);
  }
  j += "},\"status\":";
  std::string error;
  bool ok = result.ok() && result->size() == metric_names.size();
  if (result.ok() && !ok) {
    error = absl::StrCat("runner returned ", result->size(), " metrics, expected ",
                         metric_names.size());
  } else if (!result.ok()) {
    error = std::string(result.status().message());
  }
  // A deployment that does not fit, or requests longer than its
  // max_model_len, is a real outcome of the point, not bad input
  // (RunExperiment: ResourceExhausted, OutOfRange).
  const bool infeasible = !result.ok() && (absl::IsResourceExhausted(result.status()) ||
                                           absl::IsOutOfRange(result.status()));
  const char* status = ok ? "ok" : (infeasible ? "infeasible" : "error");
  AppendJsonString(j, status);
  j += ",\"error\":";
  AppendJsonString(j, error);
  j += ",\"metrics\":{";
  for (size_t m = 0; m < metric_names.size(); ++m) {
    if (m) j.push_back(',');
    AppendJsonString(j, metric_names[m]);
    j.push_back(':');
    if (ok) {
      AppendDouble(j, (*result)[m], "null");
    } else {
      j += "null";
    }
  }
  j += "}}\n";

  std::string& c = out.csv;
  absl::StrAppend(&c, p.id, ",", p.config_hash);
  for (const auto& v : p.axis_values) {
    c.push_back(',');
    AppendCsvCell(c, v);
  }
  absl::StrAppend(&c, ",", status, ",");
  AppendCsvCell(c, error);
  for (size_t m = 0; m < metric_names.size(); ++m) {
    c.push_back(',');
    if (ok) AppendDouble(c, (*result)[m], "");
  }
  c.push_back(',');
  AppendCsvCell(c, VersionString());
  c.push_back(',');
  AppendCsvCell(c, CommitString());
  c.push_back('\n');
  return out;
}

}  // namespace

std::string FormatDuration(double s) {
  if (!(s >= 0) || s > 1e7) return "?";
  const int64_t t = std::llround(s);
  if (t >= 3600) return absl::StrFormat("%dh%02dm", t / 3600, (t / 60) % 60);
  if (t >= 60) return absl::StrFormat("%dm%02ds", t / 60, t % 60);
  return absl::StrFormat("%ds", t);
}

absl::Status SetFieldByPath(proto::ExperimentConfig& config, std::string_view path,
                            std::string_view value) {
  ASSIGN_OR_RETURN(std::vector<Segment> segs, ParsePath(path));
  Message* msg = &config;
  for (size_t i = 0; i < segs.size(); ++i) {
    const Segment& seg = segs[i];
    const Descriptor* d = msg->GetDescriptor();
    const FieldDescriptor* f = d->FindFieldByName(seg.name);
    if (f == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("no field '", seg.name, "' in ",
                                                     d->full_name(),
                                                     " (fields: ", FieldNames(d), ")"));
    }
    const Reflection* r = msg->GetReflection();
    if (f->is_repeated()) {
      if (seg.index < 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "field '", seg.name, "' is repeated: give an index, e.g. ", seg.name, "[0]"));
      }
      while (r->FieldSize(*msg, f) <= seg.index) AddDefaultElement(msg, f);
    } else if (seg.index >= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("field '", seg.name, "' is not repeated: no [index] allowed"));
    }
    if (i + 1 == segs.size()) return SetFromText(msg, f, seg.index, value);
    if (f->cpp_type() != FieldDescriptor::CPPTYPE_MESSAGE) {
      return absl::InvalidArgumentError(
          absl::StrCat("field '", seg.name, "' is not a message: the path cannot go on"));
    }
    msg = f->is_repeated() ? r->MutableRepeatedMessage(msg, f, seg.index)
                           : r->MutableMessage(msg, f);
  }
  return absl::OkStatus();  // unreachable: the last segment returns above
}

namespace {

// Whether `path` names a message-typed field (a whole server, a replica):
// false for a scalar, or a path that does not parse (SetFieldByPath says
// why).
bool PathIsMessage(std::string_view path) {
  absl::StatusOr<std::vector<Segment>> segs = ParsePath(path);
  if (!segs.ok()) return false;
  const Descriptor* d = proto::ExperimentConfig::descriptor();
  const FieldDescriptor* f = nullptr;
  for (const Segment& seg : *segs) {
    if (d == nullptr) return false;
    f = d->FindFieldByName(seg.name);
    if (f == nullptr) return false;
    d = f->message_type();
  }
  return f != nullptr && f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE;
}

}  // namespace

uint64_t ConfigHash(const proto::ExperimentConfig& config) {
  std::string bytes;
  {
    google::protobuf::io::StringOutputStream sos(&bytes);
    google::protobuf::io::CodedOutputStream cos(&sos);
    cos.SetSerializationDeterministic(true);
    config.SerializeToCodedStream(&cos);
  }
  return Fnv1a64Hash(bytes);
}

std::string ConfigHashHex(const proto::ExperimentConfig& config) {
  return Hex16(ConfigHash(config));
}

std::vector<std::string> AxisColumns(const proto::SweepGrid& grid) {
  std::vector<std::string> out;
  for (const auto& a : grid.axes()) out.push_back(a.name().empty() ? a.path() : a.name());
  return out;
}

absl::StatusOr<GridPoints> GridPoints::Make(const proto::SweepGrid& grid) {
  const int n = grid.axes_size();
  // Each field is set by one axis, and each column has its own name.
  for (int a = 0; a < n; ++a) {
    for (int b = 0; b < a; ++b) {
      if (grid.axes(a).path() == grid.axes(b).path()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "axis ", a, " (", grid.axes(a).path(), "): the same path as axis ", b,
            "; each field may be swept by one axis only"));
      }
      const std::string& na =
          grid.axes(a).name().empty() ? grid.axes(a).path() : grid.axes(a).name();
      const std::string& nb =
          grid.axes(b).name().empty() ? grid.axes(b).path() : grid.axes(b).name();
      if (na == nb) {
        return absl::InvalidArgumentError(absl::StrCat(
            "axis ", a, " (", grid.axes(a).path(), "): column name '", na,
            "' is already used by axis ", b, "; give each axis its own name"));
      }
    }
  }
  // Check every value of every axis on its own first. A control character
  // (a newline) in a column name or value would split a results line, and
  // such a point would rerun on every resume.
  const auto has_control = [](std::string_view t) {
    return std::any_of(t.begin(), t.end(), [](char ch) {
      return static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f;
    });
  };
  for (int a = 0; a < n; ++a) {
    const auto& axis = grid.axes(a);
    if (axis.values_size() == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("axis ", a, " (", axis.path(), "): no values"));
    }
    if (has_control(axis.name())) {
      return absl::InvalidArgumentError(
          absl::StrCat("axis ", a, " (", axis.path(),
                       "): name has a control character (allowed: printable text)"));
    }
    for (int v = 0; v < axis.values_size(); ++v) {
      // (A zipped axis may repeat a value: the tuple is what differs.)
      for (int w = 0; axis.zip().empty() && w < v; ++w) {
        if (axis.values(w) == axis.values(v)) {
          return absl::InvalidArgumentError(
              absl::StrCat("axis ", a, " (", axis.path(), "): value '", axis.values(v),
                           "' is given twice (", w, " and ", v, "); each value once"));
        }
      }
      if (has_control(axis.values(v))) {
        return absl::InvalidArgumentError(
            absl::StrCat("axis ", a, " (", axis.path(), "): value ", v,
                         " has a control character (allowed: printable text; a "
                         "message value goes on one line)"));
      }
    }
    for (const std::string& v : axis.values()) {
      proto::ExperimentConfig probe = grid.base();
      absl::Status st = SetFieldByPath(probe, axis.path(), v);
      if (!st.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "axis ", a, " (", axis.path(), ") value '", v, "': ", st.message()));
      }
      // The config format reads a zero scalar as "unset": the defaults
      // would replace the value and the row would carry the label of a
      // point that never ran. The value survives the defaults when setting
      // it before them and after them gives the same config. (A whole
      // message, e.g. server, is completed by the defaults, not replaced:
      // setting it again after them would drop what they filled in.)
      if (PathIsMessage(axis.path())) continue;
      proto::ExperimentConfig after = probe;
      ApplyDefaults(after);
      proto::ExperimentConfig reset = after;
      if (SetFieldByPath(reset, axis.path(), v).ok() &&
          ConfigToText(reset) != ConfigToText(after)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "axis ", a, " (", axis.path(), ") value '", v,
            "': the config reads it as unset (proto3 scalar default), so the default "
            "would run under this label; give a value in the field's range "
            "(servesim simulate's flag of the same name states it)"));
      }
    }
  }
  // Groups: zipped axes form one group, placed at its first axis.
  std::vector<std::vector<int>> groups;
  std::vector<std::string> group_zip;
  for (int a = 0; a < n; ++a) {
    const std::string& zip = grid.axes(a).zip();
    int g = -1;
    if (!zip.empty()) {
      for (size_t k = 0; k < groups.size(); ++k) {
        if (group_zip[k] == zip) g = static_cast<int>(k);
      }
    }
    if (g < 0) {
      groups.push_back({a});
      group_zip.push_back(zip);
    } else {
      const auto& first = grid.axes(groups[g][0]);
      if (first.values_size() != grid.axes(a).values_size()) {
        return absl::InvalidArgumentError(
            absl::StrCat("axis ", a, " (", grid.axes(a).path(), "): zip '", zip, "' has ",
                         grid.axes(a).values_size(), " values but axis ", groups[g][0],
                         " (", first.path(), ") has ", first.values_size(),
                         "; zipped axes need equal lengths"));
      }
      groups[g].push_back(a);
    }
  }
  int64_t total = 1;
  std::vector<int64_t> sizes;
  for (const auto& g : groups) {
    sizes.push_back(grid.axes(g[0]).values_size());
    total *= sizes.back();
    if (total > kMaxPoints) {
      return absl::InvalidArgumentError(
          absl::StrCat("grid has more than ", kMaxPoints, " points"));
    }
  }
  GridPoints out;
  out.grid_ = grid;
  out.groups_ = std::move(groups);
  out.sizes_ = std::move(sizes);
  out.total_ = total;
  return out;
}

absl::StatusOr<SweepPoint> GridPoints::Point(int64_t id) const {
  const int n = grid_.axes_size();
  std::vector<int> value_index(n, 0);
  int64_t rem = id;
  for (int g = static_cast<int>(groups_.size()) - 1; g >= 0; --g) {
    const int k = static_cast<int>(rem % sizes_[g]);
    rem /= sizes_[g];
    for (int a : groups_[g]) value_index[a] = k;
  }
  SweepPoint p;
  p.id = id;
  p.config = grid_.base();
  p.axis_values.reserve(n);
  for (int a = 0; a < n; ++a) {
    const std::string& v = grid_.axes(a).values(value_index[a]);
    absl::Status st = SetFieldByPath(p.config, grid_.axes(a).path(), v);
    if (!st.ok()) {  // only when axes interact (e.g. one replaces another's parent)
      return absl::InvalidArgumentError(absl::StrCat("point ", id, ": axis ", a, " (",
                                                     grid_.axes(a).path(), ") value '", v,
                                                     "': ", st.message()));
    }
    p.axis_values.push_back(v);
  }
  p.config_hash = ConfigHashHex(p.config);
  return p;
}

absl::StatusOr<std::vector<SweepPoint>> ExpandGrid(const proto::SweepGrid& grid) {
  ASSIGN_OR_RETURN(GridPoints grid_points, GridPoints::Make(grid));
  std::vector<SweepPoint> points;
  points.reserve(static_cast<size_t>(grid_points.size()));
  for (int64_t id = 0; id < grid_points.size(); ++id) {
    ASSIGN_OR_RETURN(SweepPoint p, grid_points.Point(id));
    points.push_back(std::move(p));
  }
  return points;
}

int64_t CountGridPoints(const proto::SweepGrid& grid) {
  std::vector<std::string> zips_seen;
  int64_t total = 1;
  for (const proto::SweepAxis& axis : grid.axes()) {
    if (!axis.zip().empty()) {
      if (std::find(zips_seen.begin(), zips_seen.end(), axis.zip()) != zips_seen.end()) {
        continue;
      }
      zips_seen.push_back(axis.zip());
    }
    const int64_t n = axis.values_size();
    if (n == 0) return 0;
    if (total > std::numeric_limits<int64_t>::max() / n) {
      return std::numeric_limits<int64_t>::max();
    }
    total *= n;
  }
  return total;
}

absl::StatusOr<proto::SweepGrid> ReadGridFile(const std::string& path) {
  ASSIGN_OR_RETURN(const std::string text, ReadTextFile(path, "grid file"));
  proto::SweepGrid grid;
  RETURN_IF_ERROR(ParseTextProto(text, path, &grid));
  return grid;
}

absl::StatusOr<SweepSummary> RunSweep(const proto::SweepGrid& grid,
                                      const std::string& out_dir,
                                      const PointRunner& runner,
                                      const SweepOptions& options) {
  ASSIGN_OR_RETURN(const GridPoints points, GridPoints::Make(grid));
  if (!runner.run) return absl::InvalidArgumentError("sweep: no point runner");
  if (options.shard_count < 1 || options.shard_index < 0 ||
      options.shard_index >= options.shard_count) {
    return absl::InvalidArgumentError(absl::StrCat("--shard ", options.shard_index, "/",
                                                   options.shard_count,
                                                   ": K must be in [0, N-1] and N >= 1"));
  }
  const std::vector<std::string> axis_columns = AxisColumns(grid);
  // An axis column named like a fixed or metric column would give the CSV
  // two columns of one name (a reader keeps one of them).
  {
    std::vector<std::string> fixed = {"point", "config_hash",      "status",
                                      "error", "servesim_version", "servesim_commit"};
    for (const std::string& m : runner.metric_names) {
      fixed.push_back(m);
      fixed.push_back(m + "_lo");
      fixed.push_back(m + "_hi");
    }
    for (size_t a = 0; a < axis_columns.size(); ++a) {
      if (std::find(fixed.begin(), fixed.end(), axis_columns[a]) != fixed.end()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "axis ", a, " (", grid.axes(static_cast<int>(a)).path(), "): column name '",
            axis_columns[a],
            "' is a fixed or metric column of the results; give the axis another name"));
      }
    }
  }
  namespace fs = std::filesystem;
  const fs::path dir(out_dir);
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) {
    return absl::PermissionDeniedError(
        absl::StrCat(out_dir, ": cannot create: ", ec.message()));
  }
  // One sweep writes a folder at a time: a second one would replace the
  // files the first still appends to (its results then lost).
  const std::string lock_path = (dir / ".lock").string();
  const int lock_fd = open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock_fd < 0) {
    return absl::PermissionDeniedError(absl::StrCat(
        lock_path,
        ": cannot open: ", std::error_code(errno, std::generic_category()).message()));
  }
  const std::unique_ptr<int, void (*)(int*)> unlock(new int(lock_fd), [](int* fd) {
    close(*fd);  // releases the lock
    delete fd;
  });
  if (flock(lock_fd, LOCK_EX | LOCK_NB) != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        out_dir, ": another servesim sweep is writing this folder (it holds ", lock_path,
        "); wait for it to finish, or give another --out"));
  }
  const std::string header = CsvHeader(axis_columns, runner.metric_names);
  const fs::path jsonl_path = dir / "results.jsonl";
  const fs::path csv_path = dir / "results.csv";
  const size_t num = static_cast<size_t>(points.size());
  auto owned = [&](int64_t id) {
    return OwnsPoint(options.shard_index, options.shard_count, id);
  };

  // The resolved grid, with each point's id, hash and axis values, written
  // as the points are decoded (to grid.textproto.tmp, renamed once this
  // run's results are known to be resumable): no point is held. A point
  // whose axes interact badly fails here, before anything runs.
  const fs::path grid_path = dir / "grid.textproto";
  const fs::path grid_tmp = grid_path.string() + ".tmp";
  {
    std::FILE* f = std::fopen(grid_tmp.c_str(), "wb");
    if (f == nullptr) {
      return absl::PermissionDeniedError(
          absl::StrCat(grid_tmp.string(), ": cannot write: ", std::strerror(errno)));
    }
    std::string text;
    absl::StrAppend(&text, "# servesim sweep: resolved grid, ", num,
                    " points (id = index; first axis outermost)\n");
    std::string body;
    google::protobuf::TextFormat::PrintToString(grid, &body);
    text += body;
    bool ok = true;
    absl::Status point_status;
    for (int64_t id = 0; ok && id < points.size(); ++id) {
      absl::StatusOr<SweepPoint> p = points.Point(id);
      if (!p.ok()) {
        point_status = p.status();
        break;
      }
      absl::StrAppend(&text, "# point ", p->id, " ", p->config_hash);
      for (size_t a = 0; a < axis_columns.size(); ++a) {
        absl::StrAppend(&text, " ", axis_columns[a], "=", p->axis_values[a]);
      }
      text.push_back('\n');
      if (text.size() >= (1 << 16)) {
        ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
        text.clear();
      }
    }
    errno = 0;
    ok = ok && std::fwrite(text.data(), 1, text.size(), f) == text.size();
    const int write_errno = errno;
    if (std::fclose(f) != 0 || !ok || !point_status.ok()) {
      const int err = write_errno != 0 ? write_errno : errno;
      fs::remove(grid_tmp, ec);
      RETURN_IF_ERROR(point_status);
      return absl::DataLossError(absl::StrCat(grid_tmp.string(), ": cannot write: ",
                                              err != 0 ? std::strerror(err) : "failed"));
    }
  }

  // Resume: a point is finished when both files hold its line with the
  // current config hash (and the CSV header is the current one). Only the
  // lines in the files are read into memory, and only finished points
  // hold lines.
  std::vector<std::unique_ptr<PointLines>> done(num);
  {
    ASSIGN_OR_RETURN(std::vector<std::string> jl,
                     ReadCompleteLines(jsonl_path, /*missing_ok=*/true));
    ASSIGN_OR_RETURN(std::vector<std::string> cl,
                     ReadCompleteLines(csv_path, /*missing_ok=*/true));
    // id -> (hash, jsonl line) of the lines that match their point.
    std::unordered_map<int64_t, std::pair<std::string, std::string>> jmap;
    int64_t id;
    std::string hash;
    int64_t other = 0;
    for (std::string& line : jl) {
      if (ParseRowKey(line, true, &id, &hash) && id >= 0 &&
          id < static_cast<int64_t>(num) && owned(id)) {
        absl::StatusOr<SweepPoint> p = points.Point(id);
        RETURN_IF_ERROR(p.status());
        if (hash == p->config_hash) {
          jmap[id] = {hash, std::move(line)};
          continue;
        }
      }
      if (!line.empty()) ++other;
    }
    jl = std::vector<std::string>();
    // Results of another grid entirely (no point in common) are not
    // replaced silently; an edited grid keeps its unchanged points (and
    // drops the others only with --overwrite, below).
    if (other > 0 && jmap.empty() && !options.replace_other_results) {
      fs::remove(grid_tmp, ec);
      return absl::AlreadyExistsError(
          absl::StrCat(out_dir, " holds ", other,
                       " results of another grid (no point of this one); "
                       "give another --out, or --overwrite to discard them"));
    }
    const bool csv_columns_differ = cl.empty() || cl[0] != header;
    if (!csv_columns_differ) {
      for (size_t i = 1; i < cl.size(); ++i) {
        if (!ParseRowKey(cl[i], false, &id, &hash)) continue;
        const auto it = jmap.find(id);
        // A point is done when both its lines agree on its status; a
        // corrupted line reruns the point, and so does an error (a trace
        // file that was missing, a device file since fixed: the cause may
        // be gone), where ok and infeasible are the model's answers.
        if (it == jmap.end() || it->second.first != hash) continue;
        const std::string status =
            AgreedStatus(it->second.second, cl[i], axis_columns.size());
        if (!status.empty() && status != "error") {
          done[id] = std::make_unique<PointLines>(
              PointLines{it->second.second, std::move(cl[i])});
        }
      }
    }
    // Finished results are never dropped silently: lines of points this
    // grid no longer has (an edited axis or base, another shard's points)
    // and results whose CSV has other columns (--interval or an axis name
    // changed; the CSV missing) would be discarded by the rewrite below.
    const int64_t other_columns =
        csv_columns_differ ? static_cast<int64_t>(jmap.size()) : 0;
    if ((other > 0 || other_columns > 0) && !options.replace_other_results) {
      int64_t kept = 0;
      for (const auto& d : done) kept += d ? 1 : 0;
      std::vector<std::string> why;
      if (other > 0) {
        why.push_back(absl::StrCat(other,
                                   " of points this grid does not have as they were "
                                   "run (an edited axis or base, another shard's)"));
      }
      if (other_columns > 0) {
        why.push_back(absl::StrCat(other_columns,
                                   " of this grid whose results.csv has other columns or "
                                   "is missing (--interval or an axis name changed)"));
      }
      fs::remove(grid_tmp, ec);
      return absl::AlreadyExistsError(absl::StrCat(
          out_dir, " holds ", other + other_columns, " results this run would discard (",
          absl::StrJoin(why, "; "), "); ", kept,
          " finished points would be resumed; give another --out, or --overwrite to "
          "discard them"));
    }
  }
  fs::rename(grid_tmp, grid_path, ec);
  if (ec) {
    return absl::InternalError(absl::StrCat("rename ", grid_tmp.string(), " -> ",
                                            grid_path.string(), ": ", ec.message()));
  }
  if (options.shard_count > 1) {
    RETURN_IF_ERROR(WriteFileWhole(
        (dir / "shard.txt").string(),
        absl::StrCat(options.shard_index, "/", options.shard_count, "\n")));
  } else {
    fs::remove(dir / "shard.txt", ec);  // a whole grid now: no shard's mark left
  }
  // The files in point order: the finished points' lines.
  auto rewrite = [&]() -> absl::Status {
    std::string j, c = header;
    for (const auto& d : done) {
      if (!d) continue;
      j += d->jsonl;
      c += d->csv;
    }
    RETURN_IF_ERROR(WriteFileWhole(jsonl_path.string(), j));
    return WriteFileWhole(csv_path.string(), c);
  };
  RETURN_IF_ERROR(rewrite());

  SweepSummary summary;
  int64_t num_todo = 0;
  for (size_t i = 0; i < num; ++i) {
    if (!owned(static_cast<int64_t>(i))) continue;
    ++summary.num_points;
    if (done[i]) {
      ++summary.num_resumed;
    } else {
      ++num_todo;
    }
  }

  if (num_todo > 0) {
    std::FILE* jf = std::fopen(jsonl_path.c_str(), "ab");
    std::FILE* cf = std::fopen(csv_path.c_str(), "ab");
    if (jf == nullptr || cf == nullptr) {
      if (jf) std::fclose(jf);
      if (cf) std::fclose(cf);
      return absl::PermissionDeniedError(
          absl::StrCat(out_dir, ": cannot append results: ", std::strerror(errno)));
    }
    const bool progress =
        options.progress > 0 || (options.progress < 0 && isatty(STDERR_FILENO) == 1);
    std::mutex mu;
    std::atomic<size_t> next{0};
    std::atomic<bool> stop{false};
    int64_t finished = 0;    // guarded by mu
    absl::Status io_status;  // guarded by mu
    const auto start = std::chrono::steady_clock::now();
    // Workers take the unfinished points in id order, each decoded only
    // when taken; done[i] is written only by the worker that took i.
    const auto interrupted = [&options] {
      return options.interrupt != nullptr && options.interrupt->load();
    };
    auto worker = [&] {
      while (!stop.load() && !interrupted()) {
        const size_t i = next.fetch_add(1);
        if (i >= num) break;
        if (!owned(static_cast<int64_t>(i)) || done[i]) continue;
        absl::StatusOr<SweepPoint> p = points.Point(static_cast<int64_t>(i));
        if (!p.ok()) {  // decoded once already, for grid.textproto
          std::lock_guard<std::mutex> lock(mu);
          if (io_status.ok()) io_status = p.status();
          stop.store(true);
          break;
        }
        absl::StatusOr<std::vector<double>> result = runner.run(p->config);
        auto lines = std::make_unique<PointLines>(
            FormatPoint(*p, axis_columns, runner.metric_names, result));
        std::lock_guard<std::mutex> lock(mu);
        errno = 0;
        const bool jsonl_ok = std::fwrite(lines->jsonl.data(), 1, lines->jsonl.size(),
                                          jf) == lines->jsonl.size() &&
                              std::fflush(jf) == 0;
        const bool ok = jsonl_ok &&
                        std::fwrite(lines->csv.data(), 1, lines->csv.size(), cf) ==
                            lines->csv.size() &&
                        std::fflush(cf) == 0;
        if (!ok) {
          if (io_status.ok()) {
            // An output that cannot be written: the finished points are in
            // the files up to here (a rerun resumes them).
            io_status = absl::DataLossError(absl::StrCat(
                (jsonl_ok ? csv_path : jsonl_path).string(),
                ": cannot write: ", errno != 0 ? std::strerror(errno) : "write failed",
                "; the points finished before it are kept (rerun to resume)"));
          }
          stop.store(true);
          break;
        }
        done[i] = std::move(lines);
        ++finished;
        if (options.stop_after >= 0 && finished >= options.stop_after) stop.store(true);
        if (progress) {
          const double el =
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
                  .count();
          const double rate = el > 0 ? finished / el : 0;
          const int64_t left = num_todo - finished;
          std::fprintf(stderr,
                       "\rsweep: %lld/%zu points (%lld resumed), %.2f/s, ETA %s   ",
                       static_cast<long long>(summary.num_resumed) + finished, num,
                       static_cast<long long>(summary.num_resumed), rate,
                       FormatDuration(rate > 0 ? left / rate : -1).c_str());
        }
      }
    };
    RunOnThreads(std::max(1, options.jobs), worker);
    if (progress) std::fputc('\n', stderr);
    std::fclose(jf);
    std::fclose(cf);
    RETURN_IF_ERROR(io_status);
    summary.num_run = finished;
  }

  summary.complete = true;
  for (size_t i = 0; i < num; ++i) {
    const auto& d = done[i];
    if (!owned(static_cast<int64_t>(i))) continue;
    if (!d) {
      summary.complete = false;
      continue;
    }
    if (d->jsonl.find("\"status\":\"error\"") != std::string::npos) {
      ++summary.num_failed;
    } else if (d->jsonl.find("\"status\":\"infeasible\"") != std::string::npos) {
      ++summary.num_infeasible;
    }
  }
  if (summary.complete) RETURN_IF_ERROR(rewrite());
  return summary;
}

}  // namespace servesim
