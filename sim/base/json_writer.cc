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

namespace {

// The length of the well-formed UTF-8 sequence at s[i] (RFC 3629: no
// overlong forms, no surrogates, at most U+10FFFF), or 0 when there is none.
size_t Utf8SequenceLength(std::string_view s, size_t i) {
  const auto at = [&](size_t k) { return static_cast<unsigned char>(s[i + k]); };
  const unsigned char c = at(0);
  size_t n = 0;
  unsigned char lo = 0x80, hi = 0xbf;  // the second byte's range
  if (c >= 0xc2 && c <= 0xdf) {
    n = 2;
  } else if (c >= 0xe0 && c <= 0xef) {
    n = 3;
    if (c == 0xe0) lo = 0xa0;
    if (c == 0xed) hi = 0x9f;
  } else if (c >= 0xf0 && c <= 0xf4) {
    n = 4;
    if (c == 0xf0) lo = 0x90;
    if (c == 0xf4) hi = 0x8f;
  } else {
    return 0;
  }
  if (i + n > s.size() || at(1) < lo || at(1) > hi) return 0;
  for (size_t k = 2; k < n; ++k) {
    if (at(k) < 0x80 || at(k) > 0xbf) return 0;
  }
  return n;
}

}  // namespace

void AppendJsonString(std::string& out, std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  out.push_back('"');
  for (size_t i = 0; i < s.size(); ++i) {
    const char ch = s[i];
    const auto c = static_cast<unsigned char>(ch);
    // JSON text is UTF-8: a byte that starts no well-formed sequence (a
    // Latin-1 device name, a cut string) becomes U+FFFD, so the document
    // stays parseable whatever the input's bytes.
    if (c >= 0x80) {
      if (const size_t n = Utf8SequenceLength(s, i); n > 0) {
        out.append(s.substr(i, n));
        i += n - 1;
      } else {
        out.append("\\ufffd");
      }
      continue;
    }
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
