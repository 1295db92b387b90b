// Transforms of a request stream: RequestSource wrappers that own the
// source they wrap. Each renumbers ids 0, 1, 2, ... and keeps arrivals
// nondecreasing; errors of the inner source pass through unchanged. An
// output arrival outside 0..kMaxTraceArrivalNs (trace_reader.h) is an error.
// Thread-compatible; memory O(1) beyond the wrapped source.
#ifndef SERVESIM_TRACES_TRANSFORMS_H_
#define SERVESIM_TRACES_TRANSFORMS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "sim/request.h"
#include "sim/request_source.h"
#include "traces/synthetic.h"

namespace servesim {

// Replaces every arrival time by the next time of `arrivals` (for length
// tables and other sources without timestamps).
std::unique_ptr<RequestSource> WithArrivals(std::unique_ptr<RequestSource> source,
                                            std::unique_ptr<ArrivalProcess> arrivals);

// Keeps requests with start_ns <= arrival < end_ns and shifts them so that
// start_ns becomes 0. Stops reading the source at the first arrival >=
// end_ns. REQUIRES 0 <= start_ns <= end_ns.
std::unique_ptr<RequestSource> TimeWindow(std::unique_ptr<RequestSource> source,
                                          TimeNs start_ns, TimeNs end_ns);

// The option that chose a time factor, for error messages: its value is
// numerator / time_factor (a rate scale: numerator 1; a target rate: the
// file's own mean rate). Empty option: errors name the factor itself.
struct TimeScaleOrigin {
  std::string option;
  double numerator = 1;
};

// Multiplies every arrival by `time_factor` (rounded to ns): 0.5 doubles
// the request rate, 2 halves it. An arrival pushed past kMaxTraceArrivalNs
// is an error naming the request, `origin` and its allowed range.
// REQUIRES time_factor > 0.
std::unique_ptr<RequestSource> ScaleTime(std::unique_ptr<RequestSource> source,
                                         double time_factor, TimeScaleOrigin origin = {});

// Keeps each request with probability `fraction`, independently, from a
// stream seeded by `seed` (same seed, same subset). REQUIRES 0 < fraction <= 1.
std::unique_ptr<RequestSource> Sample(std::unique_ptr<RequestSource> source,
                                      double fraction, uint64_t seed);

struct LengthFilter {
  int32_t min_input = 1;
  int32_t max_input = 10'000'000;
  int32_t min_output = 1;
  int32_t max_output = 10'000'000;
};
// Keeps requests whose lengths lie within the (inclusive) bounds.
std::unique_ptr<RequestSource> FilterLengths(std::unique_ptr<RequestSource> source,
                                             LengthFilter filter);

// Stops after `max_requests` requests.
std::unique_ptr<RequestSource> Limit(std::unique_ptr<RequestSource> source,
                                     int64_t max_requests);

// Gives exactly `count` requests of the source, or fails with
// FailedPrecondition naming `what` when the source ends earlier (a request
// count the user asked for is never cut short in silence).
std::unique_ptr<RequestSource> RequireCount(std::unique_ptr<RequestSource> source,
                                            int64_t count, std::string what);

// Opens a fresh copy of a source (for transforms that read it more than
// once).
using SourceFactory = std::function<absl::StatusOr<std::unique_ptr<RequestSource>>()>;

// Replays the source until `target_requests` requests have been given:
// pass k is shifted in time by k * (span + mean gap) of pass 0; its
// sessions are numbered after pass 0's largest id and every earlier pass's,
// densely (sessions 0..S-1 of pass 0 are k S..k S + S - 1 in pass k; an
// id space past int64 is an error); prefix hashes are made distinct per
// pass (distinct_hashes) or kept, so later passes hit the prefix cache.
// A source with no requests gives none.
absl::StatusOr<std::unique_ptr<RequestSource>> Loop(SourceFactory factory,
                                                    int64_t target_requests,
                                                    bool distinct_hashes);

// First pass over a source: how many requests and their first and last
// arrival (for choosing a rate scale).
struct SourceSpan {
  int64_t requests = 0;
  TimeNs first_ns = 0;
  TimeNs last_ns = 0;
  // Requests per second over the span ((n - 1) / span); 0 if undefined.
  double MeanRatePerS() const;
};
absl::StatusOr<SourceSpan> MeasureSpan(RequestSource& source);

}  // namespace servesim

#endif  // SERVESIM_TRACES_TRANSFORMS_H_
