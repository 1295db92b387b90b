// A tiny streaming JSON writer with deterministic number formatting.
// Doubles are written as the shortest string that round-trips
// (std::to_chars), so the same values always give the same bytes.
// Non-finite doubles become null (JSON has no NaN/Inf). Commas and
// nesting are tracked; a misuse (a value where a key is needed, unbalanced
// End*) is a bug and aborts via SERVESIM_CHECK.
// Thread-compatible. Not copyable.
#ifndef SERVESIM_SIM_BASE_JSON_WRITER_H_
#define SERVESIM_SIM_BASE_JSON_WRITER_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace servesim {

class JsonWriter {
 public:
  // indent = 0: compact, one line. indent > 0: pretty-printed with that
  // many spaces per level.
  explicit JsonWriter(int indent = 0) : indent_(indent) {}
  JsonWriter(const JsonWriter&) = delete;
  JsonWriter& operator=(const JsonWriter&) = delete;

  JsonWriter& BeginObject();
  JsonWriter& EndObject();
  JsonWriter& BeginArray();
  JsonWriter& EndArray();
  // REQUIRES: inside an object, and the previous token was a value.
  JsonWriter& Key(std::string_view key);

  JsonWriter& String(std::string_view value);
  JsonWriter& Int(int64_t value);
  JsonWriter& Uint(uint64_t value);
  JsonWriter& Double(double value);
  JsonWriter& Bool(bool value);
  JsonWriter& Null();
  // Inserts already-serialised JSON text as one value (caller vouches).
  JsonWriter& Raw(std::string_view json);

  // Key + value shorthands.
  JsonWriter& KV(std::string_view key, std::string_view value) {
    return Key(key).String(value);
  }
  JsonWriter& KV(std::string_view key, const char* value) {
    return Key(key).String(value);
  }
  JsonWriter& KV(std::string_view key, int64_t value) { return Key(key).Int(value); }
  JsonWriter& KV(std::string_view key, int32_t value) { return Key(key).Int(value); }
  JsonWriter& KV(std::string_view key, double value) { return Key(key).Double(value); }
  JsonWriter& KV(std::string_view key, bool value) { return Key(key).Bool(value); }

  // The text written so far. REQUIRES for a complete document: every
  // Begin* has been closed.
  const std::string& str() const { return out_; }
  std::string Take() { return std::move(out_); }
  bool Complete() const { return stack_.empty() && !out_.empty(); }

 private:
  enum class Ctx : uint8_t { kObject, kArray };
  void BeforeValue();
  void Newline();

  std::string out_;
  std::vector<Ctx> stack_;
  std::vector<bool> first_;  // per level: nothing written yet
  bool after_key_ = false;
  int indent_ = 0;
};

// Appends `value` as the shortest round-trip decimal ("0.1", "1e+20",
// "-3"); non-finite values append `non_finite` (e.g. "null", "nan", "").
void AppendDouble(std::string& out, double value, std::string_view non_finite = "null");
// Returns the same as AppendDouble to an empty string; for CSV cells
// non-finite values give an empty cell.
std::string FormatDouble(double value, std::string_view non_finite = "null");
// Appends `s` JSON-escaped with surrounding quotes.
void AppendJsonString(std::string& out, std::string_view s);
// Appends a CSV cell (RFC 4180: quoted when it holds , " CR or LF).
void AppendCsvCell(std::string& out, std::string_view s);

}  // namespace servesim

#endif  // SERVESIM_SIM_BASE_JSON_WRITER_H_
