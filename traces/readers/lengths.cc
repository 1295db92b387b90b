// The lengths reader: CSV tables of lengths, with optional arrival, session and hash
// columns.
#include "traces/readers/readers.h"

namespace servesim::trace_internal {
namespace {

// ---------------------------------------------------------------- lengths

// A table of lengths (ShareGPT stats, servesim's own CSV): input and output
// columns by name, optional arrival, session and prefix-hash columns.
class LengthsReader : public CsvTraceReader {
 public:
  static absl::StatusOr<std::unique_ptr<TraceReader>> Open(const ReaderOptions& opts) {
    std::unique_ptr<LengthsReader> r(new LengthsReader(opts));
    RETURN_IF_ERROR(r->ReadCsvHeader());
    const auto& h = r->header_;
    ASSIGN_OR_RETURN(
        r->in_, r->FindOneColumn({"input_tokens", "num_prefill_tokens", "input_length",
                                  "input_len", "prompt_len", "prompt_tokens",
                                  "ContextTokens", "Request tokens"}));
    ASSIGN_OR_RETURN(
        r->out_, r->FindOneColumn({"output_tokens", "num_decode_tokens", "output_length",
                                   "output_len", "completion_tokens", "GeneratedTokens",
                                   "Response tokens"}));
    ASSIGN_OR_RETURN(const int time_col,
                     r->FindOneColumn({"arrival_ns", "arrival_s", "timestamp_s"}));
    if (time_col >= 0)
      (h[time_col] == "arrival_ns" ? r->arrival_ns_ : r->arrival_s_) = time_col;
    // A time column of no known unit was read as no time at all: every
    // request at t = 0, silently.
    if (time_col < 0) {
      for (std::string_view c : h) {
        std::string lower(c);
        for (char& ch : lower)
          ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
        for (std::string_view t :
             {"timestamp", "arrival", "arrival_time", "time", "ts", "time_s", "time_ns",
              "arrival_time_s", "timestamp_ms", "arrival_ms", "created", "start_time"}) {
          if (lower == t) {
            return absl::InvalidArgumentError(absl::StrCat(
                opts.path, ":1: column ", std::string(c),
                " looks like arrival times, but a length table reads only arrival_s "
                "(seconds), timestamp_s or arrival_ns: rename it to the one of its unit, "
                "or give --trace-format for the format the file is in"));
          }
        }
      }
    }
    r->session_ = FindColumn(h, {"session_id"});
    r->block_ = FindColumn(h, {"hash_block_tokens"});
    r->hashes_ = FindColumn(h, {"prefix_hashes"});
    r->hashed_out_ = FindColumn(h, {"hashed_output_tokens"});
    if (r->in_ < 0)
      return r->MissingColumn("input length (input_tokens, num_prefill_tokens, ...)");
    if (r->out_ < 0) {
      return r->MissingColumn("output length (output_tokens, num_decode_tokens, ...)");
    }
    if (time_col >= 0) r->time_field_ = std::string(h[time_col]);
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
        // Digits only: a whole number past int64, so out of range.
        const bool digits =
            !a.empty() && a.find_first_not_of("0123456789") == std::string_view::npos;
        return Fail(SkipReason::kMalformed,
                    absl::StrCat("column arrival_ns: \"", Clip(a), "\" is ",
                                 digits ? "out of range" : "not a non-negative integer",
                                 " (allowed 0..", kMaxTraceArrivalNs, " ns)"));
      }
    } else if (arrival_s_ >= 0) {
      const std::string_view a = TrimSpaces(cells_[arrival_s_]);
      if (!ParseDecimalToNs(a, kNsPerSec, abs_ns)) {
        return Fail(
            SkipReason::kMalformed,
            absl::StrCat("column ", time_field_, ": \"", Clip(a),
                         "\" is not a non-negative number of seconds (allowed 0..",
                         kMaxTraceArrivalNs / kNsPerSec, " s)"));
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
    // Answer tokens the hashes also name (servesim's own CSV): checked in
    // every row that gives it, used only with hashes.
    int32_t hashed_output = 0;
    if (hashed_out_ >= 0 && !TrimSpaces(cells_[hashed_out_]).empty()) {
      const std::string_view o = TrimSpaces(cells_[hashed_out_]);
      int64_t v = 0;
      if (!ParseInt64(o, &v) || v < 0 || v > out.output_tokens) {
        return Fail(
            SkipReason::kMalformed,
            absl::StrCat("column hashed_output_tokens: \"", Clip(o), "\" is outside 0..",
                         std::string(header_[out_]), " (", out.output_tokens, ")"));
      }
      hashed_output = static_cast<int32_t>(v);
      const bool hashes = hashes_ >= 0 && !TrimSpaces(cells_[hashes_]).empty();
      if (hashed_output > 0 && !hashes) {
        return Fail(
            SkipReason::kMalformed,
            absl::StrCat("column hashed_output_tokens: ", hashed_output,
                         " answer tokens named, but the row has no prefix_hashes"));
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
        out.hashed_output_tokens = hashed_output;
        // As the Mooncake and Bailian readers: no more hashes than blocks
        // (stats counted phantom blocks for prefix sharing).
        if (static_cast<int64_t>(out.prefix_hashes.size()) >
            MaxPrefixHashes(out.input_tokens, out.hashed_output_tokens, block)) {
          return Fail(
              SkipReason::kHashCount,
              HashCountMessage("column prefix_hashes",
                               static_cast<int64_t>(out.prefix_hashes.size()),
                               header_[in_], out.input_tokens, "hashed_output_tokens",
                               out.hashed_output_tokens, block));
        }
        out.hash_block_tokens = static_cast<int32_t>(block);
      }
    }
    return true;
  }

  int in_ = -1, out_ = -1, arrival_ns_ = -1, arrival_s_ = -1, session_ = -1, block_ = -1,
      hashes_ = -1, hashed_out_ = -1;
};

}  // namespace

absl::StatusOr<std::unique_ptr<TraceReader>> OpenLengthsReader(
    const ReaderOptions& opts) {
  return LengthsReader::Open(opts);
}

}  // namespace servesim::trace_internal
