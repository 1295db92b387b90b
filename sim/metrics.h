// Benchmark metrics computed exactly as `vllm bench serve` does
// (vllm/benchmarks/serve.py), plus simulator-only statistics.
//  - TTFT: send (after the concurrency semaphore) to first token.
//  - TPOT per request: (latency - TTFT) / (output_len - 1), only requests
//    with more than one output token; summarised over requests.
//  - ITL: every gap between consecutive tokens, pooled over requests.
//  - E2E latency: send to last token.
//  - mean, median, std (population, numpy's default), p90, p99 (numpy's
//    linear interpolation), all in milliseconds.
//  - duration: first send to last finish (rejections included).
// Memory stays bounded for huge runs: per-request records are small PODs;
// pooled ITL is kept exactly as runs of equal consecutive gaps (every
// sequence decoding in the same steps adds the same gap, so a run usually
// covers a whole batch) up to `itl_exact_cap` runs, then a deterministic
// log-spaced histogram (1024 bins per octave, relative bin width < 1e-3)
// takes over for the percentiles (mean and std stay exact) and the summary
// says so.
#ifndef SERVESIM_SIM_METRICS_H_
#define SERVESIM_SIM_METRICS_H_

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "sim/request.h"
#include "sim/scheduler.h"

namespace servesim {

// The timeline of one request (times in ns of simulated time; -1: never).
struct RequestRecord {
  RequestId id = -1;
  int32_t input_tokens = 0;
  int32_t output_tokens = 0;
  int32_t replica = -1;
  int32_t preemptions = 0;
  int32_t prefix_hit_tokens = 0;
  RejectReason reject = RejectReason::kNone;
  TimeNs intended_ns = -1;  // when the client wanted to send it
  TimeNs send_ns = -1;      // sent (after the semaphore)
  TimeNs arrival_ns = -1;   // reached the server (send + overhead)
  TimeNs first_scheduled_ns = -1;
  TimeNs first_token_ns = -1;
  TimeNs finish_ns = -1;    // last token, or the rejection
  bool unmeasured = false;  // RequestSpec::unmeasured: in no metric
  bool ok() const { return reject == RejectReason::kNone && finish_ns >= 0; }
};

struct LatencySummary {
  int64_t count = 0;
  double mean_ms = 0;
  double median_ms = 0;
  double std_ms = 0;
  double p90_ms = 0;
  double p99_ms = 0;
  bool exact = true;  // false: percentiles from the ITL histogram
};

// numpy.percentile(values, q) with the default 'linear' method.
// REQUIRES: `sorted` is sorted ascending and non-empty; 0 <= q <= 100.
double NumpyPercentile(const std::vector<double>& sorted, double q);
// mean / median / population std / p90 / p99 of `values` (any unit; the
// result fields are named _ms because callers pass milliseconds). Sorts
// `values`. All zeros when empty (vLLM reports 0 for empty lists).
LatencySummary Summarize(std::vector<double>& values);

// Pooled inter-token latencies, run-length encoded: Add is O(1) and
// touches no memory while the gap repeats.
class ItlAccumulator {
 public:
  // `exact_cap`: runs of equal consecutive gaps kept exactly (16 bytes
  // each) before the histogram takes over.
  explicit ItlAccumulator(int64_t exact_cap = 4'000'000) : exact_cap_(exact_cap) {}
  void Add(TimeNs gap_ns) {
    if (gap_ns == pending_gap_ && pending_count_ > 0) {
      ++pending_count_;
      return;
    }
    Flush();
    pending_gap_ = gap_ns;
    pending_count_ = 1;
  }
  int64_t count() const { return count_ + pending_count_; }
  bool exact() const { return !use_histogram_; }
  LatencySummary Summarize() const;

 private:
  struct Run {
    TimeNs gap_ns;
    int64_t count;
  };
  void Flush();
  void SpillToHistogram();
  int BinOf(double ms) const;
  double BinValue(int bin) const;

  int64_t exact_cap_;
  int64_t count_ = 0;  // flushed gaps
  TimeNs pending_gap_ = 0;
  int64_t pending_count_ = 0;
  bool use_histogram_ = false;
  std::vector<Run> runs_;
  std::vector<int64_t> bins_;
  // Exact integer sums of the flushed gaps in ns (and their squares) for the
  // mean and std once the histogram is in use.
  __int128 sum_ns_ = 0;
  unsigned __int128 sum_sq_ns_ = 0;
};

// Output tokens per 1-second bucket, as `vllm bench serve` counts them for
// max_output_tokens_per_s: bucket k holds the tokens emitted in
// [origin + k s, origin + (k + 1) s), origin the send of the first
// successful request. O(1) per token in time order; memory per bucket that
// holds a token, not per simulated second (a run of three requests sent a
// billion seconds apart held gigabytes of empty buckets).
class OutputTokenBuckets {
 public:
  // REQUIRES: called once, before the first AddToken.
  void SetOrigin(TimeNs origin_ns) { origin_ns_ = origin_ns; }
  bool has_origin() const { return origin_ns_ >= 0; }
  TimeNs origin_ns() const { return origin_ns_; }
  // REQUIRES: has_origin() and t_ns >= origin_ns().
  void AddToken(TimeNs t_ns) {
    const int64_t b = (t_ns - origin_ns_) / kBucketNs;
    if (b != current_) Switch(b);
    ++current_count_;
  }
  // Tokens in bucket `b`, and the most in any bucket.
  int64_t CountAt(int64_t b) const;
  int64_t MaxCount() const;

