#include "traces/json.h"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <limits>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"

namespace servesim {
namespace {

// A UTF-8 byte-order mark (Windows editors write one) is not JSON: say so
// when the parse fails at it, rather than leave "expected '{'" unexplained.
std::string BomHint(std::string_view text, size_t error_pos) {
  if (error_pos > 0 || !text.starts_with("\xEF\xBB\xBF")) return "";
  return " (the text starts with a UTF-8 byte-order mark, EF BB BF; save the file "
         "without it)";
}

constexpr int kMaxDepth = 256;

// Length of the UTF-8 sequence starting at p (0 when invalid).
inline int Utf8SequenceLength(const unsigned char* p, const unsigned char* end) {
  const unsigned char c = p[0];
  if (c < 0x80) return 1;
  auto cont = [&](int i) { return p + i < end && (p[i] & 0xC0) == 0x80; };
  if (c >= 0xC2 && c <= 0xDF) return cont(1) ? 2 : 0;
  if (c >= 0xE0 && c <= 0xEF) {
    if (!cont(1) || !cont(2)) return 0;
    if (c == 0xE0 && p[1] < 0xA0) return 0;   // overlong
    if (c == 0xED && p[1] >= 0xA0) return 0;  // surrogates
    return 3;
  }
  if (c >= 0xF0 && c <= 0xF4) {
    if (!cont(1) || !cont(2) || !cont(3)) return 0;
    if (c == 0xF0 && p[1] < 0x90) return 0;   // overlong
    if (c == 0xF4 && p[1] >= 0x90) return 0;  // > U+10FFFF
    return 4;
  }
  return 0;
}

void AppendUtf8(uint32_t cp, std::string& out) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// A cursor over the text; every Scan* function leaves pos_ after what it
// read, or sets error_ (first error wins) and returns false.
class Scanner {
 public:
  explicit Scanner(std::string_view text, JsonParseOptions options = {})
      : text_(text), options_(options) {}

  size_t pos() const { return pos_; }
  void set_pos(size_t pos) { pos_ = pos; }
  bool at_end() const { return pos_ >= text_.size(); }
  [[gnu::always_inline]] char peek() const { return at_end() ? '\0' : text_[pos_]; }
  const std::string& error() const { return error_; }
  size_t error_pos() const { return error_pos_; }

  [[gnu::always_inline]] void SkipWs() {
    while (pos_ < text_.size()) {
      const char c = text_[pos_];
      if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
      ++pos_;
    }
  }

  bool Fail(std::string message) {
    if (error_.empty()) {
      error_ = std::move(message);
      error_pos_ = pos_;
    }
    return false;
  }

  [[gnu::always_inline]] bool Expect(char c) {
    if (peek() != c) [[unlikely]] {
      return ExpectFailed(c);
    }
    ++pos_;
    return true;
  }

  [[gnu::noinline]] bool ExpectFailed(char c) {
    return Fail(at_end() ? absl::StrCat("expected '", std::string(1, c),
                                        "' but the text ended (truncated?)")
                         : absl::StrCat("expected '", std::string(1, c), "'"));
  }

  // Reads a string starting at '"'. `raw` gets the contents between the
  // quotes; when `decoded` is non-null it gets the unescaped text.
  bool ScanString(std::string_view* raw, std::string* decoded) {
    if (!Expect('"')) return false;
    const size_t begin = pos_;
    const auto* p = reinterpret_cast<const unsigned char*>(text_.data());
    const size_t n = text_.size();
    bool has_escape = false;
    while (true) {
      if (pos_ >= n) return Fail("string not closed (truncated?)");
      const unsigned char c = p[pos_];
      if (c == '"') break;
      if (c == '\\') {
        has_escape = true;
        if (pos_ + 1 >= n) return Fail("string not closed (truncated?)");
        const char e = text_[pos_ + 1];
        if (e == 'u') {
          if (pos_ + 6 > n) return Fail("bad \\u escape");
          for (int i = 2; i < 6; ++i) {
            if (HexValue(text_[pos_ + i]) < 0) return Fail("bad \\u escape");
          }
          pos_ += 6;
        } else if (std::strchr("\"\\/bfnrt", e) != nullptr && e != '\0') {
          pos_ += 2;
        } else {
          return Fail("bad escape in string");
        }
        continue;
      }
      if (c < 0x20) return Fail("control character in string");
      if (c < 0x80) {
        ++pos_;
        continue;
      }
      const int len = Utf8SequenceLength(p + pos_, p + n);
      if (len == 0) return Fail("invalid UTF-8 in string");
      pos_ += len;
    }
    *raw = text_.substr(begin, pos_ - begin);
    ++pos_;  // closing quote
    if (decoded != nullptr) {
      decoded->clear();
      if (!has_escape) {
        decoded->assign(raw->data(), raw->size());
      } else if (!Unescape(*raw, *decoded)) {
        pos_ = begin;
        return Fail("bad \\u surrogate pair in string");
      }
    }
    return true;
  }

