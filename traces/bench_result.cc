#include "traces/bench_result.h"

#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "sim/base/status_macros.h"
#include "traces/file_util.h"
#include "traces/json.h"

namespace servesim {
namespace {

using Type = JsonValue::Type;

absl::Status KeyError(const std::string& path, const std::string& key,
                      std::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat(path, ": key \"", key, "\": ", std::string(what)));
}

absl::StatusOr<std::vector<double>> NumberArray(const std::string& path,
                                                const std::string& key,
                                                const JsonValue& v) {
  if (v.type != Type::kArray) return KeyError(path, key, "expected an array of numbers");
  if (v.packed) return v.numbers;
  std::vector<double> out;
  out.reserve(v.items.size());
  for (size_t i = 0; i < v.items.size(); ++i) {
    const JsonValue& item = v.items[i];
    if (item.type == Type::kNull) {  // a failed request's ttft can be null
      out.push_back(std::numeric_limits<double>::quiet_NaN());
      continue;
    }
    if (!item.is_number()) {
      return KeyError(path, absl::StrCat(key, "[", i, "]"), "expected a number");
    }
    out.push_back(item.number);
  }
  return out;
}

}  // namespace

double BenchResult::MetricOr(const std::string& key, double fallback) const {
  auto it = metrics.find(key);
  return it == metrics.end() ? fallback : it->second;
}

absl::StatusOr<BenchResult> ReadBenchResult(const std::string& path) {
  ASSIGN_OR_RETURN(std::string text, ReadWholeFile(path));
  if (text.empty())
    return absl::InvalidArgumentError(absl::StrCat(path, ":1: empty file"));
  ASSIGN_OR_RETURN(JsonValue root,
                   ParseJson(text, path, JsonParseOptions{.pack_number_arrays = true}));
  text = std::string();  // the parsed values are what is kept
  if (root.type != Type::kObject) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": expected a JSON object at the top level"));
  }
  BenchResult r;
  size_t array_len = 0;
  std::string array_key;
  auto check_len = [&](const std::string& key, size_t n) -> absl::Status {
    if (array_key.empty()) {
      array_key = key;
      array_len = n;
    } else if (n != array_len) {
      return KeyError(
          path, key,
          absl::StrCat("has ", n, " entries but \"", array_key, "\" has ", array_len));
    }
    return absl::OkStatus();
  };
  for (const auto& [raw_key, v] : root.members) {
    std::string key = raw_key;
    while (!key.empty() && key.back() == ':') key.pop_back();
    r.keys_used.push_back(raw_key);
    if (key == "input_lens" || key == "output_lens" || key == "ttfts" ||
        key == "start_times") {
      ASSIGN_OR_RETURN(std::vector<double> arr, NumberArray(path, key, v));
      RETURN_IF_ERROR(check_len(key, arr.size()));
      if (key == "input_lens") {
        r.input_lens = std::move(arr);
      } else if (key == "output_lens") {
        r.output_lens = std::move(arr);
      } else if (key == "ttfts") {
        r.ttfts = std::move(arr);
      } else {
        r.start_times = std::move(arr);
      }
      continue;
    }
    if (key == "itls") {
      if (v.type != Type::kArray || (v.packed && !v.numbers.empty())) {
        return KeyError(path, v.type == Type::kArray ? key + "[0]" : key,
                        v.type == Type::kArray ? "expected an array of numbers"
                                               : "expected an array of arrays");
      }
      std::vector<std::vector<double>> itls;
      itls.reserve(v.items.size());
      for (size_t i = 0; i < v.items.size(); ++i) {
        ASSIGN_OR_RETURN(std::vector<double> one,
                         NumberArray(path, absl::StrCat(key, "[", i, "]"), v.items[i]));
        itls.push_back(std::move(one));
      }
      RETURN_IF_ERROR(check_len(key, itls.size()));
      r.itls = std::move(itls);
      continue;
    }
    if (key == "errors") {
      if (v.type != Type::kArray)
        return KeyError(path, key, "expected an array of strings");
      if (v.packed && !v.numbers.empty()) {
        return KeyError(path, key + "[0]", "expected a string");
      }
      std::vector<std::string> errors;
      errors.reserve(v.items.size());
      for (size_t i = 0; i < v.items.size(); ++i) {
        const JsonValue& item = v.items[i];
        if (item.type == Type::kNull) {
          errors.emplace_back();
        } else if (item.type == Type::kString) {
          errors.push_back(item.str);
        } else {
          return KeyError(path, absl::StrCat(key, "[", i, "]"), "expected a string");
        }
      }
      RETURN_IF_ERROR(check_len(key, errors.size()));
      r.errors = std::move(errors);
      continue;
    }
    switch (v.type) {
      case Type::kNumber:
        r.metrics[key] = v.number;
        break;
      case Type::kString:
        r.strings[key] = v.str;
        break;
      case Type::kBool:
        r.strings[key] = v.bool_value ? "true" : "false";
        break;
      case Type::kArray:
        r.others[key] = "an array";
        break;
      case Type::kObject:
        r.others[key] = "an object";
        break;
      default:
        break;  // null
    }
  }
  for (const char* core : {"completed", "duration"}) {
    if (r.metrics.find(core) == r.metrics.end()) {
      return KeyError(path, core,
                      "missing or not a number (a core key of every bench result)");
    }
  }
  return r;
}

}  // namespace servesim
