#include "sim/base/json_writer.h"

#include <charconv>
#include <cmath>
#include <system_error>

#include "sim/base/status_macros.h"

namespace servesim {

void AppendDouble(std::string& out, double value, std::string_view non_finite) {
  if (!std::isfinite(value)) {
    out.append(non_finite);
    return;
  }
  if (value == 0) value = 0;  // -0 -> 0
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), value);
  SERVESIM_CHECK(res.ec == std::errc());
  out.append(buf, res.ptr);
}

std::string FormatDouble(double value, std::string_view non_finite) {
  std::string s;
  AppendDouble(s, value, non_finite);
  return s;
}

void AppendJsonString(std::string& out, std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  out.push_back('"');
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"':
        out.append("\\\"");
        break;
      case '\\':
        out.append("\\\\");
        break;
      case '\n':
        out.append("\\n");
        break;
      case '\r':
        out.append("\\r");
        break;
      case '\t':
        out.append("\\t");
        break;
      case '\b':
        out.append("\\b");
        break;
      case '\f':
        out.append("\\f");
        break;
      default:
        if (c < 0x20) {
          out.append("\\u00");
          out.push_back(kHex[c >> 4]);
          out.push_back(kHex[c & 15]);
        } else {
          out.push_back(ch);
        }
    }
  }
  out.push_back('"');
}

void AppendCsvCell(std::string& out, std::string_view s) {
  if (s.find_first_of(",\"\r\n") == std::string_view::npos) {
    out.append(s);
    return;
  }
  out.push_back('"');
  for (char c : s) {
    if (c == '"') out.push_back('"');
    out.push_back(c);
  }
  out.push_back('"');
}

void JsonWriter::Newline() {
  if (indent_ <= 0) return;
  out_.push_back('\n');
  out_.append(static_cast<size_t>(indent_) * stack_.size(), ' ');
}

void JsonWriter::BeforeValue() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (stack_.empty()) {
    SERVESIM_CHECK(out_.empty());  // one top-level value only
    return;
  }
  SERVESIM_CHECK(stack_.back() == Ctx::kArray);
  if (!first_.back()) out_.push_back(',');
  first_.back() = false;
  Newline();
}

JsonWriter& JsonWriter::Key(std::string_view key) {
  SERVESIM_CHECK(!stack_.empty() && stack_.back() == Ctx::kObject && !after_key_);
  if (!first_.back()) out_.push_back(',');
  first_.back() = false;
  Newline();
  AppendJsonString(out_, key);
  out_.push_back(':');
  if (indent_ > 0) out_.push_back(' ');
  after_key_ = true;
  return *this;
}

JsonWriter& JsonWriter::BeginObject() {
  BeforeValue();
  out_.push_back('{');
  stack_.push_back(Ctx::kObject);
  first_.push_back(true);
  return *this;
}

JsonWriter& JsonWriter::EndObject() {
  SERVESIM_CHECK(!stack_.empty() && stack_.back() == Ctx::kObject && !after_key_);
  const bool empty = first_.back();
  stack_.pop_back();
  first_.pop_back();
  if (!empty) Newline();
  out_.push_back('}');
  return *this;
}

JsonWriter& JsonWriter::BeginArray() {
  BeforeValue();
  out_.push_back('[');
  stack_.push_back(Ctx::kArray);
  first_.push_back(true);
  return *this;
}

JsonWriter& JsonWriter::EndArray() {
  SERVESIM_CHECK(!stack_.empty() && stack_.back() == Ctx::kArray);
  const bool empty = first_.back();
  stack_.pop_back();
  first_.pop_back();
  if (!empty) Newline();
  out_.push_back(']');
  return *this;
}

JsonWriter& JsonWriter::String(std::string_view value) {
  BeforeValue();
  AppendJsonString(out_, value);
  return *this;
}

JsonWriter& JsonWriter::Int(int64_t value) {
  BeforeValue();
  char buf[24];
  auto res = std::to_chars(buf, buf + sizeof(buf), value);
  out_.append(buf, res.ptr);
  return *this;
}

JsonWriter& JsonWriter::Uint(uint64_t value) {
  BeforeValue();
  char buf[24];
  auto res = std::to_chars(buf, buf + sizeof(buf), value);
  out_.append(buf, res.ptr);
  return *this;
}

JsonWriter& JsonWriter::Double(double value) {
  BeforeValue();
  AppendDouble(out_, value, "null");
  return *this;
}

JsonWriter& JsonWriter::Bool(bool value) {
  BeforeValue();
  out_.append(value ? "true" : "false");
  return *this;
}

JsonWriter& JsonWriter::Null() {
  BeforeValue();
  out_.append("null");
  return *this;
}

JsonWriter& JsonWriter::Raw(std::string_view json) {
  BeforeValue();
  out_.append(json);
  return *this;
}

}  // namespace servesim