  static constexpr TimeNs kBucketNs = 1'000'000'000;

 private:
  // Files the current bucket's count and makes `b` current (its earlier
  // count, if tokens came out of time order, carried on).
  void Switch(int64_t b);

  TimeNs origin_ns_ = -1;
  int64_t current_ = -1;
  int64_t current_count_ = 0;
  int64_t last_filed_ = -1;                         // the largest bucket in filed_
  std::vector<std::pair<int64_t, int64_t>> filed_;  // (bucket, count), one per bucket
};

// vLLM's --goodput service-level objectives in milliseconds (absent: not
// part of the goodput); a request is good when it meets every one given.
struct GoodputSlos {
  std::optional<double> ttft_ms, tpot_ms, e2el_ms;
  bool any() const { return ttft_ms || tpot_ms || e2el_ms; }
};

// Successful requests that meet every SLO of `slos` (vLLM's good_completed:
// TPOT counts as 0 for a request of one output token).
int64_t GoodRequests(const std::vector<RequestRecord>& records, const GoodputSlos& slos);

// Per-step statistics of one run (all replicas together).
class StepStats {
 public:
  void AddStep(int32_t num_seqs, int32_t num_tokens, TimeNs duration_ns, TimeNs start_ns,
               double kv_occupancy);
  int64_t num_steps() const { return num_steps_; }
  // {mean, p50, p99, max} of a histogram.
  static std::array<double, 4> HistSummary(const std::vector<int64_t>& hist);
  const std::vector<int64_t>& batch_size_hist() const { return batch_hist_; }
  const std::vector<int64_t>& tokens_hist() const { return tokens_hist_; }
  double kv_time_weighted_mean() const;
  double kv_max() const { return kv_max_; }
  // Downsampled (time_s, occupancy) points, at most kMaxKvPoints.
  const std::vector<std::pair<double, double>>& kv_series() const { return kv_series_; }
  TimeNs busy_ns() const { return busy_ns_; }

  static constexpr size_t kMaxKvPoints = 1024;

 private:
  int64_t num_steps_ = 0;
  std::vector<int64_t> batch_hist_;
  std::vector<int64_t> tokens_hist_;
  long double kv_weighted_ = 0;
  TimeNs busy_ns_ = 0;
  double kv_max_ = 0;
  std::vector<std::pair<double, double>> kv_series_;
  int64_t kv_stride_ = 1;
};

// Everything a report needs about one run.
struct RunResult {
  int64_t num_prompts = 0;
  int64_t completed = 0;  // measured requests that finished
  int64_t failed = 0;
  // Requests replayed for their load only (RequestSpec::unmeasured): in
  // num_prompts, not in completed, failed or any latency or token metric.
  int64_t unmeasured = 0;
  int64_t total_input_tokens = 0;   // completed requests
  int64_t total_output_tokens = 0;  // completed requests
  double duration_s = 0;
  double request_throughput = 0;
  double output_throughput = 0;
  double total_token_throughput = 0;
  // vLLM's peak metrics: the most output tokens in one 1-second bucket, and
  // the most successful requests active in one bucket (a request is active
  // in every bucket from its send's to its last token's).
  double max_output_tokens_per_s = 0;
  int64_t max_concurrent_requests = 0;
  LatencySummary ttft, tpot, itl, e2el;
  // Simulator-only.
  LatencySummary queueing;  // server arrival to first scheduled
  // When the client meant to send to when it sent: the wait at its
  // --max-concurrency semaphore, or of a session's turn for its previous
  // turn to finish (sim/engine.h); vLLM's latencies start after it.
  LatencySummary client_wait;
  int64_t preemptions = 0;
  std::array<int64_t, kNumRejectReasons> rejected_by_reason{};
  int64_t num_steps = 0;
  std::array<double, 4> batch_size{};       // mean, p50, p99, max
  std::array<double, 4> tokens_per_step{};  // mean, p50, p99, max
  double kv_occupancy_mean = 0;             // time-weighted over busy steps
  double kv_occupancy_max = 0;
  std::vector<std::pair<double, double>> kv_series;
};

// Builds the result from the records of every request of the run.
// The peak metrics' buckets start at `tokens`' origin (the engine sets it
// to the earliest successful send), else at the earliest successful send.
RunResult ComputeRunResult(const std::vector<RequestRecord>& records,
                           const ItlAccumulator& itl, const StepStats& steps,
                           int64_t preemptions, const OutputTokenBuckets& tokens = {});

}  // namespace servesim

#endif  // SERVESIM_SIM_METRICS_H_
