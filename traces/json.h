// Hand-written JSON parsing for trace and benchmark files (the project has
// no JSON library).
//
// Two parsers:
//  - ParseJson: a strict RFC 8259 DOM parser for whole documents (vLLM
//    bench result files, a few MB at most).
//  - FlatJsonParser: a fast, allocation-free-after-warm-up parser for one
//    JSONL line holding a flat object whose values are scalars or arrays of
//    numbers (Mooncake, Qwen-Bailian). Nested values are validated and
//    reported as kOther.
// Both validate UTF-8 inside strings and reject trailing garbage.
#ifndef SERVESIM_TRACES_JSON_H_
#define SERVESIM_TRACES_JSON_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace servesim {

// Returns true when `s` is well-formed UTF-8 (no overlongs, no surrogates,
// nothing above U+10FFFF).
bool IsValidUtf8(std::string_view s);

struct JsonMember;

// A parsed JSON value. Thread-compatible; owns its children.
struct JsonValue {
  enum class Type { kNull, kBool, kNumber, kString, kArray, kObject };
  Type type = Type::kNull;
  bool bool_value = false;
  double number = 0;                // kNumber
  std::string str;                  // kString: decoded; kNumber: the literal text
  std::vector<JsonValue> items;     // kArray
  std::vector<JsonMember> members;  // kObject, in file order
  // kArray parsed with JsonParseOptions::pack_number_arrays whose items are
  // all numbers: their values, 8 bytes each, and `items` stays empty (a
  // JsonValue is ~130 bytes: a 96 MB array of numbers took 5.6 GB). Any
  // other item (null included) leaves the array in `items`, without the
  // numbers' literal text.
  bool packed = false;
  std::vector<double> numbers;

  bool is_number() const { return type == Type::kNumber; }
  // First member named `key`, or nullptr (also when not an object).
  const JsonValue* Find(std::string_view key) const;
};

struct JsonMember {
  std::string key;
  JsonValue value;
};

// Parses a whole JSON document. Errors name `source_name`:line:column.
// Nesting deeper than 256 levels is an error (bounded recursion).
struct JsonParseOptions {
  bool pack_number_arrays = false;  // see JsonValue::packed
};
absl::StatusOr<JsonValue> ParseJson(std::string_view text, std::string_view source_name,
                                    JsonParseOptions options = {});

// A number inside an array, as parsed by FlatJsonParser.
struct FlatJsonNumber {
  std::string_view raw;  // the literal
  uint64_t value = 0;    // valid when is_uint
  bool is_uint = false;  // a plain non-negative integer that fits in 64 bits
};

// One member of a flat JSON object as parsed by FlatJsonParser. Views
// point into the parsed line and are valid until the next Parse call.
struct FlatJsonField {
  enum class Kind { kNumber, kString, kBool, kNull, kNumberArray, kOther };
  std::string_view key;  // raw, without quotes (escapes not decoded)
  Kind kind = Kind::kOther;
  std::string_view raw;  // kNumber: literal; kString: raw contents; kBool: literal
  // kNumberArray: literals are numbers()[array_begin, array_end).
  uint32_t array_begin = 0;
  uint32_t array_end = 0;
};

// Fast parser for one JSONL line. Thread-compatible; reuse one instance per
// stream so its vectors stop allocating.
class FlatJsonParser {
 public:
  // Parses `line` (one JSON object, surrounding spaces allowed). On error
  // returns InvalidArgument whose message says what and at which column
  // (1-based), without the file name (the caller adds file:line).
  absl::Status Parse(std::string_view line);

  const std::vector<FlatJsonField>& fields() const { return fields_; }
  // Array numbers of the last line; only [0, num_numbers()) are valid.
  const std::vector<FlatJsonNumber>& numbers() const { return numbers_; }
  size_t num_numbers() const { return num_count_; }
  // Field named `key`, or nullptr.
  const FlatJsonField* Find(std::string_view key) const;

 private:
  std::vector<FlatJsonField> fields_;
  std::vector<FlatJsonNumber> numbers_;  // grows, never shrinks
  size_t num_count_ = 0;
};

}  // namespace servesim

#endif  // SERVESIM_TRACES_JSON_H_
