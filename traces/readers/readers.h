// Shared machinery of the line-based trace readers (traces/readers/*.cc):
// line numbers, UTF-8 and truncation checks, time order, skip accounting,
// id assignment (LineTraceReader), CSV headers (CsvTraceReader) and JSON
// lines (JsonlTraceReader), plus the entry point of each format's reader.
// Internal to traces/: use OpenTraceReader (traces/trace_reader.h).
#ifndef SERVESIM_TRACES_READERS_READERS_H_
#define SERVESIM_TRACES_READERS_READERS_H_

#include <fcntl.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <deque>
#include <limits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "google/protobuf/io/zero_copy_stream_impl.h"
#include "google/protobuf/util/delimited_message_util.h"
#include "proto/trace.pb.h"
#include "sim/base/status_macros.h"
#include "traces/bench_result.h"
#include "traces/file_util.h"
#include "traces/json.h"
#include "traces/parse_util.h"
#include "traces/prefix_hash.h"
#include "traces/trace_reader.h"
#include "traces/trace_writer.h"

namespace servesim::trace_internal {

// The first field of a binary trace's header record.
inline constexpr char kBinaryMagic[] = "servesim-trace";

// One reader per format, each in its own file. REQUIRES: opts checked by
// OpenTraceReader.
absl::StatusOr<std::unique_ptr<TraceReader>> OpenAzureReader(const ReaderOptions& opts);
absl::StatusOr<std::unique_ptr<TraceReader>> OpenBurstGptReader(
    const ReaderOptions& opts);
absl::StatusOr<std::unique_ptr<TraceReader>> OpenLengthsReader(const ReaderOptions& opts);
absl::StatusOr<std::unique_ptr<TraceReader>> OpenMooncakeReader(
    const ReaderOptions& opts);
absl::StatusOr<std::unique_ptr<TraceReader>> OpenBailianReader(const ReaderOptions& opts);
absl::StatusOr<std::unique_ptr<TraceReader>> OpenVllmBenchReader(
    const ReaderOptions& opts);
absl::StatusOr<std::unique_ptr<TraceReader>> OpenBinaryReader(const ReaderOptions& opts);

// A row-level failure: why, and what to say (without the file:line).
struct RowError {
  SkipReason reason = SkipReason::kMalformed;
  std::string message;
  bool filtered = false;  // an option-driven skip, never an error
};

// Common machinery of line-based readers: line numbers, UTF-8 and
// truncation checks, time order, skip accounting, id assignment.
class LineTraceReader : public TraceReader {
 public:
  absl::StatusOr<bool> Next(RequestSpec& out) final {
    if (!final_status_.ok()) return final_status_;
    if (done_) return false;
    std::string_view line;
    while (true) {
      auto got = lines_->Next(line);
      if (!got.ok()) return Stop(got.status());
      if (!*got) {
        if (stats_.rows == 0) {
          return Stop(absl::InvalidArgumentError(absl::StrCat(
              opts_.path, ":", lines_->line_number() + 1, ": ",
              lines_->line_number() == 0 ? "empty file" : "no data rows after the header",
              " (a trace needs at least one request)")));
        }
        done_ = true;
        return false;
      }
      ++stats_.rows;
      row_error_ = RowError();
      int64_t abs_ns = 0;
      out.prefix_hashes.clear();
      out.hash_block_tokens = 0;
      out.session_id = -1;
      out.hashed_output_tokens = 0;
      bool ok;
      // JSON lines are validated by the JSON scanner (strings checked,
      // non-ASCII outside strings is a syntax error); the UTF-8 pass is
      // only redone on failure, to name the reason.
      if (!validates_utf8_itself_ && !IsValidUtf8(line)) {
        ok = Fail(SkipReason::kInvalidUtf8, "invalid UTF-8 in the row");
      } else if (TrimSpaces(line).empty()) {
        ok = Fail(SkipReason::kMalformed, "blank line (expected a record)");
      } else {
        ok = ParseRow(line, out, &abs_ns);
      }
      if (ok && have_prev_ && abs_ns < prev_abs_ns_) {
        ok = Fail(SkipReason::kTimeBackwards,
                  absl::StrCat("field ", time_field_, ": timestamp is ",
                               FormatNs(prev_abs_ns_ - abs_ns),
                               " earlier than the previous row's (rows must be in "
                               "nondecreasing time order)"));
      }
      if (ok && have_prev_ && abs_ns - first_abs_ns_ > kMaxTraceArrivalNs) {
        ok = Fail(
            SkipReason::kMalformed,
            absl::StrCat("field ", time_field_, ": timestamp is ", abs_ns - first_abs_ns_,
                         " ns (", FormatNs(abs_ns - first_abs_ns_),
                         ") after the first row's (allowed 0..", kMaxTraceArrivalNs,
                         " ns = 2^62 ns, ~146 years)"));
      }
      if (!ok) {
        if (validates_utf8_itself_ && !row_error_.filtered && !IsValidUtf8(line)) {
          row_error_.reason = SkipReason::kInvalidUtf8;
          row_error_.message = "invalid UTF-8 in the row";
        }
        if (!lines_->last_line_terminated() && !row_error_.filtered) {
          row_error_.reason = SkipReason::kTruncated;
          row_error_.message = absl::StrCat(
              "last line cut mid-record (truncated file?): ", row_error_.message);
        }
        ++stats_.skipped[static_cast<int>(row_error_.reason)];
        if (row_error_.filtered || opts_.skip_bad_rows) continue;
        return Stop(absl::InvalidArgumentError(absl::StrCat(
            opts_.path, ":", lines_->line_number(), ": ", row_error_.message)));
      }
      if (!have_prev_) {
        first_abs_ns_ = abs_ns;
        have_prev_ = true;
      }
      prev_abs_ns_ = abs_ns;
      out.arrival_ns = abs_ns - first_abs_ns_;
      out.id = stats_.requests++;
      return true;
    }
  }