  // Reads a number literal (JSON grammar) into `raw`.
  bool ScanNumber(std::string_view* raw) {
    const size_t begin = pos_;
    const size_t n = text_.size();
    auto digit = [&](size_t i) { return i < n && text_[i] >= '0' && text_[i] <= '9'; };
    if (pos_ < n && text_[pos_] == '-') ++pos_;
    if (!digit(pos_)) return Fail("bad number");
    if (text_[pos_] == '0') {
      ++pos_;
    } else {
      while (digit(pos_)) ++pos_;
    }
    if (pos_ < n && text_[pos_] == '.') {
      ++pos_;
      if (!digit(pos_)) return Fail("bad number");
      while (digit(pos_)) ++pos_;
    }
    if (pos_ < n && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
      ++pos_;
      if (pos_ < n && (text_[pos_] == '+' || text_[pos_] == '-')) ++pos_;
      if (!digit(pos_)) return Fail("bad number");
      while (digit(pos_)) ++pos_;
    }
    *raw = text_.substr(begin, pos_ - begin);
    return true;
  }

  // A number inside an array: plain non-negative integers are parsed on
  // the fly; anything else goes through ScanNumber.
  [[gnu::always_inline]] bool ScanArrayNumber(FlatJsonNumber* out) {
    const size_t begin = pos_;
    const size_t n = text_.size();
    const char* p = text_.data();
    size_t i = pos_;
    uint64_t v = 0;
    bool fits = true;
    if (i < n && p[i] >= '0' && p[i] <= '9') {
      if (p[i] == '0') {
        ++i;
      } else {
        while (i < n && p[i] >= '0' && p[i] <= '9') {
          v = v * 10 + static_cast<uint64_t>(p[i] - '0');
          ++i;
        }
        if (i - begin > 19) {  // 19 digits always fit; more may not
          const auto r = std::from_chars(p + begin, p + i, v);
          fits = r.ec == std::errc();
        }
      }
      if (i >= n ||
          (p[i] != '.' && p[i] != 'e' && p[i] != 'E' && !(p[i] >= '0' && p[i] <= '9'))) {
        pos_ = i;
        out->raw = text_.substr(begin, i - begin);
        out->value = v;
        out->is_uint = fits;
        return true;
      }
    }
    out->is_uint = false;
    out->value = 0;
    return ScanNumber(&out->raw);
  }

  bool ScanLiteral(std::string_view word) {
    const std::string_view rest = text_.substr(pos_);
    if (rest.substr(0, word.size()) != word) {
      const bool cut = rest.size() < word.size() && word.substr(0, rest.size()) == rest;
      return Fail(cut ? "value cut short (truncated?)" : "unexpected character");
    }
    pos_ += word.size();
    return true;
  }

