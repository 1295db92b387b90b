// Reading guide to traces/ (RequestSources; -> sim, proto). Start here:
// OpenTrace turns a file into a request stream. The formats are in
// trace_reader.h (one reader per file in readers/), arrival processes and
// synthetic sessions in synthetic.h, stream wrappers in transforms.h,
// `servesim trace stats` in trace_stats.h, conversion in trace_writer.h;
// bench_result.h reads `vllm bench serve` result files for calibration/.
// parse_util.h, json.h and file_util.h are helpers; prefix_hash.h the
// trace prefix hashes.
//
// One entry point for replaying a trace file: detect or take the format,
// open the streaming reader, attach an arrival process when the file has
// no timestamps, and apply the transforms. `servesim simulate --trace F`
// and `servesim trace ...` call this.
#ifndef SERVESIM_TRACES_OPEN_TRACE_H_
#define SERVESIM_TRACES_OPEN_TRACE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "sim/request.h"
#include "sim/request_source.h"
#include "traces/synthetic.h"
#include "traces/trace_reader.h"
#include "traces/transforms.h"

namespace servesim {

inline ArrivalSpec AllAtOnce() {
  ArrivalSpec spec;
  spec.kind = ArrivalSpec::Kind::kAllAtOnce;
  return spec;
}

struct TraceOptions {
  std::string path;
  // "" = detect (DetectTraceFormat); else azure, mooncake, burstgpt,
  // bailian, vllm-bench, lengths (csv), binary.
  std::string format;
  // Tokens per prefix hash; 0 = the format's default.
  int32_t hash_block_tokens = 0;
  bool skip_bad_rows = false;
  bool skip_failed_requests = true;  // BurstGPT / bench failures
  std::string model_filter;          // BurstGPT Model column ("" = all)

  // Arrivals for files without timestamps (length tables, bench results
  // without start_times): this process, seeded by `seed`. Default: all at
  // t = 0 (a closed-loop client ignores arrivals anyway).
  ArrivalSpec arrivals = AllAtOnce();
  uint64_t seed = 0;

  // Transforms, applied in this order:
  // 1. time window [window_start_ns, window_end_ns) of the file's own
  //    timeline, re-based to 0 (window_end_ns < 0: to the end);
  TimeNs window_start_ns = 0;
  TimeNs window_end_ns = -1;
  // 2. sampling: keep each request with this probability (seeded by seed);
  double sample_fraction = 1.0;
  // 3. length filter;
  LengthFilter lengths;
  // 4. time scaling: target_rate_per_s > 0 rescales time so the mean rate
  //    over the span becomes this (measured in a first pass over the
  //    file, over its first max_requests requests when max_requests > 0,
  //    i.e. over what is replayed); otherwise arrivals are divided by rate_scale (2 =
  //    twice as many requests per second). A file without timestamps and with `arrivals`
  //    left at all-at-once gets Poisson arrivals at target_rate_per_s instead;
  double rate_scale = 1.0;
  double target_rate_per_s = 0;
  // 5. loop the result to this many requests (0 = no loop);
  int64_t loop_to_requests = 0;
  bool loop_distinct_hashes = true;
  // 6. keep at most this many requests (0 = all).
  int64_t max_requests = 0;
};

// Checks ranges (sample fraction in (0, 1], rate_scale > 0, window order,
// ...); messages name the field and the allowed range.
absl::Status ValidateTraceOptions(const TraceOptions& opts);

// The format OpenTrace would use for `opts` (explicit or detected).
absl::StatusOr<TraceFormat> ResolveTraceFormat(const TraceOptions& opts);

// The reader alone (no transforms, no arrival process), for stats.
absl::StatusOr<std::unique_ptr<TraceReader>> OpenTraceReaderFor(const TraceOptions& opts);

// Reader + arrivals + transforms. Describe() of the result names the file,
// format and every transform applied.
absl::StatusOr<std::unique_ptr<RequestSource>> OpenTrace(const TraceOptions& opts);

}  // namespace servesim

#endif  // SERVESIM_TRACES_OPEN_TRACE_H_
