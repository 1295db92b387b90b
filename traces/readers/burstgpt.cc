// The burstgpt reader: BurstGPT traces (CSV).
#include "sim/base/hash.h"
#include "traces/readers/readers.h"

namespace servesim::trace_internal {
namespace {

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
                               "\" is not a non-negative number of seconds (allowed 0..",
                               kMaxTraceArrivalNs / kNsPerSec, " s)"));
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
        out.session_id = static_cast<int64_t>(Fnv1a64Hash(s) >> 1);
      }
    }
    return true;
  }

  int ts_ = -1, model_ = -1, in_ = -1, out_ = -1, session_ = -1;
};

}  // namespace

absl::StatusOr<std::unique_ptr<TraceReader>> OpenBurstGptReader(
    const ReaderOptions& opts) {
  return BurstGptReader::Open(opts);
}

}  // namespace servesim::trace_internal