  // Parses any value into `out`.
  bool ParseValue(JsonValue& out, int depth) {
    if (depth > kMaxDepth) return Fail("nesting deeper than 256 levels");
    SkipWs();
    if (at_end()) return Fail("expected a value but the text ended (truncated?)");
    const char c = peek();
    std::string_view raw;
    switch (c) {
      case '{': {
        out.type = JsonValue::Type::kObject;
        ++pos_;
        SkipWs();
        if (peek() == '}') {
          ++pos_;
          return true;
        }
        // Keys seen in this object: a key given twice is an error (RFC 8259
        // leaves it undefined; Python keeps the last value, this parser
        // would find the first, so the two readers would disagree).
        std::set<std::string> keys;
        while (true) {
          SkipWs();
          std::string key;
          if (!ScanString(&raw, &key)) return false;
          if (!keys.insert(key).second) {
            return Fail(absl::StrCat("duplicate key \"", key, "\" in an object"));
          }
          SkipWs();
          if (!Expect(':')) return false;
          out.members.push_back(JsonMember{std::move(key), JsonValue()});
          if (!ParseValue(out.members.back().value, depth + 1)) return false;
          SkipWs();
          if (peek() == ',') {
            ++pos_;
            continue;
          }
          return Expect('}');
        }
      }
      case '[': {
        out.type = JsonValue::Type::kArray;
        ++pos_;
        SkipWs();
        if (peek() == ']') {
          ++pos_;
          return true;
        }
        out.packed = options_.pack_number_arrays;
        while (true) {
          if (out.packed) {
            // Numbers straight into `numbers`; the first other value unpacks
            // what came before into `items` and goes on there.
            JsonValue item;
            if (!ParseValue(item, depth + 1)) return false;
            if (item.type == JsonValue::Type::kNumber) {
              out.numbers.push_back(item.number);
            } else {
              out.packed = false;
              out.items.reserve(out.numbers.size() + 1);
              for (double x : out.numbers) {
                JsonValue n;
                n.type = JsonValue::Type::kNumber;
                n.number = x;
                out.items.push_back(std::move(n));
              }
              out.numbers = std::vector<double>();
              out.items.push_back(std::move(item));
            }
          } else {
            out.items.emplace_back();
            if (!ParseValue(out.items.back(), depth + 1)) return false;
          }
          SkipWs();
          if (peek() == ',') {
            ++pos_;
            continue;
          }
          if (out.packed) out.numbers.shrink_to_fit();
          return Expect(']');
        }
      }
      case '"':
        out.type = JsonValue::Type::kString;
        return ScanString(&raw, &out.str);
      case 't':
        out.type = JsonValue::Type::kBool;
        out.bool_value = true;
        return ScanLiteral("true");
      case 'f':
        out.type = JsonValue::Type::kBool;
        return ScanLiteral("false");
      case 'n':
        out.type = JsonValue::Type::kNull;
        return ScanLiteral("null");
      default: {
        // Python's json writes NaN / Infinity for non-finite floats.
        if (c == 'N') {
          out.type = JsonValue::Type::kNumber;
          out.number = std::numeric_limits<double>::quiet_NaN();
          out.str = "NaN";
          return ScanLiteral("NaN");
        }
        if (c == 'I' || (c == '-' && text_.substr(pos_, 2) == "-I")) {
          const bool neg = c == '-';
          out.type = JsonValue::Type::kNumber;
          out.number = neg ? -std::numeric_limits<double>::infinity()
                           : std::numeric_limits<double>::infinity();
          out.str = neg ? "-Infinity" : "Infinity";
          return ScanLiteral(out.str);
        }
        if (!ScanNumber(&raw)) return false;
        out.type = JsonValue::Type::kNumber;
        out.str.assign(raw.data(), raw.size());
        const auto r = std::from_chars(raw.data(), raw.data() + raw.size(), out.number);
        if (r.ec == std::errc::result_out_of_range) {
          // Like Python's json (and the flat parser, which accepts the same
          // text): overflow is +-inf, underflow 0; readers then reject the
          // value with its field name and allowed range.
          const bool neg = raw.front() == '-';
          const size_t e = raw.find_first_of("eE");
          const bool overflow = e == std::string_view::npos || raw[e + 1] != '-';
          out.number = overflow ? (neg ? -std::numeric_limits<double>::infinity()
                                       : std::numeric_limits<double>::infinity())
                                : (neg ? -0.0 : 0.0);
        }
        return true;
      }
    }
  }

  // Skips any value, validating it.
  bool SkipValue(int depth) {
    JsonValue ignored;
    return ParseValue(ignored, depth);
  }

 private:
  static bool Unescape(std::string_view raw, std::string& out) {
    for (size_t i = 0; i < raw.size(); ++i) {
      const char c = raw[i];
      if (c != '\\') {
        out.push_back(c);
        continue;
      }
      const char e = raw[++i];
      switch (e) {
        case 'b':
          out.push_back('\b');
          break;
        case 'f':
          out.push_back('\f');
          break;
        case 'n':
          out.push_back('\n');
          break;
        case 'r':
          out.push_back('\r');
          break;
        case 't':
          out.push_back('\t');
          break;
        case 'u': {
          auto hex4 = [&](size_t at) {
            uint32_t v = 0;
            for (size_t k = 0; k < 4; ++k) v = v * 16 + HexValue(raw[at + k]);
            return v;
          };
          uint32_t cp = hex4(i + 1);
          i += 4;
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            if (i + 6 >= raw.size() || raw[i + 1] != '\\' || raw[i + 2] != 'u')
              return false;
            const uint32_t lo = hex4(i + 3);
            if (lo < 0xDC00 || lo > 0xDFFF) return false;
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            i += 6;
          } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
            return false;
          }
          AppendUtf8(cp, out);
          break;
        }
        default:
          out.push_back(e);
          break;  // " \ /
      }
    }
    return true;
  }

  std::string_view text_;
  JsonParseOptions options_;
  size_t pos_ = 0;
  std::string error_;
  size_t error_pos_ = 0;
};

}  // namespace

bool IsValidUtf8(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const auto* end = p + s.size();
  while (p < end) {
    // ASCII fast path: 8 bytes at a time.
    while (end - p >= 8) {
      uint64_t word;
      std::memcpy(&word, p, 8);
      if (word & 0x8080808080808080ULL) break;
      p += 8;
    }
    if (p >= end) break;
    if (*p < 0x80) {
      ++p;
      continue;
    }
    const int len = Utf8SequenceLength(p, end);
    if (len == 0) return false;
    p += len;
  }
  return true;
}

const JsonValue* JsonValue::Find(std::string_view key) const {
  for (const auto& [k, v] : members) {
    if (k == key) return &v;
  }
  return nullptr;
}

