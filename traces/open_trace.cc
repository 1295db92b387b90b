#include "traces/open_trace.h"

#include <cmath>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "sim/base/status_macros.h"

namespace servesim {

absl::Status ValidateTraceOptions(const TraceOptions& opts) {
  if (opts.path.empty()) return absl::InvalidArgumentError("trace path: empty");
  if (opts.window_start_ns < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "trace window start: ", opts.window_start_ns, " ns is negative (allowed >= 0)"));
  }
  if (opts.window_end_ns >= 0 && opts.window_end_ns < opts.window_start_ns) {
    return absl::InvalidArgumentError(
        absl::StrCat("trace window end: ", opts.window_end_ns, " ns is before the start ",
                     opts.window_start_ns, " ns"));
  }
  if (!(opts.sample_fraction > 0 && opts.sample_fraction <= 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "trace sample fraction: ", opts.sample_fraction, " is outside (0, 1]"));
  }
  // A denormal scale made 1 / scale infinite: "arrive at nan s".
  if (!(opts.rate_scale >= 1e-9 && opts.rate_scale <= 1e9)) {
    return absl::InvalidArgumentError(
        absl::StrCat("trace rate scale: ", opts.rate_scale, " is outside [1e-9, 1e9]"));
  }
  if (!(opts.target_rate_per_s == 0 ||
        (opts.target_rate_per_s >= 1e-9 && opts.target_rate_per_s <= 1e9))) {
    return absl::InvalidArgumentError(
        absl::StrCat("trace target rate: ", opts.target_rate_per_s,
                     " is outside [1e-9, 1e9] (0: off)"));
  }
  if (opts.loop_to_requests < 0 || opts.loop_to_requests > 2147483647 ||
      opts.max_requests < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("trace loop/max requests: ", opts.loop_to_requests, " / ",
                     opts.max_requests, " (allowed: loop [0, 2147483647], max >= 0)"));
  }
  const LengthFilter& f = opts.lengths;
  for (const auto& [name, v] : {std::pair<const char*, int32_t>{"min_input", f.min_input},
                                {"max_input", f.max_input},
                                {"min_output", f.min_output},
                                {"max_output", f.max_output}}) {
    if (v < 0) {
      return absl::InvalidArgumentError(absl::StrCat("trace length filter ", name, ": ",
                                                     v, " is negative (allowed >= 0)"));
    }
  }
  if (f.min_input > f.max_input || f.min_output > f.max_output) {
    return absl::InvalidArgumentError(
        absl::StrCat("trace length filter: min above max (input ", f.min_input, "..",
                     f.max_input, ", output ", f.min_output, "..", f.max_output, ")"));
  }
  return absl::OkStatus();
}

absl::StatusOr<TraceFormat> ResolveTraceFormat(const TraceOptions& opts) {
  if (opts.format.empty()) return DetectTraceFormat(opts.path);
  return ParseTraceFormat(opts.format);
}

absl::StatusOr<std::unique_ptr<TraceReader>> OpenTraceReaderFor(
    const TraceOptions& opts) {
  RETURN_IF_ERROR(ValidateTraceOptions(opts));
  ASSIGN_OR_RETURN(TraceFormat format, ResolveTraceFormat(opts));
  if (!opts.model_filter.empty() && format != TraceFormat::kBurstGpt) {
    // Only BurstGPT rows name a model; ignoring the filter would replay
    // every request as if it had been applied.
    return absl::InvalidArgumentError(
        absl::StrCat(opts.path,
                     ": --model (a filter on BurstGPT's Model column) is for BurstGPT "
                     "files; this one is ",
                     TraceFormatName(format), " and names no model per request"));
  }
  ReaderOptions r;
  r.path = opts.path;
  r.hash_block_tokens = opts.hash_block_tokens;
  r.skip_bad_rows = opts.skip_bad_rows;
  r.skip_failed_requests = opts.skip_failed_requests;
  r.model_filter = opts.model_filter;
  return OpenTraceReader(format, r);
}