  std::string Describe() const override {
    return absl::StrCat(TraceFormatName(format_), " trace ", opts_.path, " (rows ",
                        stats_.rows, ", requests ", stats_.requests,
                        ", skipped: ", stats_.SkippedSummary(), ")");
  }

 protected:
  LineTraceReader(TraceFormat format, ReaderOptions opts, std::string time_field)
      : format_(format), opts_(std::move(opts)), time_field_(std::move(time_field)) {}

  absl::Status OpenLines() {
    ASSIGN_OR_RETURN(lines_, LineReader::Open(opts_.path));
    return absl::OkStatus();
  }

  // Reads the header line of a CSV into `cells`; an empty file is an error.
  absl::Status ReadHeader(std::vector<std::string_view>& cells, std::string& storage) {
    std::string_view line;
    ASSIGN_OR_RETURN(bool got, lines_->Next(line));
    if (!got)
      return absl::InvalidArgumentError(absl::StrCat(opts_.path, ":1: empty file"));
    if (!IsValidUtf8(line)) {
      return absl::InvalidArgumentError(
          absl::StrCat(opts_.path, ":1: invalid UTF-8 in header"));
    }
    storage.assign(line.data(), line.size());
    // Strip a UTF-8 byte-order mark.
    if (storage.rfind("\xEF\xBB\xBF", 0) == 0) storage.erase(0, 3);
    std::vector<std::string> scratch;
    if (!SplitCsvLine(storage, cells, scratch)) {
      return absl::InvalidArgumentError(
          absl::StrCat(opts_.path, ":1: malformed CSV header (unterminated quote)"));
    }
    header_owned_ = std::move(scratch);  // quoted names point into it
    for (auto& c : cells) c = TrimSpaces(c);
    return absl::OkStatus();
  }

  // Parses one data row: fills input/output (and hashes/session) of `out`
  // and the absolute time. On failure calls Fail() and returns false.
  virtual bool ParseRow(std::string_view line, RequestSpec& out, int64_t* abs_ns) = 0;

  bool Fail(SkipReason reason, std::string message) {
    row_error_.reason = reason;
    row_error_.message = std::move(message);
    row_error_.filtered = false;
    return false;
  }
  bool Filter(SkipReason reason) {
    row_error_.reason = reason;
    row_error_.filtered = true;
    return false;
  }

  // A token count in [min, max_tokens].
  bool ParseLength(const char* kind, std::string_view field, std::string_view raw,
                   int64_t min, int32_t* out) {
    int64_t v = 0;
    raw = TrimSpaces(raw);
    if (!ParseInt64(raw, &v)) {
      // An out-of-range integer literal is absurd, not malformed.
      const bool digits = !raw.empty() &&
                          raw.find_first_not_of("-0123456789") == raw.npos &&
                          raw.size() > 1;
      if (digits && raw[0] != '-') {
        return Fail(SkipReason::kAbsurdLength,
                    absl::StrCat(kind, " ", std::string(field), ": ", std::string(raw),
                                 " is above the allowed maximum ", opts_.max_tokens));
      }
      if (digits) {
        return Fail(
            SkipReason::kNegativeLength,
            absl::StrCat(kind, " ", std::string(field), ": ", std::string(raw),
                         " is negative (allowed ", min, "..", opts_.max_tokens, ")"));
      }
      return Fail(SkipReason::kMalformed,
                  absl::StrCat(kind, " ", std::string(field), ": \"", Clip(raw),
                               "\" is not an integer token count (allowed ", min, "..",
                               opts_.max_tokens, ")"));
    }
    if (v < 0) {
      return Fail(
          SkipReason::kNegativeLength,
          absl::StrCat(kind, " ", std::string(field), ": ", v, " is negative (allowed ",
                       min, "..", opts_.max_tokens, ")"));
    }
    if (v < min) {
      return Fail(
          SkipReason::kZeroLength,
          absl::StrCat(kind, " ", std::string(field), ": ", v, " is below the minimum ",
                       min, " (allowed ", min, "..", opts_.max_tokens, ")"));
    }
    if (v > opts_.max_tokens) {
      return Fail(SkipReason::kAbsurdLength,
                  absl::StrCat(kind, " ", std::string(field), ": ", v,
                               " is above the allowed maximum ", opts_.max_tokens));
    }
    *out = static_cast<int32_t>(v);
    return true;
  }

