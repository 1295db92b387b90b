#include "traces/trace_reader.h"

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
#include "google/protobuf/io/zero_copy_stream_impl.h"
#include "google/protobuf/util/delimited_message_util.h"
#include "proto/trace.pb.h"
#include "sim/status_macros.h"
#include "traces/bench_result.h"
#include "traces/file_util.h"
#include "traces/json.h"
#include "traces/parse_util.h"
#include "traces/prefix_hash.h"

namespace servesim {

const char* SkipReasonName(SkipReason reason) {
  switch (reason) {
    case SkipReason::kMalformed:
      return "malformed";
    case SkipReason::kColumnCount:
      return "column_count";
    case SkipReason::kTimeBackwards:
      return "time_backwards";
    case SkipReason::kNegativeLength:
      return "negative_length";
    case SkipReason::kZeroLength:
      return "zero_length";
    case SkipReason::kAbsurdLength:
      return "absurd_length";
    case SkipReason::kHashCount:
      return "hash_count";
    case SkipReason::kInvalidUtf8:
      return "invalid_utf8";
    case SkipReason::kTruncated:
      return "truncated";
    case SkipReason::kFailedRequest:
      return "failed_request";
    case SkipReason::kModelFilter:
      return "model_filter";
  }
  return "unknown";
}

int64_t ReaderStats::total_skipped() const {
  int64_t n = 0;
  for (int64_t c : skipped) n += c;
  return n;
}

std::string ReaderStats::SkippedSummary() const {
  std::string out;
  for (int i = 0; i < kNumSkipReasons; ++i) {
    if (skipped[i] == 0) continue;
    if (!out.empty()) out += ' ';
    absl::StrAppend(&out, SkipReasonName(static_cast<SkipReason>(i)), "=", skipped[i]);
  }
  return out.empty() ? "none" : out;
}

const char* TraceFormatName(TraceFormat format) {
  switch (format) {
    case TraceFormat::kAzure:
      return "azure";
    case TraceFormat::kMooncake:
      return "mooncake";
    case TraceFormat::kBurstGpt:
      return "burstgpt";
    case TraceFormat::kBailian:
      return "bailian";
    case TraceFormat::kVllmBench:
      return "vllm-bench";
    case TraceFormat::kLengths:
      return "lengths";
    case TraceFormat::kBinary:
      return "binary";
  }
  return "unknown";
}

absl::StatusOr<TraceFormat> ParseTraceFormat(std::string_view name) {
  for (TraceFormat f :
       {TraceFormat::kAzure, TraceFormat::kMooncake, TraceFormat::kBurstGpt,
        TraceFormat::kBailian, TraceFormat::kVllmBench, TraceFormat::kLengths,
        TraceFormat::kBinary}) {
    if (name == TraceFormatName(f)) return f;
  }
  if (name == "csv") return TraceFormat::kLengths;
  if (name == "bench") return TraceFormat::kVllmBench;
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown trace format \"", std::string(name),
      "\" (allowed: azure, mooncake, burstgpt, bailian, vllm-bench, lengths, binary)"));
}

namespace {

constexpr char kBinaryMagic[] = "servesim-trace";

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

