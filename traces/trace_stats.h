// Summary statistics of a request stream (`servesim trace stats`).
#ifndef SERVESIM_TRACES_TRACE_STATS_H_
#define SERVESIM_TRACES_TRACE_STATS_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "sim/request.h"
#include "sim/request_source.h"
#include "traces/trace_reader.h"

namespace servesim {

// Nearest-rank percentiles (the smallest value with at least p% of the
// requests at or below it) of a token count.
struct LengthSummary {
  int64_t p50 = 0, p90 = 0, p99 = 0, max = 0, min = 0;
  double mean = 0;
};

struct TraceStats {
  std::string source;  // Describe() of the source after reading
  int64_t requests = 0;
  TimeNs span_ns = 0;          // last arrival - first arrival
  double mean_rate_per_s = 0;  // (requests - 1) / span; 0 if undefined
  LengthSummary input, output;
  // Coefficient of variation (sd / mean) of inter-arrival gaps; 1 for
  // Poisson, > 1 bursty; 0 if fewer than 2 gaps or all gaps 0.
  double interarrival_cv = 0;
  // Hashed prompt blocks, and the fraction of them whose chained hash
  // appeared in an earlier request's prompt or hashed answer (what an
  // unbounded prefix cache could hit). Exact while at most `max_tracked_hashes` distinct
  // hashes were seen; beyond that new hashes are not remembered (approximate = true).
  int64_t hashed_blocks = 0;
  double prefix_sharing_ratio = 0;
  bool prefix_sharing_approximate = false;
  int64_t requests_in_sessions = 0;  // session_id >= 0
  // Reader-level counts (rows read, skipped by reason) when known.
  std::optional<ReaderStats> reader;
};

// Reads `source` to the end. Memory: O(distinct lengths + tracked hashes).
absl::StatusOr<TraceStats> ComputeTraceStats(RequestSource& source,
                                             int64_t max_tracked_hashes = int64_t{1}
                                                                          << 24);

// Human-readable report (one "key: value" per line).
std::string FormatTraceStatsText(const TraceStats& stats);
// One JSON object, deterministic (sim/base/json_writer.h).
std::string FormatTraceStatsJson(const TraceStats& stats);

}  // namespace servesim

#endif  // SERVESIM_TRACES_TRACE_STATS_H_