absl::StatusOr<JsonValue> ParseJson(std::string_view text, std::string_view source_name,
                                    JsonParseOptions options) {
  Scanner s(text, options);
  JsonValue root;
  bool ok = s.ParseValue(root, 0);
  if (ok) {
    s.SkipWs();
    if (!s.at_end()) ok = s.Fail("unexpected text after the JSON value");
  }
  if (ok) return root;
  // Turn the byte offset into line:column.
  size_t line = 1, col = 1;
  for (size_t i = 0; i < s.error_pos() && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  return absl::InvalidArgumentError(absl::StrCat(std::string(source_name), ":", line, ":",
                                                 col, ": invalid JSON: ", s.error(),
                                                 BomHint(text, s.error_pos())));
}

absl::Status FlatJsonParser::Parse(std::string_view line) {
  fields_.clear();
  num_count_ = 0;
  Scanner s(line);
  auto fail = [&s, line]() {
    return absl::InvalidArgumentError(absl::StrCat("invalid JSON at column ",
                                                   s.error_pos() + 1, ": ", s.error(),
                                                   BomHint(line, s.error_pos())));
  };
  s.SkipWs();
  if (!s.Expect('{')) return fail();
  s.SkipWs();
  if (s.peek() == '}') {
    s.Expect('}');
  } else {
    while (true) {
      s.SkipWs();
      FlatJsonField f;
      if (!s.ScanString(&f.key, nullptr)) return fail();
      s.SkipWs();
      if (!s.Expect(':')) return fail();
      s.SkipWs();
      const char c = s.peek();
      if (c == '"') {
        f.kind = FlatJsonField::Kind::kString;
        if (!s.ScanString(&f.raw, nullptr)) return fail();
      } else if (c == '-' || (c >= '0' && c <= '9')) {
        f.kind = FlatJsonField::Kind::kNumber;
        if (!s.ScanNumber(&f.raw)) return fail();
      } else if (c == 't' || c == 'f') {
        f.kind = FlatJsonField::Kind::kBool;
        const size_t begin = s.pos();
        if (!s.ScanLiteral(c == 't' ? "true" : "false")) return fail();
        f.raw = line.substr(begin, s.pos() - begin);
      } else if (c == 'n') {
        f.kind = FlatJsonField::Kind::kNull;
        if (!s.ScanLiteral("null")) return fail();
      } else if (c == '[') {
        // Fast path: an array of numbers; anything else falls back to a
        // validating skip and becomes kOther.
        const size_t begin = s.pos();
        s.Expect('[');
        f.kind = FlatJsonField::Kind::kNumberArray;
        f.array_begin = static_cast<uint32_t>(num_count_);
        s.SkipWs();
        if (s.peek() == ']') {
          s.Expect(']');
        } else {
          while (true) {
            s.SkipWs();
            const char d = s.peek();
            if (d != '-' && (d < '0' || d > '9')) {
              f.kind = FlatJsonField::Kind::kOther;
              break;
            }
            if (num_count_ == numbers_.size()) {
              numbers_.resize(std::max<size_t>(64, numbers_.size() * 2));
            }
            if (!s.ScanArrayNumber(&numbers_[num_count_])) return fail();
            ++num_count_;
            s.SkipWs();
            if (s.peek() == ',') {
              s.Expect(',');
              continue;
            }
            if (!s.Expect(']')) return fail();
            break;
          }
        }
        if (f.kind == FlatJsonField::Kind::kOther) {
          num_count_ = f.array_begin;
          s.set_pos(begin);
          if (!s.SkipValue(1)) return fail();
        }
        f.array_end = static_cast<uint32_t>(num_count_);
      } else if (c == '{') {
        f.kind = FlatJsonField::Kind::kOther;
        if (!s.SkipValue(1)) return fail();
      } else {
        if (s.at_end()) {
          s.Fail("expected a value but the line ended (truncated?)");
        } else {
          s.Fail("unexpected character");
        }
        return fail();
      }
      for (const FlatJsonField& g : fields_) {
        if (g.key == f.key) {  // see ParseJson: a key may appear once
          s.Fail(absl::StrCat("duplicate key \"", std::string(f.key), "\" in an object"));
          return fail();
        }
      }
      fields_.push_back(f);
      s.SkipWs();
      if (s.peek() == ',') {
        s.Expect(',');
        continue;
      }
      if (!s.Expect('}')) return fail();
      break;
    }
  }
  s.SkipWs();
  if (!s.at_end()) {
    s.Fail("unexpected text after the JSON object");
    return fail();
  }
  return absl::OkStatus();
}

const FlatJsonField* FlatJsonParser::Find(std::string_view key) const {
  for (const auto& f : fields_) {
    if (f.key == key) return &f;
  }
  return nullptr;
}

}  // namespace servesim
