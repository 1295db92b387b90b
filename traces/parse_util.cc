#include "traces/parse_util.h"

#include <charconv>
#include <cstring>
#include <limits>

namespace servesim {
namespace {

inline bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// Parses exactly `n` digits at s[pos].
bool FixedDigits(std::string_view s, size_t pos, int n, int* out) {
  if (pos + n > s.size()) return false;
  int v = 0;
  for (int i = 0; i < n; ++i) {
    const char c = s[pos + i];
    if (!IsDigit(c)) return false;
    v = v * 10 + (c - '0');
  }
  *out = v;
  return true;
}

// Days from 1970-01-01 to y-m-d (proleptic Gregorian), H. Hinnant's method.
int64_t DaysFromCivil(int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const unsigned yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<int64_t>(doe) - 719468;
}

int DaysInMonth(int y, int m) {
  static constexpr int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  if (m == 2 && ((y % 4 == 0 && y % 100 != 0) || y % 400 == 0)) return 29;
  return kDays[m - 1];
}

}  // namespace

bool ParseInt64(std::string_view s, int64_t* out) {
  if (s.empty()) return false;
  if (s[0] == '+') return false;
  const auto r = std::from_chars(s.data(), s.data() + s.size(), *out);
  return r.ec == std::errc() && r.ptr == s.data() + s.size();
}

bool ParseUint64(std::string_view s, uint64_t* out) {
  if (s.empty() || !IsDigit(s[0])) return false;
  const auto r = std::from_chars(s.data(), s.data() + s.size(), *out);
  return r.ec == std::errc() && r.ptr == s.data() + s.size();
}

bool ParseDecimalToNs(std::string_view s, int64_t unit_ns, int64_t* out_ns) {
  // Collect the significant digits as an integer `mant` and a decimal
  // exponent `exp10` so that value = mant * 10^exp10.
  size_t i = 0;
  const size_t n = s.size();
  if (n == 0) return false;
  __int128 mant = 0;
  int exp10 = 0;
  int digits = 0;
  bool any = false;
  // 25 significant digits: mant < 1e25, so mant x unit_ns stays inside
  // __int128 for units up to 1e13 ns (30 digits overflowed it with seconds:
  // "2.00000000000000000000000000001" s read as -1.4 s). The digits dropped
  // are below 1e-6 ns of any time that fits int64.
  constexpr int kMaxDigits = 25;
  auto take = [&](char c, bool fraction) {
    any = true;
    if (digits < kMaxDigits) {
      mant = mant * 10 + (c - '0');
      if (mant != 0) ++digits;
      if (fraction) --exp10;
    } else if (!fraction) {
      ++exp10;
    }
  };
  while (i < n && IsDigit(s[i])) take(s[i++], false);
  if (i < n && s[i] == '.') {
    ++i;
    const size_t start = i;
    while (i < n && IsDigit(s[i])) take(s[i++], true);
    if (i == start) return false;
  }
  if (!any) return false;
  if (i < n && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    bool neg = false;
    if (i < n && (s[i] == '+' || s[i] == '-')) neg = s[i++] == '-';
    if (i >= n || !IsDigit(s[i])) return false;
    int e = 0;
    while (i < n && IsDigit(s[i])) {
      e = e * 10 + (s[i++] - '0');
      if (e > 400) return false;
    }
    exp10 += neg ? -e : e;
  }
  if (i != n) return false;
  // value_ns = mant * unit_ns * 10^exp10, rounded half up.
  if (unit_ns <= 0 || unit_ns > 10'000'000'000'000) return false;
  __int128 v = mant * unit_ns;
  constexpr __int128 kMax = std::numeric_limits<int64_t>::max();
  if (v == 0) {
    *out_ns = 0;
    return true;
  }
  while (exp10 > 0) {
    v *= 10;
    if (v > kMax) return false;
    --exp10;
  }
  if (exp10 < 0) {
    if (exp10 < -38) {
      *out_ns = 0;
      return true;
    }
    __int128 div = 1;
    for (int k = 0; k < -exp10; ++k) div *= 10;
    v = (v + div / 2) / div;
  }
  if (v > kMax) return false;
  *out_ns = static_cast<int64_t>(v);
  return true;
}

bool ParseTimestampToNs(std::string_view s, int64_t* out_ns) {
  int y, mo, d, h, mi, sec;
  if (s.size() < 19) return false;
  if (!FixedDigits(s, 0, 4, &y) || s[4] != '-' || !FixedDigits(s, 5, 2, &mo) ||
      s[7] != '-' || !FixedDigits(s, 8, 2, &d) || (s[10] != ' ' && s[10] != 'T') ||
      !FixedDigits(s, 11, 2, &h) || s[13] != ':' || !FixedDigits(s, 14, 2, &mi) ||
      s[16] != ':' || !FixedDigits(s, 17, 2, &sec)) {
    return false;
  }
  // Years 1970-2200: any two such instants are less than 2^63 ns apart, so
  // arrival offsets never overflow.
  if (y < 1970 || y > 2200 || mo < 1 || mo > 12 || d < 1 || d > DaysInMonth(y, mo) ||
      h > 23 || mi > 59 || sec > 60) {
    return false;
  }
  size_t i = 19;
  int64_t frac_ns = 0;
  if (i < s.size() && s[i] == '.') {
    ++i;
    int nd = 0;
    while (i < s.size() && IsDigit(s[i])) {
      if (nd >= 9) return false;  // below 1 ns: refuse rather than round
      frac_ns = frac_ns * 10 + (s[i] - '0');
      ++nd;
      ++i;
    }
    if (nd == 0) return false;
    for (int k = nd; k < 9; ++k) frac_ns *= 10;
  }
  int64_t offset_s = 0;
  if (i < s.size()) {
    if (s[i] == 'Z' && i + 1 == s.size()) {
      ++i;
    } else if (s[i] == '+' || s[i] == '-') {
      const bool neg = s[i] == '-';
      int oh, om;
      if (i + 6 != s.size() || !FixedDigits(s, i + 1, 2, &oh) || s[i + 3] != ':' ||
          !FixedDigits(s, i + 4, 2, &om) || oh > 23 || om > 59) {
        return false;
      }
      offset_s = (int64_t{oh} * 3600 + int64_t{om} * 60) * (neg ? -1 : 1);
      i = s.size();
    } else {
      return false;
    }
  }
  if (i != s.size()) return false;
  const int64_t days =
      DaysFromCivil(y, static_cast<unsigned>(mo), static_cast<unsigned>(d));
  const int64_t secs =
      days * 86400 + int64_t{h} * 3600 + int64_t{mi} * 60 + sec - offset_s;
  *out_ns = secs * 1'000'000'000 + frac_ns;
  return true;
}

bool SplitCsvLine(std::string_view line, std::vector<std::string_view>& cells,
                  std::vector<std::string>& scratch) {
  cells.clear();
  scratch.clear();
  const size_t n = line.size();
  // Views into scratch must survive later push_backs: reserve the upper
  // bound (one quoted cell per byte) so the vector never reallocates.
  if (std::memchr(line.data(), '"', n) != nullptr) scratch.reserve(n);
  size_t pos = 0;
  while (true) {
    if (pos < n && line[pos] == '"') {
      std::string& cell = scratch.emplace_back();
      size_t i = pos + 1;
      while (true) {
        if (i >= n) return false;  // unterminated quote
        if (line[i] == '"') {
          if (i + 1 < n && line[i + 1] == '"') {
            cell.push_back('"');
            i += 2;
            continue;
          }
          ++i;
          break;
        }
        cell.push_back(line[i++]);
      }
      if (i < n && line[i] != ',') return false;  // text after closing quote
      cells.push_back(cell);
      pos = i;
    } else {
      const void* comma = std::memchr(line.data() + pos, ',', n - pos);
      const size_t end = comma ? static_cast<const char*>(comma) - line.data() : n;
      cells.push_back(line.substr(pos, end - pos));
      pos = end;
    }
    if (pos >= n) break;
    ++pos;  // the comma
    if (pos == n) {
      cells.emplace_back();  // trailing empty cell
      break;
    }
  }
  return true;
}

std::string_view TrimSpaces(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

}  // namespace servesim