  // The first 40 bytes of a value quoted from the file, control bytes
  // escaped (\x1b, \0, \r: an ESC sequence from the file cleared the
  // terminal, a NUL cut the message short, a CR overwrote it).
  static std::string Clip(std::string_view s) {
    std::string out;
    for (size_t i = 0; i < s.size() && i < 40; ++i) {
      const auto c = static_cast<unsigned char>(s[i]);
      if (c < 0x20 || c == 0x7f) {
        absl::StrAppend(&out, absl::StrFormat("\\x%02x", c));
      } else {
        out.push_back(static_cast<char>(c));
      }
    }
    if (s.size() > 40) out += "...";
    return out;
  }

  static std::string FormatNs(int64_t ns) {
    return absl::StrCat(static_cast<double>(ns) / 1e9, " s");
  }

  TraceFormat format_;
  ReaderOptions opts_;
  std::string time_field_;
  bool validates_utf8_itself_ = false;  // set by JSON line readers
  std::unique_ptr<LineReader> lines_;
  std::vector<std::string> header_owned_;

 private:
  absl::Status Stop(absl::Status st) {
    final_status_ = std::move(st);
    return final_status_;
  }

  RowError row_error_;
  absl::Status final_status_;
  bool done_ = false;
  bool have_prev_ = false;
  int64_t prev_abs_ns_ = 0;
  int64_t first_abs_ns_ = 0;
};

// The error for more prefix hashes than MaxPrefixHashes allows: `field`
// names the hash list as the format does ("column prefix_hashes"),
// `input_name` / `output_name` the prompt length and hashed-answer fields.
inline std::string HashCountMessage(std::string_view field, int64_t num_hashes,
                                    std::string_view input_name, int64_t input_tokens,
                                    std::string_view output_name,
                                    int64_t hashed_output_tokens, int64_t block) {
  const int64_t max = MaxPrefixHashes(input_tokens, hashed_output_tokens, block);
  // (absl::StrCat takes absl::string_view, not std::string_view, here.)
  const std::string field_s(field), in(input_name), out(output_name);
  if (hashed_output_tokens == 0) {
    return absl::StrCat(field_s, ": has ", num_hashes, " hashes but ", in, " ",
                        input_tokens, " allows at most ", max, " (ceil(", in, " / ",
                        block, "))");
  }
  return absl::StrCat(field_s, ": has ", num_hashes, " hashes but ", in, " ",
                      input_tokens, " + ", out, " ", hashed_output_tokens,
                      " allows at most ", max, " (ceil((", in, " + ", out, ") / ", block,
                      "))");
}

// Index of the header cell named one of `names`, or -1.
inline int FindColumn(const std::vector<std::string_view>& header,
                      std::initializer_list<std::string_view> names) {
  for (std::string_view name : names) {
    for (size_t i = 0; i < header.size(); ++i) {
      if (header[i] == name) return static_cast<int>(i);
    }
  }
  return -1;
}

inline std::string JoinHeader(const std::vector<std::string_view>& header) {
  std::string out;
  for (size_t i = 0; i < header.size(); ++i) {
    if (i) out += ',';
    out.append(header[i].data(), header[i].size());
  }
  return out;
}

// A CSV reader with columns found by name in the header.
class CsvTraceReader : public LineTraceReader {
 protected:
  using LineTraceReader::LineTraceReader;

  absl::Status ReadCsvHeader() {
    RETURN_IF_ERROR(OpenLines());
    RETURN_IF_ERROR(ReadHeader(header_, header_line_));
    // A column named twice was read from its first copy, silently.
    for (size_t i = 0; i < header_.size(); ++i) {
      for (size_t j = i + 1; j < header_.size(); ++j) {
        if (header_[i] == header_[j] && !header_[i].empty()) {
          return absl::InvalidArgumentError(absl::StrCat(
              opts_.path, ":1: column ", std::string(header_[i]),
              " appears twice (columns ", i + 1, " and ", j + 1, "); keep one"));
        }
      }
    }
    return absl::OkStatus();
  }

