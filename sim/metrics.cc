#include "sim/metrics.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "sim/base/status_macros.h"

namespace servesim {
namespace {

// ITL histogram bins: the top 10 mantissa bits and the exponent of the
// double value in ms, i.e. 1024 bins per octave (relative width ~1e-3),
// from 1 ns (1e-6 ms) up; exact integer arithmetic, deterministic.
constexpr double kHistMinMs = 1e-6;
constexpr int kHistShift = 42;        // 52 mantissa bits - 10
constexpr int kHistBins = 46 * 1024;  // 46 octaves: up to ~7e7 ms

uint64_t Bits(double v) {
  uint64_t b;
  std::memcpy(&b, &v, sizeof b);
  return b;
}
double FromBits(uint64_t b) {
  double v;
  std::memcpy(&v, &b, sizeof v);
  return v;
}
const uint64_t kHistBase = Bits(kHistMinMs) >> kHistShift;

double NsToMs(TimeNs ns) { return static_cast<double>(ns) / 1e6; }

// numpy's _lerp: a + (b - a) * t, computed from b when t >= 0.5.
double Lerp(double a, double b, double t) {
  const double diff = b - a;
  return t >= 0.5 ? b - diff * (1 - t) : a + diff * t;
}

}  // namespace

double NumpyPercentile(const std::vector<double>& sorted, double q) {
  SERVESIM_CHECK(!sorted.empty());
  const double idx = q / 100.0 * static_cast<double>(sorted.size() - 1);
  const double lo = std::floor(idx);
  const size_t i = static_cast<size_t>(lo);
  const size_t j = std::min(i + 1, sorted.size() - 1);
  return Lerp(sorted[i], sorted[j], idx - lo);
}

LatencySummary Summarize(std::vector<double>& values) {
  LatencySummary s;
  s.count = static_cast<int64_t>(values.size());
  if (values.empty()) return s;
  std::sort(values.begin(), values.end());
  long double sum = 0;
  for (double v : values) sum += v;
  const double mean = static_cast<double>(sum / values.size());
  long double sq = 0;
  for (double v : values) sq += (static_cast<long double>(v) - mean) * (v - mean);
  s.mean_ms = mean;
  s.std_ms = std::sqrt(static_cast<double>(sq / values.size()));
  s.median_ms = NumpyPercentile(values, 50);
  s.p90_ms = NumpyPercentile(values, 90);
  s.p99_ms = NumpyPercentile(values, 99);
  return s;
}

void ItlAccumulator::Flush() {
  if (pending_count_ == 0) return;
  const TimeNs g = pending_gap_;
  const int64_t n = pending_count_;
  pending_count_ = 0;
  count_ += n;
  sum_ns_ += static_cast<__int128>(g) * n;
  sum_sq_ns_ += static_cast<unsigned __int128>(static_cast<__int128>(g) * g) *
                static_cast<uint64_t>(n);
  if (!use_histogram_) {
    runs_.push_back(Run{g, n});
    if (static_cast<int64_t>(runs_.size()) > exact_cap_) SpillToHistogram();
    return;
  }
  bins_[BinOf(NsToMs(g))] += n;
}

int ItlAccumulator::BinOf(double ms) const {
  if (!(ms > kHistMinMs)) return 0;
  const uint64_t b = (Bits(ms) >> kHistShift) - kHistBase + 1;
  return static_cast<int>(std::min<uint64_t>(b, kHistBins - 1));
}

double ItlAccumulator::BinValue(int bin) const {
  if (bin == 0) return 0;
  // Middle of the bin's value range.
  const uint64_t key = static_cast<uint64_t>(bin - 1) + kHistBase;
  return 0.5 * (FromBits(key << kHistShift) + FromBits((key + 1) << kHistShift));
}

void ItlAccumulator::SpillToHistogram() {
  use_histogram_ = true;
  bins_.assign(kHistBins, 0);
  for (const Run& r : runs_) bins_[BinOf(NsToMs(r.gap_ns))] += r.count;
  runs_.clear();
  runs_.shrink_to_fit();
}

LatencySummary ItlAccumulator::Summarize() const {
  LatencySummary s;
  const int64_t n_all = count();
  s.count = n_all;
  if (n_all == 0) return s;
  const long double n = static_cast<long double>(n_all);
  const __int128 pending_sum = static_cast<__int128>(pending_gap_) * pending_count_;
  const long double mean_ns = static_cast<long double>(sum_ns_ + pending_sum) / n;
  s.mean_ms = static_cast<double>(mean_ns / 1e6L);
  if (!use_histogram_) {
    // Exact: sort the runs by gap and read ranks off the cumulative counts.
    std::vector<Run> runs = runs_;
    if (pending_count_ > 0) runs.push_back(Run{pending_gap_, pending_count_});
    std::sort(runs.begin(), runs.end(),
              [](const Run& a, const Run& b) { return a.gap_ns < b.gap_ns; });
    long double sq = 0;
    for (const Run& r : runs) {
      const long double d = static_cast<long double>(r.gap_ns) - mean_ns;
      sq += d * d * static_cast<long double>(r.count);
    }
    s.std_ms = std::sqrt(static_cast<double>(sq / n)) / 1e6;
    // Ranks are asked in increasing order: one forward walk.
    size_t ri = 0;
    int64_t before = 0;  // gaps in runs[0, ri)
    auto value_at_rank = [&](int64_t rank) {
      while (before + runs[ri].count <= rank) before += runs[ri++].count;
      return NsToMs(runs[ri].gap_ns);
    };
    auto pct = [&](double q) {
      const double idx = q / 100.0 * static_cast<double>(n_all - 1);
      const double lo = std::floor(idx);
      const int64_t i = static_cast<int64_t>(lo);
      const double a = value_at_rank(i);
      const double b = value_at_rank(std::min(i + 1, n_all - 1));
      return Lerp(a, b, idx - lo);
    };
    s.median_ms = pct(50);
    s.p90_ms = pct(90);
    s.p99_ms = pct(99);
    return s;
  }
  s.exact = false;
  const unsigned __int128 pending_sq =
      static_cast<unsigned __int128>(static_cast<__int128>(pending_gap_) * pending_gap_) *
      static_cast<uint64_t>(pending_count_);
  // Population variance in ns^2 from exact integer sums.
  const long double var_ns2 = std::max<long double>(
      0, static_cast<long double>(sum_sq_ns_ + pending_sq) / n - mean_ns * mean_ns);
  s.std_ms = std::sqrt(static_cast<double>(var_ns2)) / 1e6;
  const int pending_bin = pending_count_ > 0 ? BinOf(NsToMs(pending_gap_)) : -1;
  auto value_at_rank = [&](int64_t rank) {
    int64_t seen = 0;
    for (int b = 0; b < kHistBins; ++b) {
      seen += bins_[b] + (b == pending_bin ? pending_count_ : 0);
      if (seen > rank) return BinValue(b);
    }
    return BinValue(kHistBins - 1);
  };
  auto pct = [&](double q) {
    const double idx = q / 100.0 * static_cast<double>(n_all - 1);
    const double lo = std::floor(idx);
    const int64_t i = static_cast<int64_t>(lo);
    return Lerp(value_at_rank(i), value_at_rank(std::min(i + 1, n_all - 1)), idx - lo);
  };
  s.median_ms = pct(50);
  s.p90_ms = pct(90);
  s.p99_ms = pct(99);
  return s;
}

void StepStats::AddStep(int32_t num_seqs, int32_t num_tokens, TimeNs duration_ns,
                        TimeNs start_ns, double kv_occupancy) {
  ++num_steps_;
  if (batch_hist_.size() <= static_cast<size_t>(num_seqs))
    batch_hist_.resize(num_seqs + 1, 0);
  ++batch_hist_[num_seqs];
  if (tokens_hist_.size() <= static_cast<size_t>(num_tokens)) {
    tokens_hist_.resize(num_tokens + 1, 0);
  }
  ++tokens_hist_[num_tokens];
  kv_weighted_ += static_cast<long double>(kv_occupancy) * duration_ns;
  busy_ns_ += duration_ns;
  kv_max_ = std::max(kv_max_, kv_occupancy);
  // Keep every kv_stride_-th step; when full, drop every other point and
  // double the stride (deterministic).
  if ((num_steps_ - 1) % kv_stride_ == 0) {
    if (kv_series_.size() >= kMaxKvPoints) {
      size_t w = 0;
      for (size_t r = 0; r < kv_series_.size(); r += 2) kv_series_[w++] = kv_series_[r];
      kv_series_.resize(w);
      kv_stride_ *= 2;
    }
    if ((num_steps_ - 1) % kv_stride_ == 0) {
      kv_series_.emplace_back(static_cast<double>(start_ns) / 1e9, kv_occupancy);
    }
  }
}

double StepStats::kv_time_weighted_mean() const {
  return busy_ns_ > 0 ? static_cast<double>(kv_weighted_ / busy_ns_) : 0.0;
}

std::array<double, 4> StepStats::HistSummary(const std::vector<int64_t>& hist) {
  int64_t n = 0;
  long double sum = 0;
  int64_t max_v = 0;
  for (size_t v = 0; v < hist.size(); ++v) {
    n += hist[v];
    sum += static_cast<long double>(v) * hist[v];
    if (hist[v] > 0) max_v = static_cast<int64_t>(v);
  }
  if (n == 0) return {0, 0, 0, 0};
  auto at_rank = [&](int64_t rank) {
    int64_t seen = 0;
    for (size_t v = 0; v < hist.size(); ++v) {
      seen += hist[v];
      if (seen > rank) return static_cast<double>(v);
    }
    return static_cast<double>(max_v);
  };
  auto pct = [&](double q) {
    const double idx = q / 100.0 * static_cast<double>(n - 1);
    const double lo = std::floor(idx);
    const int64_t i = static_cast<int64_t>(lo);
    return Lerp(at_rank(i), at_rank(std::min(i + 1, n - 1)), idx - lo);
  };
  return {static_cast<double>(sum / n), pct(50), pct(99), static_cast<double>(max_v)};
}

void OutputTokenBuckets::Switch(int64_t b) {
  if (current_ >= 0 && current_count_ > 0) {
    filed_.emplace_back(current_, current_count_);
    last_filed_ = std::max(last_filed_, current_);
  }
  current_ = b;
  current_count_ = 0;
  // Tokens in time order never return to a filed bucket (`b` is past the
  // last one filed); if one does, its count is taken back.
  if (b > last_filed_) return;
  for (size_t i = filed_.size(); i-- > 0;) {
    if (filed_[i].first == b) {
      current_count_ = filed_[i].second;
      filed_.erase(filed_.begin() + static_cast<std::ptrdiff_t>(i));
      break;
    }
  }
}

int64_t OutputTokenBuckets::CountAt(int64_t b) const {
  if (b == current_) return current_count_;
  for (const auto& [bucket, count] : filed_) {
    if (bucket == b) return count;
  }
  return 0;
}

int64_t OutputTokenBuckets::MaxCount() const {
  int64_t most = current_count_;
  for (const auto& [bucket, count] : filed_) most = std::max(most, count);
  return most;
}

int64_t GoodRequests(const std::vector<RequestRecord>& records, const GoodputSlos& slos) {
  if (!slos.any()) return 0;
  int64_t good = 0;
  for (const RequestRecord& rec : records) {
    if (!rec.ok() || rec.unmeasured) continue;
    const double ttft = NsToMs(rec.first_token_ns - rec.send_ns);
    const double e2el = NsToMs(rec.finish_ns - rec.send_ns);
    const double tpot =
        rec.output_tokens > 1 ? (e2el - ttft) / (rec.output_tokens - 1) : 0.0;
    if (slos.ttft_ms && !(*slos.ttft_ms >= ttft)) continue;
    if (slos.tpot_ms && !(*slos.tpot_ms >= tpot)) continue;
    if (slos.e2el_ms && !(*slos.e2el_ms >= e2el)) continue;
    ++good;
  }
  return good;
}

RunResult ComputeRunResult(const std::vector<RequestRecord>& records,
                           const ItlAccumulator& itl, const StepStats& steps,
                           int64_t preemptions, const OutputTokenBuckets& tokens) {
  RunResult r;
  r.num_prompts = static_cast<int64_t>(records.size());
  std::vector<double> ttft, tpot, e2el, queueing, client_wait;
  ttft.reserve(records.size());
  e2el.reserve(records.size());
  TimeNs first_send = -1, last_finish = -1;
  for (const RequestRecord& rec : records) {
    if (rec.send_ns >= 0 && (first_send < 0 || rec.send_ns < first_send))
      first_send = rec.send_ns;
    if (rec.finish_ns > last_finish) last_finish = rec.finish_ns;
    if (rec.reject != RejectReason::kNone) {
      ++r.failed;
      ++r.rejected_by_reason[static_cast<int>(rec.reject)];
      continue;
    }
    if (!rec.ok()) continue;
    if (rec.unmeasured) {  // load only: in no metric
      ++r.unmeasured;
      continue;
    }
    ++r.completed;
    r.total_input_tokens += rec.input_tokens;
    r.total_output_tokens += rec.output_tokens;
    const double t = NsToMs(rec.first_token_ns - rec.send_ns);
    const double lat = NsToMs(rec.finish_ns - rec.send_ns);
    ttft.push_back(t);
    e2el.push_back(lat);
    if (rec.output_tokens > 1) tpot.push_back((lat - t) / (rec.output_tokens - 1));
    queueing.push_back(NsToMs(rec.first_scheduled_ns - rec.arrival_ns));
    if (rec.intended_ns >= 0)
      client_wait.push_back(NsToMs(rec.send_ns - rec.intended_ns));
  }
  r.duration_s = first_send >= 0 && last_finish >= first_send
                     ? static_cast<double>(last_finish - first_send) / 1e9
                     : 0.0;
  if (r.duration_s > 0) {
    r.request_throughput = static_cast<double>(r.completed) / r.duration_s;
    r.output_throughput = static_cast<double>(r.total_output_tokens) / r.duration_s;
    r.total_token_throughput =
        static_cast<double>(r.total_input_tokens + r.total_output_tokens) / r.duration_s;
  }
  // vLLM's peak metrics, buckets of 1 s from the first successful send
  // (the tokens' origin when tokens were counted).
  TimeNs origin = tokens.has_origin() ? tokens.origin_ns() : -1;
  for (const RequestRecord& rec : records) {
    if (!tokens.has_origin() && rec.ok() && !rec.unmeasured &&
        (origin < 0 || rec.send_ns < origin)) {
      origin = rec.send_ns;
    }
  }
  if (origin >= 0) {
    // A request is active in the buckets from its send's to its finish's:
    // +1 at the first, -1 after the last, swept in bucket order (events,
    // not one counter per simulated second).
    std::vector<std::pair<int64_t, int64_t>> events;  // (bucket, +1 / -1)
    for (const RequestRecord& rec : records) {
      if (!rec.ok() || rec.unmeasured || rec.send_ns < origin) continue;
      events.emplace_back((rec.send_ns - origin) / OutputTokenBuckets::kBucketNs, 1);
      events.emplace_back((rec.finish_ns - origin) / OutputTokenBuckets::kBucketNs + 1,
                          -1);
    }
    std::sort(events.begin(), events.end());
    int64_t now = 0;
    for (size_t i = 0; i < events.size(); ++i) {
      now += events[i].second;
      // The count of a bucket holds once all of its events are in.
      if (i + 1 == events.size() || events[i + 1].first != events[i].first)
        r.max_concurrent_requests = std::max(r.max_concurrent_requests, now);
    }
    r.max_output_tokens_per_s = static_cast<double>(tokens.MaxCount());
  }
  r.ttft = Summarize(ttft);
  r.tpot = Summarize(tpot);
  r.e2el = Summarize(e2el);
  r.queueing = Summarize(queueing);
  r.client_wait = Summarize(client_wait);
  r.itl = itl.Summarize();
  r.preemptions = preemptions;
  r.num_steps = steps.num_steps();
  r.batch_size = StepStats::HistSummary(steps.batch_size_hist());
  r.tokens_per_step = StepStats::HistSummary(steps.tokens_hist());
  r.kv_occupancy_mean = steps.kv_time_weighted_mean();
  r.kv_occupancy_max = steps.kv_max();
  r.kv_series = steps.kv_series();
  return r;
}

}  // namespace servesim
