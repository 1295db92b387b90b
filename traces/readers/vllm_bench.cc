// The vllm_bench reader: vllm bench serve --save-result files (.json / .json.gz).
#include "traces/readers/readers.h"

namespace servesim::trace_internal {
namespace {

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
      // A request with an error is left out (it is taken to have cost the
      // server nothing). One without an error that produced no token (old
      // clients record it as success with output 0 and ttft 0) was
      // prefilled and ended at once: replayed as one-token load, in no
      // metric, as calibrate replays it (ClientMethod.unmeasured).
      const bool failed = bench_.errors && !(*bench_.errors)[i].empty();
      if (failed && opts_.skip_failed_requests) {
        ++stats_.skipped[static_cast<int>(SkipReason::kFailedRequest)];
        continue;
      }
      const bool unmeasured = !failed && (*bench_.output_lens)[i] == 0;
      SkipReason reason;
      std::string msg;
      if (!Length("input_lens", i, in[i], &out.input_tokens, &reason, &msg) ||
          !Length("output_lens", i, unmeasured ? 1 : (*bench_.output_lens)[i],
                  &out.output_tokens, &reason, &msg)) {
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
      out.unmeasured = unmeasured;
      if (unmeasured) ++stats_.unmeasured;
      out.id = stats_.requests++;
      return true;
    }
    return false;
  }

  std::string Describe() const override {
    return absl::StrCat(
        "vllm-bench result ", opts_.path, " (requests ", stats_.requests,
        stats_.unmeasured > 0
            ? absl::StrCat(", of them ", stats_.unmeasured,
                           " that streamed no token, replayed as one-token load in no "
                           "metric")
            : std::string(),
        ", skipped: ", stats_.SkippedSummary(),
        bench_.start_times ? ", start_times replayed" : ", no start_times", ")");
  }

 private:
  bool Length(const char* key, size_t i, double v, int32_t* out, SkipReason* reason,
              std::string* msg) const {
    const int64_t min = 1;
    if (!std::isfinite(v) || v != std::floor(v)) {
      *reason = SkipReason::kMalformed;
      // A JSON null is read as NaN: named as the file has it.
      *msg = absl::StrCat("key ", key, "[", i,
                          "]: ", std::isnan(v) ? "null" : absl::StrCat(v),
                          " is not an integer token count");
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

}  // namespace

absl::StatusOr<std::unique_ptr<TraceReader>> OpenVllmBenchReader(
    const ReaderOptions& opts) {
  return VllmBenchReader::Open(opts);
}

}  // namespace servesim::trace_internal