  // The one column of `names` (aliases of one field) in the header, or -1;
  // an error when two of them are there (which one counts would be a guess).
  absl::StatusOr<int> FindOneColumn(std::initializer_list<std::string_view> names) const {
    int found = -1;
    for (std::string_view name : names) {
      const int i = FindColumn(header_, {name});
      if (i < 0) continue;
      if (found >= 0) {
        return absl::InvalidArgumentError(
            absl::StrCat(opts_.path, ":1: columns ", std::string(header_[found]), " and ",
                         std::string(name), " both give the same field; keep one"));
      }
      found = i;
    }
    return found;
  }

  absl::Status MissingColumn(std::string_view what) const {
    return absl::InvalidArgumentError(
        absl::StrCat(opts_.path, ":1: header has no ", std::string(what),
                     " column (header: ", JoinHeader(header_), ")"));
  }

  // Splits `line` and checks the cell count against the header.
  bool SplitRow(std::string_view line) {
    if (!SplitCsvLine(line, cells_, scratch_)) {
      return Fail(SkipReason::kMalformed, "unterminated or misplaced quote in CSV row");
    }
    if (cells_.size() != header_.size()) {
      return Fail(SkipReason::kColumnCount,
                  absl::StrCat("expected ", header_.size(), " columns (",
                               JoinHeader(header_), "), found ", cells_.size()));
    }
    return true;
  }

  std::vector<std::string_view> header_;
  std::string header_line_;
  std::vector<std::string_view> cells_;
  std::vector<std::string> scratch_;
};

// ---------------------------------------------------------------- JSONL

class JsonlTraceReader : public LineTraceReader {
 protected:
  JsonlTraceReader(TraceFormat format, ReaderOptions opts, std::string time_field)
      : LineTraceReader(format, std::move(opts), std::move(time_field)) {
    validates_utf8_itself_ = true;
  }

  // Parses the line; on failure reports the JSON error (a cut line says
  // "truncated").
  bool ParseJsonLine(std::string_view line) {
    // A UTF-8 byte-order mark opens the file's first line only (as the CSV
    // readers and format detection take it).
    if (!bom_checked_) {
      bom_checked_ = true;
      if (line.starts_with("\xEF\xBB\xBF")) line.remove_prefix(3);
    }
    absl::Status st = parser_.Parse(line);
    if (!st.ok()) return Fail(SkipReason::kMalformed, std::string(st.message()));
    return true;
  }

  const FlatJsonField* Required(std::string_view key, FlatJsonField::Kind kind) {
    const FlatJsonField* f = parser_.Find(key);
    if (f == nullptr) {
      Fail(SkipReason::kMalformed, absl::StrCat("field ", std::string(key), ": missing"));
      return nullptr;
    }
    if (f->kind != kind) {
      Fail(SkipReason::kMalformed,
           absl::StrCat("field ", std::string(key), ": expected ",
                        kind == FlatJsonField::Kind::kNumberArray ? "an array of integers"
                        : kind == FlatJsonField::Kind::kString    ? "a string"
                                                                  : "a number"));
      return nullptr;
    }
    return f;
  }

  bool Length(std::string_view key, int64_t min, int32_t* out) {
    const FlatJsonField* f = Required(key, FlatJsonField::Kind::kNumber);
    return f != nullptr && ParseLength("field", key, f->raw, min, out);
  }

  bool Time(std::string_view key, int64_t unit_ns, const char* unit, int64_t* abs_ns) {
    const FlatJsonField* f = Required(key, FlatJsonField::Kind::kNumber);
    if (f == nullptr) return false;
    if (!ParseDecimalToNs(f->raw, unit_ns, abs_ns)) {
      return Fail(SkipReason::kMalformed,
                  absl::StrCat("field ", std::string(key), ": ", Clip(f->raw),
                               " is not a non-negative time in ", unit, " (allowed 0..",
                               kMaxTraceArrivalNs / unit_ns, " ", unit, ")"));
    }
    return true;
  }

  // Chains the block ids of `hash_ids` into out.prefix_hashes.
  bool Hashes(const FlatJsonField& f, RequestSpec& out) {
    uint64_t parent = kPrefixHashRoot;
    out.prefix_hashes.reserve(f.array_end - f.array_begin);
    for (uint32_t i = f.array_begin; i < f.array_end; ++i) {
      const FlatJsonNumber& num = parser_.numbers()[i];
      if (!num.is_uint) {
        return Fail(
            SkipReason::kMalformed,
            absl::StrCat("field ", std::string(f.key), "[", i - f.array_begin,
                         "]: ", Clip(num.raw), " is not an unsigned 64-bit integer"));
      }
      const uint64_t id = num.value;
      parent = ChainHash(parent, id);
      out.prefix_hashes.push_back(parent);
    }
    return true;
  }

  bool bom_checked_ = false;
  FlatJsonParser parser_;
};

}  // namespace servesim::trace_internal

#endif  // SERVESIM_TRACES_READERS_READERS_H_
