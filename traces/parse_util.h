// Exact, allocation-free field parsers shared by the trace readers. Each
// returns false (and leaves *out unspecified) on anything but a complete,
// well-formed field.
#ifndef SERVESIM_TRACES_PARSE_UTIL_H_
#define SERVESIM_TRACES_PARSE_UTIL_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace servesim {

// A decimal integer (optional leading '-'), whole field, into int64.
bool ParseInt64(std::string_view s, int64_t* out);
// A decimal unsigned integer, whole field.
bool ParseUint64(std::string_view s, uint64_t* out);

// A non-negative decimal number with optional fraction and exponent
// ("12", "12.5", "1.25e3") times `unit_ns` (e.g. kNsPerSec for seconds),
// computed exactly in integers and rounded half up to whole ns. False on
// negatives, overflow past ~292 years, or bad syntax.
bool ParseDecimalToNs(std::string_view s, int64_t unit_ns, int64_t* out_ns);

// A wall-clock timestamp "YYYY-MM-DD HH:MM:SS[.f{1,9}][Z|+HH:MM|-HH:MM]"
// ('T' also accepted as the separator) to ns since 1970-01-01 UTC (no
// time zone = UTC). Validates ranges (month 1-12, day within the month,
// hour < 24, minute < 60, second < 61, year 1970-2200 so that offsets
// between two timestamps fit int64 ns).
bool ParseTimestampToNs(std::string_view s, int64_t* out_ns);

// Splits one CSV line (RFC 4180 quoting, no embedded newlines) into
// `cells` (views into `line` for unquoted cells; quoted cells with doubled
// quotes are unescaped into `scratch`, which must outlive the views).
// False on a malformed quoted cell.
bool SplitCsvLine(std::string_view line, std::vector<std::string_view>& cells,
                  std::vector<std::string>& scratch);

// Strips leading/trailing spaces and tabs.
std::string_view TrimSpaces(std::string_view s);

}  // namespace servesim

#endif  // SERVESIM_TRACES_PARSE_UTIL_H_