  static std::string Clip(std::string_view s) {
    return s.size() <= 40 ? std::string(s)
                          : absl::StrCat(std::string(s.substr(0, 40)), "...");
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

// Index of the header cell named one of `names`, or -1.
int FindColumn(const std::vector<std::string_view>& header,
               std::initializer_list<std::string_view> names) {
  for (std::string_view name : names) {
    for (size_t i = 0; i < header.size(); ++i) {
      if (header[i] == name) return static_cast<int>(i);
    }
  }
  return -1;
}

std::string JoinHeader(const std::vector<std::string_view>& header) {
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
    return absl::OkStatus();
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

// ---------------------------------------------------------------- Azure

class AzureReader : public CsvTraceReader {
 public:
  static absl::StatusOr<std::unique_ptr<TraceReader>> Open(const ReaderOptions& opts) {
    std::unique_ptr<AzureReader> r(new AzureReader(opts));
    RETURN_IF_ERROR(r->ReadCsvHeader());
    r->ts_ = FindColumn(r->header_, {"TIMESTAMP", "Timestamp", "timestamp"});
    r->in_ = FindColumn(r->header_, {"ContextTokens"});
    r->out_ = FindColumn(r->header_, {"GeneratedTokens"});
    if (r->ts_ < 0) return r->MissingColumn("TIMESTAMP");
    if (r->in_ < 0) return r->MissingColumn("ContextTokens");
    if (r->out_ < 0) return r->MissingColumn("GeneratedTokens");
    return std::unique_ptr<TraceReader>(std::move(r));
  }

 private:
  explicit AzureReader(const ReaderOptions& opts)
      : CsvTraceReader(TraceFormat::kAzure, opts, "TIMESTAMP") {}

  bool ParseRow(std::string_view line, RequestSpec& out, int64_t* abs_ns) override {
    if (!SplitRow(line)) return false;
    const std::string_view ts = TrimSpaces(cells_[ts_]);
    if (!ParseTimestampToNs(ts, abs_ns)) {
      return Fail(
          SkipReason::kMalformed,
          absl::StrCat("column TIMESTAMP: \"", Clip(ts),
                       "\" is not a timestamp (allowed: YYYY-MM-DD HH:MM:SS[.fraction]"
                       "[+HH:MM])"));
    }
    return ParseLength("column", "ContextTokens", cells_[in_], 1, &out.input_tokens) &&
           ParseLength("column", "GeneratedTokens", cells_[out_], 1, &out.output_tokens);
  }

  int ts_ = -1, in_ = -1, out_ = -1;
};

// ---------------------------------------------------------------- BurstGPT

class BurstGptReader : public CsvTraceReader {
 public:
  static absl::StatusOr<std::unique_ptr<TraceReader>> Open(const ReaderOptions& opts) {
    std::unique_ptr<BurstGptReader> r(new BurstGptReader(opts));
    RETURN_IF_ERROR(r->ReadCsvHeader());
    r->ts_ = FindColumn(r->header_, {"Timestamp"});
    r->model_ = FindColumn(r->header_, {"Model"});
    r->in_ = FindColumn(r->header_, {"Request tokens"});
    r->out_ = FindColumn(r->header_, {"Response tokens"});
    r->session_ = FindColumn(r->header_, {"Session ID"});
    if (r->ts_ < 0) return r->MissingColumn("Timestamp");
    if (r->in_ < 0) return r->MissingColumn("Request tokens");
    if (r->out_ < 0) return r->MissingColumn("Response tokens");
    if (!opts.model_filter.empty() && r->model_ < 0) return r->MissingColumn("Model");
    return std::unique_ptr<TraceReader>(std::move(r));
  }

  std::string Describe() const override {
    std::string d = LineTraceReader::Describe();
    if (!opts_.model_filter.empty()) absl::StrAppend(&d, " model=", opts_.model_filter);
    return d;
  }

 private:
  explicit BurstGptReader(const ReaderOptions& opts)
      : CsvTraceReader(TraceFormat::kBurstGpt, opts, "Timestamp") {}

  bool ParseRow(std::string_view line, RequestSpec& out, int64_t* abs_ns) override {
    if (!SplitRow(line)) return false;
    if (!opts_.model_filter.empty() && TrimSpaces(cells_[model_]) != opts_.model_filter) {
      return Filter(SkipReason::kModelFilter);
    }
    const std::string_view ts = TrimSpaces(cells_[ts_]);
    if (!ParseDecimalToNs(ts, kNsPerSec, abs_ns)) {
      return Fail(SkipReason::kMalformed,
                  absl::StrCat("column Timestamp: \"", Clip(ts),
                               "\" is not a non-negative number of seconds"));
    }
    if (opts_.skip_failed_requests && TrimSpaces(cells_[out_]) == "0") {
      return Filter(SkipReason::kFailedRequest);
    }
    if (!ParseLength("column", "Request tokens", cells_[in_], 1, &out.input_tokens) ||
        !ParseLength("column", "Response tokens", cells_[out_], 1, &out.output_tokens)) {
      return false;
    }
    if (session_ >= 0) {
      const std::string_view s = TrimSpaces(cells_[session_]);
      int64_t id = 0;
      if (s.empty()) {
        out.session_id = -1;
      } else if (ParseInt64(s, &id) && id >= 0) {
        out.session_id = id;
      } else {
        // Non-numeric session ids: a stable 63-bit hash of the text.
        uint64_t h = 1469598103934665603ULL;
        for (char c : s) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ULL;
        out.session_id = static_cast<int64_t>(h >> 1);
      }
    }
    return true;
  }

  int ts_ = -1, model_ = -1, in_ = -1, out_ = -1, session_ = -1;
};

// ---------------------------------------------------------------- lengths

// A table of lengths (ShareGPT stats, servesim's own CSV): input and output
// columns by name, optional arrival, session and prefix-hash columns.
class LengthsReader : public CsvTraceReader {
 public:
  static absl::StatusOr<std::unique_ptr<TraceReader>> Open(const ReaderOptions& opts) {
    std::unique_ptr<LengthsReader> r(new LengthsReader(opts));
    RETURN_IF_ERROR(r->ReadCsvHeader());
    const auto& h = r->header_;
    r->in_ =
        FindColumn(h, {"input_tokens", "num_prefill_tokens", "input_length", "input_len",
                       "prompt_len", "prompt_tokens", "ContextTokens", "Request tokens"});
    r->out_ = FindColumn(
        h, {"output_tokens", "num_decode_tokens", "output_length", "output_len",
            "completion_tokens", "GeneratedTokens", "Response tokens"});
    r->arrival_ns_ = FindColumn(h, {"arrival_ns"});
    r->arrival_s_ = FindColumn(h, {"arrival_s", "timestamp_s"});
    r->session_ = FindColumn(h, {"session_id"});
    r->block_ = FindColumn(h, {"hash_block_tokens"});
    r->hashes_ = FindColumn(h, {"prefix_hashes"});
    if (r->in_ < 0)
      return r->MissingColumn("input length (input_tokens, num_prefill_tokens, ...)");
    if (r->out_ < 0) {
      return r->MissingColumn("output length (output_tokens, num_decode_tokens, ...)");
    }
    if (r->arrival_ns_ >= 0) r->time_field_ = "arrival_ns";
    if (r->arrival_s_ >= 0) r->time_field_ = std::string(h[r->arrival_s_]);
    return std::unique_ptr<TraceReader>(std::move(r));
  }

  bool HasArrivalTimes() const override { return arrival_ns_ >= 0 || arrival_s_ >= 0; }

 private:
  explicit LengthsReader(const ReaderOptions& opts)
      : CsvTraceReader(TraceFormat::kLengths, opts, "arrival") {}

  bool ParseRow(std::string_view line, RequestSpec& out, int64_t* abs_ns) override {
    if (!SplitRow(line)) return false;
    *abs_ns = 0;
    if (arrival_ns_ >= 0) {
      const std::string_view a = TrimSpaces(cells_[arrival_ns_]);
      if (!ParseInt64(a, abs_ns) || *abs_ns < 0) {
        return Fail(SkipReason::kMalformed,
                    absl::StrCat("column arrival_ns: \"", Clip(a),
                                 "\" is not a non-negative integer"));
      }
    } else if (arrival_s_ >= 0) {
      const std::string_view a = TrimSpaces(cells_[arrival_s_]);
      if (!ParseDecimalToNs(a, kNsPerSec, abs_ns)) {
        return Fail(SkipReason::kMalformed,
                    absl::StrCat("column ", time_field_, ": \"", Clip(a),
                                 "\" is not a non-negative number"));
      }
    }
    if (!ParseLength("column", header_[in_], cells_[in_], 1, &out.input_tokens) ||
        !ParseLength("column", header_[out_], cells_[out_], 1, &out.output_tokens)) {
      return false;
    }
    if (session_ >= 0) {
      const std::string_view s = TrimSpaces(cells_[session_]);
      if (!ParseInt64(s, &out.session_id) || out.session_id < -1) {
        return Fail(SkipReason::kMalformed, absl::StrCat("column session_id: \"", Clip(s),
                                                         "\" is not an integer >= -1"));
      }
    }
    if (hashes_ >= 0) {
      std::string_view rest = TrimSpaces(cells_[hashes_]);
      while (!rest.empty()) {
        const size_t sp = rest.find(' ');
        const std::string_view tok = rest.substr(0, sp);
        uint64_t h = 0;
        if (!ParseUint64(tok, &h)) {
          return Fail(SkipReason::kMalformed,
                      absl::StrCat("column prefix_hashes: \"", Clip(tok),
                                   "\" is not an unsigned 64-bit integer"));
        }
        out.prefix_hashes.push_back(h);
        rest = sp == rest.npos ? std::string_view() : TrimSpaces(rest.substr(sp + 1));
      }
      int64_t block = opts_.hash_block_tokens;
      if (block_ >= 0 && !TrimSpaces(cells_[block_]).empty()) {
        const std::string_view b = TrimSpaces(cells_[block_]);
        if (!ParseInt64(b, &block) || block < 1 || block > 1'000'000) {
          return Fail(SkipReason::kMalformed,
                      absl::StrCat("column hash_block_tokens: \"", Clip(b),
                                   "\" is outside 1..1000000"));
        }
      }
      if (!out.prefix_hashes.empty()) {
        if (block <= 0) {
          return Fail(SkipReason::kMalformed,
                      "column prefix_hashes: hashes given but no hash_block_tokens");
        }
        out.hash_block_tokens = static_cast<int32_t>(block);
      }
    }
    return true;
  }

  int in_ = -1, out_ = -1, arrival_ns_ = -1, arrival_s_ = -1, session_ = -1, block_ = -1,
      hashes_ = -1;
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
      return Fail(
          SkipReason::kMalformed,
          absl::StrCat("field ", std::string(key), ": ", Clip(f->raw),
                       " is not a non-negative time in ", unit, " (allowed 0..",
                       std::numeric_limits<int64_t>::max() / unit_ns, " ", unit, ")"));
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

  FlatJsonParser parser_;
};

class MooncakeReader : public JsonlTraceReader {
 public:
  static absl::StatusOr<std::unique_ptr<TraceReader>> Open(const ReaderOptions& opts) {
    std::unique_ptr<MooncakeReader> r(new MooncakeReader(opts));
    if (r->opts_.hash_block_tokens <= 0) r->opts_.hash_block_tokens = 512;
    RETURN_IF_ERROR(r->OpenLines());
    return std::unique_ptr<TraceReader>(std::move(r));
  }

 private:
  explicit MooncakeReader(const ReaderOptions& opts)
      : JsonlTraceReader(TraceFormat::kMooncake, opts, "timestamp") {}

  bool ParseRow(std::string_view line, RequestSpec& out, int64_t* abs_ns) override {
    if (!ParseJsonLine(line)) return false;
    if (!Time("timestamp", kNsPerMs, "ms", abs_ns) ||
        !Length("input_length", 1, &out.input_tokens) ||
        !Length("output_length", 1, &out.output_tokens)) {
      return false;
    }
    // servesim's own JSONL adds session_id and hash_block_tokens, and may
    // hash only a prefix of the prompt.
    int64_t block = opts_.hash_block_tokens;
    bool own_format = false;
    if (const FlatJsonField* b = parser_.Find("hash_block_tokens"); b != nullptr) {
      own_format = true;
      if (b->kind != FlatJsonField::Kind::kNumber || !ParseInt64(b->raw, &block) ||
          block < 1 || block > 1'000'000) {
        return Fail(SkipReason::kMalformed,
                    "field hash_block_tokens: expected an integer in 1..1000000");
      }
    }
    if (const FlatJsonField* s = parser_.Find("session_id"); s != nullptr) {
      if (s->kind != FlatJsonField::Kind::kNumber ||
          !ParseInt64(s->raw, &out.session_id) || out.session_id < -1) {
        return Fail(SkipReason::kMalformed,
                    "field session_id: expected an integer >= -1");
      }
    }
    const FlatJsonField* h = parser_.Find("hash_ids");
    if (h == nullptr) return true;
    if (h->kind != FlatJsonField::Kind::kNumberArray) {
      return Fail(SkipReason::kMalformed,
                  "field hash_ids: expected an array of integers");
    }
    const int64_t n = h->array_end - h->array_begin;
    const int64_t want = (out.input_tokens + block - 1) / block;
    if (own_format ? n > want : n != want) {
      return Fail(SkipReason::kHashCount,
                  absl::StrCat("field hash_ids: has ", n, " entries but input_length ",
                               out.input_tokens, " needs ", own_format ? "at most " : "",
                               want, " (ceil(input_length / ", block, "))"));
    }
    if (!Hashes(*h, out)) return false;
    if (n > 0) out.hash_block_tokens = static_cast<int32_t>(block);
    return true;
  }
};

class BailianReader : public JsonlTraceReader {
 public:
  static absl::StatusOr<std::unique_ptr<TraceReader>> Open(const ReaderOptions& opts) {
    std::unique_ptr<BailianReader> r(new BailianReader(opts));
    if (r->opts_.hash_block_tokens <= 0) r->opts_.hash_block_tokens = 16;
    RETURN_IF_ERROR(r->OpenLines());
    return std::unique_ptr<TraceReader>(std::move(r));
  }

 private:
  // Chat ids remembered to find a turn's session (its root chat): bounds
  // memory on week-long traces; a parent older than this many chats
  // starts a new session named after the parent.
  static constexpr size_t kMaxRememberedChats = 1 << 20;

  explicit BailianReader(const ReaderOptions& opts)
      : JsonlTraceReader(TraceFormat::kBailian, opts, "timestamp") {}

  bool ParseRow(std::string_view line, RequestSpec& out, int64_t* abs_ns) override {
    if (!ParseJsonLine(line)) return false;
    const FlatJsonField* chat = Required("chat_id", FlatJsonField::Kind::kNumber);
    if (chat == nullptr) return false;
    const FlatJsonField* parent =
        Required("parent_chat_id", FlatJsonField::Kind::kNumber);
    if (parent == nullptr) return false;
    int64_t chat_id = 0, parent_id = 0;
    if (!ParseInt64(chat->raw, &chat_id) || chat_id < 0) {
      return Fail(SkipReason::kMalformed, "field chat_id: expected an integer >= 0");
    }
    if (!ParseInt64(parent->raw, &parent_id) || parent_id < -1) {
      return Fail(SkipReason::kMalformed,
                  "field parent_chat_id: expected an integer >= -1");
    }
    if (!Time("timestamp", kNsPerSec, "s", abs_ns) ||
        !Length("input_length", 1, &out.input_tokens) ||
        !Length("output_length", 1, &out.output_tokens)) {
      return false;
    }
    if (const FlatJsonField* h = parser_.Find("hash_ids"); h != nullptr) {
      if (h->kind != FlatJsonField::Kind::kNumberArray) {
        return Fail(SkipReason::kMalformed,
                    "field hash_ids: expected an array of integers");
      }
      const int64_t block = opts_.hash_block_tokens;
      const int64_t n = h->array_end - h->array_begin;
      const int64_t max_blocks = (out.input_tokens + block - 1) / block;
      if (n > max_blocks) {
        return Fail(SkipReason::kHashCount,
                    absl::StrCat("field hash_ids: has ", n, " entries but input_length ",
                                 out.input_tokens, " allows at most ", max_blocks,
                                 " (ceil(input_length / ", block, "))"));
      }
      if (!Hashes(*h, out)) return false;
      if (n > 0) out.hash_block_tokens = static_cast<int32_t>(block);
    }
    int64_t session = chat_id;
    if (parent_id >= 0) {
      auto it = session_of_chat_.find(parent_id);
      session = it != session_of_chat_.end() ? it->second : parent_id;
    }
    out.session_id = session;
    if (session_of_chat_.emplace(chat_id, session).second) {
      order_.push_back(chat_id);
      if (order_.size() > kMaxRememberedChats) {
        session_of_chat_.erase(order_.front());
        order_.pop_front();
      }
    }
    return true;
  }

  std::unordered_map<int64_t, int64_t> session_of_chat_;  // lookups only
  std::deque<int64_t> order_;
};

// ---------------------------------------------------------------- vllm bench

class VllmBenchReader : public TraceReader {
 public:
  static absl::StatusOr<std::unique_ptr<TraceReader>> Open(const ReaderOptions& opts) {
    std::unique_ptr<VllmBenchReader> r(new VllmBenchReader());
    r->opts_ = opts;
    ASSIGN_OR_RETURN(r->bench_, ReadBenchResult(opts.path));
    if (!r->bench_.input_lens || !r->bench_.output_lens) {
      return absl::InvalidArgumentError(absl::StrCat(
          opts.path,
          ": no per-request arrays input_lens/output_lens (save the result with "
          "per-request details to replay it)"));
    }
    if (r->bench_.input_lens->empty()) {
      return absl::InvalidArgumentError(absl::StrCat(opts.path, ": input_lens is empty"));
    }
    return std::unique_ptr<TraceReader>(std::move(r));
  }

  bool HasArrivalTimes() const override { return bench_.start_times.has_value(); }

  absl::StatusOr<bool> Next(RequestSpec& out) override {
    if (!final_status_.ok()) return final_status_;
    const auto& in = *bench_.input_lens;
    while (index_ < in.size()) {
      const size_t i = index_++;
      ++stats_.rows;
      out = RequestSpec();
      // A request with an error, or one that produced no tokens (old
      // clients record those as success with output 0 and ttft 0).
      const bool failed = (bench_.errors && !(*bench_.errors)[i].empty()) ||
                          (*bench_.output_lens)[i] == 0;
      if (failed && opts_.skip_failed_requests) {
        ++stats_.skipped[static_cast<int>(SkipReason::kFailedRequest)];
        continue;
      }
      SkipReason reason;
      std::string msg;
      if (!Length("input_lens", i, in[i], &out.input_tokens, &reason, &msg) ||
          !Length("output_lens", i, (*bench_.output_lens)[i], &out.output_tokens, &reason,
                  &msg)) {
        ++stats_.skipped[static_cast<int>(reason)];
        if (opts_.skip_bad_rows) continue;
        final_status_ = absl::InvalidArgumentError(absl::StrCat(opts_.path, ": ", msg));
        return final_status_;
      }
      if (bench_.start_times) {
        const double t = (*bench_.start_times)[i];
        if (!std::isfinite(t)) {
          ++stats_.skipped[static_cast<int>(SkipReason::kMalformed)];
          if (opts_.skip_bad_rows) continue;
          final_status_ = absl::InvalidArgumentError(absl::StrCat(
              opts_.path, ": key start_times[", i, "]: not a finite number"));
          return final_status_;
        }
        if (!have_first_) {
          first_s_ = t;
          have_first_ = true;
        }
        const double rel_ns = (t - first_s_) * 1e9;
        if (rel_ns > static_cast<double>(kMaxTraceArrivalNs)) {
          ++stats_.skipped[static_cast<int>(SkipReason::kMalformed)];
          if (opts_.skip_bad_rows) continue;
          final_status_ = absl::InvalidArgumentError(absl::StrCat(
              opts_.path, ": key start_times[", i, "]: ", t - first_s_,
              " s after the first request (allowed at most ",
              static_cast<double>(kMaxTraceArrivalNs) / 1e9, " s, 2^62 ns)"));
          return final_status_;
        }
        const int64_t ns = std::llround(rel_ns);
        if (ns < prev_ns_) {
          ++stats_.skipped[static_cast<int>(SkipReason::kTimeBackwards)];
          if (opts_.skip_bad_rows) continue;
          final_status_ = absl::InvalidArgumentError(absl::StrCat(
              opts_.path, ": key start_times[", i,
              "]: earlier than the previous request's (must be nondecreasing)"));
          return final_status_;
        }
        prev_ns_ = ns;
        out.arrival_ns = ns;
      }
      out.id = stats_.requests++;
      return true;
    }
    return false;
  }

  std::string Describe() const override {
    return absl::StrCat(
        "vllm-bench result ", opts_.path, " (requests ", stats_.requests,
        ", skipped: ", stats_.SkippedSummary(),
        bench_.start_times ? ", start_times replayed" : ", no start_times", ")");
  }

 private:
  bool Length(const char* key, size_t i, double v, int32_t* out, SkipReason* reason,
              std::string* msg) const {
    const int64_t min = 1;
    if (!std::isfinite(v) || v != std::floor(v)) {
      *reason = SkipReason::kMalformed;
      *msg =
          absl::StrCat("key ", key, "[", i, "]: ", v, " is not an integer token count");
      return false;
    }
    if (v < 0) {
      *reason = SkipReason::kNegativeLength;
    } else if (v < min) {
      *reason = SkipReason::kZeroLength;
    } else if (v > static_cast<double>(opts_.max_tokens)) {
      *reason = SkipReason::kAbsurdLength;
    } else {
      *out = static_cast<int32_t>(v);
      return true;
    }
    *msg = absl::StrCat("key ", key, "[", i, "]: ", v, " is outside ", min, "..",
                        opts_.max_tokens);
    return false;
  }

  ReaderOptions opts_;
  BenchResult bench_;
  size_t index_ = 0;
  bool have_first_ = false;
  double first_s_ = 0;
  int64_t prev_ns_ = 0;
  absl::Status final_status_;
};

// ---------------------------------------------------------------- binary

class BinaryReader : public TraceReader {
 public:
  static absl::StatusOr<std::unique_ptr<TraceReader>> Open(const ReaderOptions& opts) {
    RETURN_IF_ERROR(CheckNotDirectory(opts.path));
    std::unique_ptr<BinaryReader> r(new BinaryReader());
    r->opts_ = opts;
    r->fd_ = ::open(opts.path.c_str(), O_RDONLY);
    if (r->fd_ < 0) {
      return absl::NotFoundError(
          absl::StrCat(opts.path, ": cannot open: ", std::strerror(errno)));
    }
    r->stream_ = std::make_unique<google::protobuf::io::FileInputStream>(r->fd_, 1 << 18);
    bool clean_eof = false;
    proto::TraceHeader header;
    if (!google::protobuf::util::ParseDelimitedFromZeroCopyStream(
            &header, r->stream_.get(), &clean_eof)) {
      return absl::InvalidArgumentError(absl::StrCat(
          opts.path, ": record 0 (header): ",
          clean_eof ? "empty file"
                    : "not a servesim binary trace header (truncated or corrupt)"));
    }
    if (header.magic() != kBinaryMagic) {
      return absl::InvalidArgumentError(
          absl::StrCat(opts.path, ": record 0 (header): magic \"",
                       header.magic().substr(0, 40), "\" is not \"", kBinaryMagic, "\""));
    }
    if (header.version() != 1) {
      return absl::InvalidArgumentError(absl::StrCat(opts.path, ": header: version ",
                                                     header.version(), " (allowed: 1)"));
    }
    if (header.hash_block_tokens() < 0 || header.hash_block_tokens() > 1'000'000) {
      return absl::InvalidArgumentError(
          absl::StrCat(opts.path, ": header: hash_block_tokens ",
                       header.hash_block_tokens(), " is outside 0..1000000"));
    }
    r->block_ = header.hash_block_tokens();
    // Writers pad the source line with spaces (room to rewrite it).
    r->source_ = std::string(absl::StripTrailingAsciiWhitespace(header.source()));
    return std::unique_ptr<TraceReader>(std::move(r));
  }

  ~BinaryReader() override {
    stream_.reset();
    if (fd_ >= 0) ::close(fd_);
  }

  absl::StatusOr<bool> Next(RequestSpec& out) override {
    if (!final_status_.ok()) return final_status_;
    if (done_) return false;
    while (true) {
      bool clean_eof = false;
      const int64_t record = stats_.rows + 1;
      rec_.Clear();  // the delimited parser merges into the message
      if (!google::protobuf::util::ParseDelimitedFromZeroCopyStream(&rec_, stream_.get(),
                                                                    &clean_eof)) {
        if (clean_eof) {
          if (stats_.rows == 0)
            return Stop(record, "no request records after the header");
          done_ = true;
          return false;
        }
        ++stats_.skipped[static_cast<int>(SkipReason::kTruncated)];
        return Stop(record, "truncated or corrupt record");
      }
      ++stats_.rows;
      std::string msg;
      SkipReason reason = SkipReason::kMalformed;
      if (rec_.arrival_delta_ns() < 0) {
        reason = SkipReason::kTimeBackwards;
        msg = absl::StrCat("field arrival_delta_ns: ", rec_.arrival_delta_ns(),
                           " is negative (arrivals must be nondecreasing)");
      } else if (!CheckLen("input_tokens", rec_.input_tokens(), &reason, &msg) ||
                 !CheckLen("output_tokens", rec_.output_tokens(), &reason, &msg)) {
      } else if (rec_.hash_block_tokens() < 0 || rec_.hash_block_tokens() > 1'000'000) {
        msg = "field hash_block_tokens: outside 0..1000000";
      } else if (rec_.prefix_hashes_size() > 0 && rec_.hash_block_tokens() == 0 &&
                 block_ == 0) {
        msg =
            "field prefix_hashes: hashes given but no hash_block_tokens (record or "
            "header)";
      } else if (rec_.session_plus_one() < 0) {
        msg = "field session_plus_one: negative";
      } else if (rec_.arrival_delta_ns() > kMaxTraceArrivalNs - now_ns_) {
        msg = absl::StrCat("field arrival_delta_ns: ", rec_.arrival_delta_ns(),
                           " ns puts the arrival past ", kMaxTraceArrivalNs,
                           " ns (2^62, ~146 years; allowed 0..",
                           kMaxTraceArrivalNs - now_ns_, " here)");
      }
      if (!msg.empty()) {
        ++stats_.skipped[static_cast<int>(reason)];
        if (opts_.skip_bad_rows) continue;
        return Stop(record, msg);
      }
      now_ns_ += rec_.arrival_delta_ns();
      out.id = stats_.requests++;
      out.arrival_ns = now_ns_;
      out.input_tokens = rec_.input_tokens();
      out.output_tokens = rec_.output_tokens();
      out.prefix_hashes.assign(rec_.prefix_hashes().begin(), rec_.prefix_hashes().end());
      out.hash_block_tokens = out.prefix_hashes.empty()       ? 0
                              : rec_.hash_block_tokens() != 0 ? rec_.hash_block_tokens()
                                                              : block_;
      out.session_id = rec_.session_plus_one() - 1;
      return true;
    }
  }

  std::string Describe() const override {
    return absl::StrCat("binary trace ", opts_.path, " (requests ", stats_.requests,
                        ", skipped: ", stats_.SkippedSummary(),
                        source_.empty() ? "" : "; from: ", source_, ")");
  }

 private:
  bool CheckLen(const char* field, int64_t v, SkipReason* reason,
                std::string* msg) const {
    if (v >= 1 && v <= opts_.max_tokens) return true;
    *reason = v < 0    ? SkipReason::kNegativeLength
              : v == 0 ? SkipReason::kZeroLength
                       : SkipReason::kAbsurdLength;
    *msg = absl::StrCat("field ", field, ": ", v, " is outside 1..", opts_.max_tokens);
    return false;
  }

  absl::Status Stop(int64_t record, std::string_view msg) {
    final_status_ = absl::InvalidArgumentError(
        absl::StrCat(opts_.path, ": record ", record, ": ", std::string(msg)));
    return final_status_;
  }

  ReaderOptions opts_;
  int fd_ = -1;
  std::unique_ptr<google::protobuf::io::FileInputStream> stream_;
  proto::RequestRecord rec_;
  int32_t block_ = 0;
  std::string source_;
  int64_t now_ns_ = 0;
  bool done_ = false;
  absl::Status final_status_;
};

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

}  // namespace

absl::StatusOr<std::unique_ptr<TraceReader>> OpenTraceReader(TraceFormat format,
                                                             const ReaderOptions& opts) {
  if (opts.max_tokens < 1 || opts.max_tokens > std::numeric_limits<int32_t>::max()) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_tokens ", opts.max_tokens, " is outside 1..2147483647"));
  }
  if (opts.hash_block_tokens < 0 || opts.hash_block_tokens > 1'000'000) {
    return absl::InvalidArgumentError(
        absl::StrCat("hash block size ", opts.hash_block_tokens,
                     " is outside 0..1000000 (0 = default)"));
  }
  switch (format) {
    case TraceFormat::kAzure:
      return AzureReader::Open(opts);
    case TraceFormat::kMooncake:
      return MooncakeReader::Open(opts);
    case TraceFormat::kBurstGpt:
      return BurstGptReader::Open(opts);
    case TraceFormat::kBailian:
      return BailianReader::Open(opts);
    case TraceFormat::kVllmBench:
      return VllmBenchReader::Open(opts);
    case TraceFormat::kLengths:
      return LengthsReader::Open(opts);
    case TraceFormat::kBinary:
      return BinaryReader::Open(opts);
  }
  return absl::InvalidArgumentError("unknown trace format");
}

absl::StatusOr<TraceFormat> DetectTraceFormat(const std::string& path) {
  RETURN_IF_ERROR(CheckNotDirectory(path));
  // Binary: the header record starts with its magic within the first bytes.
  {
    std::FILE* f = std::fopen(path.c_str(), "rb");
    if (f == nullptr) {
      return absl::NotFoundError(
          absl::StrCat(path, ": cannot open: ", std::strerror(errno)));
    }
    char head[64];
    const size_t n = std::fread(head, 1, sizeof(head), f);
    std::fclose(f);
    if (std::string_view(head, n).find(kBinaryMagic) != std::string_view::npos) {
      return TraceFormat::kBinary;
    }
    if (n == 0) return absl::InvalidArgumentError(absl::StrCat(path, ":1: empty file"));
  }
  if (EndsWith(path, ".json") || EndsWith(path, ".json.gz"))
    return TraceFormat::kVllmBench;
  ASSIGN_OR_RETURN(auto lines, LineReader::Open(path));
  std::string_view first;
  ASSIGN_OR_RETURN(bool got, lines->Next(first));
  if (!got) return absl::InvalidArgumentError(absl::StrCat(path, ":1: empty file"));
  if (first.rfind("\xEF\xBB\xBF", 0) == 0) first.remove_prefix(3);
  first = TrimSpaces(first);
  if (!first.empty() && first.front() == '{') {
    if (first.find("\"chat_id\"") != first.npos) return TraceFormat::kBailian;
    if (first.find("\"hash_ids\"") != first.npos ||
        first.find("\"input_length\"") != first.npos) {
      return TraceFormat::kMooncake;
    }
    if (first.find("\"completed\"") != first.npos) return TraceFormat::kVllmBench;
    return absl::InvalidArgumentError(absl::StrCat(
        path,
        ":1: JSON line with neither hash_ids/input_length (mooncake) nor chat_id "
        "(bailian); give the format explicitly"));
  }
  if (first.find("ContextTokens") != first.npos) return TraceFormat::kAzure;
  if (first.find("Request tokens") != first.npos) return TraceFormat::kBurstGpt;
  if (first.find(',') != first.npos) return TraceFormat::kLengths;
  return absl::InvalidArgumentError(
      absl::StrCat(path,
                   ":1: cannot tell the trace format from the first line; give it "
                   "explicitly (azure, mooncake, burstgpt, bailian, vllm-bench, lengths, "
                   "binary)"));
}

}  // namespace servesim
