// The azure reader: Azure LLM inference traces (CSV).
#include "traces/readers/readers.h"

namespace servesim::trace_internal {
namespace {

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

}  // namespace

absl::StatusOr<std::unique_ptr<TraceReader>> OpenAzureReader(const ReaderOptions& opts) {
  return AzureReader::Open(opts);
}

}  // namespace servesim::trace_internal