namespace {

// Reader + arrivals + window + sample + filter + time scale (one pass).
absl::StatusOr<std::unique_ptr<RequestSource>> OpenOnePass(
    const TraceOptions& opts, double time_factor, const TimeScaleOrigin& origin) {
  ASSIGN_OR_RETURN(std::unique_ptr<TraceReader> reader, OpenTraceReaderFor(opts));
  std::unique_ptr<RequestSource> src;
  if (reader->HasArrivalTimes() && opts.arrivals.kind != ArrivalSpec::Kind::kAllAtOnce) {
    // Drawn arrivals are for files without timestamps; ignoring them here
    // would replay other arrivals than the ones asked for.
    return absl::InvalidArgumentError(absl::StrCat(
        opts.path,
        ": --arrival (a drawn arrival process) is for files without timestamps, and this "
        "file has its own arrival times; change their rate with --rate-scale or "
        "--target-rate, or leave --arrival and --request-rate out"));
  }
  if (!reader->HasArrivalTimes() && opts.arrivals.kind != ArrivalSpec::Kind::kAllAtOnce) {
    ASSIGN_OR_RETURN(auto arrivals, ArrivalProcess::Create(opts.arrivals, opts.seed));
    src = WithArrivals(std::move(reader), std::move(arrivals));
  } else {
    src = std::move(reader);
  }
  if (opts.window_start_ns > 0 || opts.window_end_ns >= 0) {
    src = TimeWindow(
        std::move(src), opts.window_start_ns,
        opts.window_end_ns < 0 ? std::numeric_limits<TimeNs>::max() : opts.window_end_ns);
  }
  if (opts.sample_fraction < 1)
    src = Sample(std::move(src), opts.sample_fraction, opts.seed);
  const LengthFilter& f = opts.lengths;
  const LengthFilter none;
  if (f.min_input != none.min_input || f.max_input != none.max_input ||
      f.min_output != none.min_output || f.max_output != none.max_output) {
    src = FilterLengths(std::move(src), f);
  }
  if (time_factor != 1.0) src = ScaleTime(std::move(src), time_factor, origin);
  return src;
}

}  // namespace

absl::StatusOr<std::unique_ptr<RequestSource>> OpenTrace(const TraceOptions& options) {
  RETURN_IF_ERROR(ValidateTraceOptions(options));
  TraceOptions opts = options;
  if (opts.target_rate_per_s > 0 && opts.arrivals.kind == ArrivalSpec::Kind::kAllAtOnce) {
    // A file without timestamps gets Poisson arrivals at the target rate.
    ASSIGN_OR_RETURN(std::unique_ptr<TraceReader> probe, OpenTraceReaderFor(opts));
    if (!probe->HasArrivalTimes()) {
      opts.arrivals.kind = ArrivalSpec::Kind::kPoisson;
      opts.arrivals.rate_per_s = opts.target_rate_per_s;
      opts.target_rate_per_s = 0;
    }
  }
  double time_factor = 1.0 / opts.rate_scale;
  TimeScaleOrigin origin{"--rate-scale", 1.0};
  if (opts.target_rate_per_s > 0) {
    ASSIGN_OR_RETURN(auto first, OpenOnePass(opts, 1.0, origin));
    // The rate of what is replayed: the first max_requests requests when
    // the replay stops there (a trace's opening stretch can run at another
    // rate than the whole file).
    if (opts.max_requests > 0) first = Limit(std::move(first), opts.max_requests);
    ASSIGN_OR_RETURN(SourceSpan span, MeasureSpan(*first));
    const double rate = span.MeanRatePerS();
    if (rate <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(opts.path, ": cannot scale to a target rate: the trace has ",
                       span.requests, " request(s) over a zero time span"));
    }
    time_factor = rate / opts.target_rate_per_s;
    origin =
        TimeScaleOrigin{"target rate (--target-rate; simulate --request-rate)", rate};
  }
  std::unique_ptr<RequestSource> src;
  if (opts.loop_to_requests > 0) {
    SourceFactory factory = [opts, time_factor, origin]() {
      return OpenOnePass(opts, time_factor, origin);
    };
    ASSIGN_OR_RETURN(
        src, Loop(std::move(factory), opts.loop_to_requests, opts.loop_distinct_hashes));
  } else {
    ASSIGN_OR_RETURN(src, OpenOnePass(opts, time_factor, origin));
  }
  if (opts.max_requests > 0) src = Limit(std::move(src), opts.max_requests);
  return src;
}

}  // namespace servesim
