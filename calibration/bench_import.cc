#include "calibration/bench_import.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iterator>
#include <limits>
#include <optional>
#include <string_view>
#include <tuple>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "calibration/measurements.h"
#include "sim/base/status_macros.h"
#include "sim/metrics.h"

namespace servesim {
namespace {

using servesim::proto::ClientMethod;
using servesim::proto::Measurement;

bool AllEqual(const std::vector<double>& v) {
  for (double x : v) {
    if (x != v.front()) return false;
  }
  return true;
}

double Mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0 : s / v.size();
}

constexpr double kMaxInt32 = std::numeric_limits<int32_t>::max();
// Token totals are counts: integers a double holds exactly.
constexpr double kMaxExactInteger = 9007199254740992.0;  // 2^53

// A value as Python's json module writes it (NaN, Infinity, -5, 12.5).
std::string JsonNumberText(double x) {
  if (std::isnan(x)) return "NaN";
  if (std::isinf(x)) return x > 0 ? "Infinity" : "-Infinity";
  return absl::StrFormat("%.15g", x);
}

bool IsInteger(double x) { return std::isfinite(x) && x == std::floor(x); }

absl::Status OutOfRange(const std::string& path, const std::string& key,
                        const std::string& value, std::string_view allowed) {
  return absl::InvalidArgumentError(absl::StrFormat(
      "%s: key \"%s\": %s is out of range (allowed: %s)", path, key, value, allowed));
}

// The number at top-level `key`, or nullopt when the key is absent or null.
// An error naming the file, the key and `allowed` when the value is a
// string, boolean, array or object, or a number `ok` refuses (NaN and infinities are
// refused by every caller's `ok`).
template <typename Pred>
absl::StatusOr<std::optional<double>> CheckedNumber(const BenchResult& r,
                                                    const std::string& path,
                                                    const std::string& key, Pred ok,
                                                    std::string_view allowed) {
  if (auto it = r.strings.find(key); it != r.strings.end()) {
    return OutOfRange(path, key, absl::StrFormat("the string \"%s\"", it->second),
                      allowed);
  }
  if (auto it = r.others.find(key); it != r.others.end())
    return OutOfRange(path, key, it->second, allowed);
  auto it = r.metrics.find(key);
  if (it == r.metrics.end()) return std::optional<double>();
  if (!ok(it->second)) return OutOfRange(path, key, JsonNumberText(it->second), allowed);
  return std::optional<double>(it->second);
}

// Per-request lengths: non-negative integer token counts.
absl::Status CheckLengths(const std::string& path, const std::string& key,
                          const std::vector<double>& v) {
  for (size_t i = 0; i < v.size(); ++i) {
    if (!IsInteger(v[i]) || v[i] < 0 || v[i] > kMaxInt32) {
      return OutOfRange(path, absl::StrFormat("%s[%d]", key, i),
                        std::isnan(v[i]) ? "NaN or null" : JsonNumberText(v[i]),
                        "an integer token count in 0..2147483647");
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ImportedCell> ImportBenchFile(const std::string& path) {
  ASSIGN_OR_RETURN(BenchResult r, ReadBenchResult(path));
  ImportedCell c;
  c.path = path;
  if (auto it = r.strings.find("model_id"); it != r.strings.end())
    c.model_id = it->second;
  // Every key the cell is built from is range-checked here: a bad value is
  // an error naming the file and key, never a silently dropped point.
  const auto positive_int = [](double x) {
    return IsInteger(x) && x >= 1 && x <= kMaxInt32;
  };
  const auto count = [](double x) {
    return IsInteger(x) && x >= 0 && x <= kMaxExactInteger;
  };
  const auto positive = [](double x) { return std::isfinite(x) && x > 0; };
  const auto non_negative = [](double x) { return std::isfinite(x) && x >= 0; };
  ASSIGN_OR_RETURN(std::optional<double> completed_opt,
                   CheckedNumber(r, path, "completed", positive_int,
                                 "an integer in 1..2147483647: at least one request "
                                 "must have completed"));
  const double completed = *completed_opt;  // ReadBenchResult requires the key
  ASSIGN_OR_RETURN(
      std::optional<double> num_prompts,
      CheckedNumber(r, path, "num_prompts", positive_int, "an integer in 1..2147483647"));
  if (num_prompts && *num_prompts < completed) {
    return OutOfRange(
        path, "num_prompts", JsonNumberText(*num_prompts),
        absl::StrFormat("an integer >= completed (%s)", JsonNumberText(completed)));
  }
  ASSIGN_OR_RETURN(
      std::optional<double> duration,
      CheckedNumber(r, path, "duration", positive, "a finite number of seconds > 0"));
  c.num_prompts = static_cast<int64_t>(completed);
  std::vector<std::string> how;
  // Concurrency and arrival rate. vLLM writes max_concurrency as null (no
  // limit) or a positive integer, request_rate as "inf" or a number.
  ASSIGN_OR_RETURN(std::optional<double> max_concurrency,
                   CheckedNumber(r, path, "max_concurrency", positive_int,
                                 "null (no limit) or an integer in 1..2147483647"));
  c.max_concurrency = max_concurrency ? static_cast<int32_t>(*max_concurrency) : 0;
  constexpr std::string_view kRateRange =
      "the string \"inf\", or a number of requests/s > 0";
  if (auto it = r.strings.find("request_rate"); it != r.strings.end()) {
    if (it->second != "inf") {
      return OutOfRange(path, "request_rate",
                        absl::StrFormat("the string \"%s\"", it->second), kRateRange);
    }
    c.request_rate = std::numeric_limits<double>::infinity();
  } else {
    ASSIGN_OR_RETURN(
        std::optional<double> rate,
        CheckedNumber(
            r, path, "request_rate", [](double x) { return x > 0; },  // +Infinity: "inf"
            kRateRange));
    c.request_rate = rate.value_or(std::numeric_limits<double>::infinity());
  }
  if (auto it = r.strings.find("ramp_up_strategy"); it != r.strings.end()) {
    return OutOfRange(path, "ramp_up_strategy",
                      absl::StrFormat("the string \"%s\"", it->second),
                      "absent or null: a ramp-up run (its rate changes during the "
                      "run) is not simulated");
  }
  ASSIGN_OR_RETURN(
      std::optional<double> burstiness,
      CheckedNumber(
          r, path, "burstiness", [](double x) { return x >= 1e-3 && x <= 1e3; },
          "a number in [0.001, 1000] (Gamma shape; 1 = Poisson)"));
  c.burstiness = burstiness.value_or(1.0);
  how.emplace_back(c.max_concurrency > 0 ? "max_concurrency" : "no max_concurrency key");
  if (std::isfinite(c.request_rate) && !burstiness)
    how.emplace_back("burstiness 1 (no key)");
  // vLLM writes one entry per request sent, failed ones included: an array
  // with fewer entries than completed requests is cut short or edited.
  for (const auto& [key, size] :
       {std::pair<const char*, std::optional<size_t>>{
            "input_lens",
            r.input_lens ? std::optional(r.input_lens->size()) : std::nullopt},
        {"output_lens",
         r.output_lens ? std::optional(r.output_lens->size()) : std::nullopt},
        {"ttfts", r.ttfts ? std::optional(r.ttfts->size()) : std::nullopt},
        {"itls", r.itls ? std::optional(r.itls->size()) : std::nullopt},
        {"start_times",
         r.start_times ? std::optional(r.start_times->size()) : std::nullopt},
        {"errors", r.errors ? std::optional(r.errors->size()) : std::nullopt}}) {
    if (size && static_cast<double>(*size) < completed) {
      return OutOfRange(
          path, key, absl::StrFormat("an array of %d entries", *size),
          absl::StrFormat("one entry per request sent, at least completed (%s)",
                          JsonNumberText(completed)));
    }
  }
  // Lengths: per-request arrays when present, else totals / completed.
  if (r.input_lens && r.output_lens && !r.input_lens->empty()) {
    RETURN_IF_ERROR(CheckLengths(path, "input_lens", *r.input_lens));
    RETURN_IF_ERROR(CheckLengths(path, "output_lens", *r.output_lens));
    if (r.input_lens->size() != r.output_lens->size()) {
      return OutOfRange(
          path, "output_lens",
          absl::StrFormat("an array of %d entries", r.output_lens->size()),
          absl::StrFormat("one entry per input_lens entry (%d)", r.input_lens->size()));
    }
    c.has_per_request = true;
    for (size_t i = 0; i < r.input_lens->size(); ++i) {
      c.input_lens.push_back(static_cast<int32_t>((*r.input_lens)[i]));
      c.output_lens.push_back(static_cast<int32_t>((*r.output_lens)[i]));
    }
    if (r.start_times) {
      // Send order = array order: finite and nondecreasing.
      const std::vector<double>& t = *r.start_times;
      for (size_t i = 0; i < t.size(); ++i) {
        if (!std::isfinite(t[i]) || (i > 0 && t[i] < t[i - 1])) {
          return OutOfRange(path, absl::StrFormat("start_times[%d]", i),
                            JsonNumberText(t[i]),
                            "finite seconds, nondecreasing in send order");
        }
      }
      if (!t.empty() && t.back() - t.front() > 1e9) {
        return OutOfRange(path, absl::StrFormat("start_times[%d]", t.size() - 1),
                          JsonNumberText(t.back()), "at most 1e9 s after start_times[0]");
      }
      c.start_times = t;
      how.emplace_back("send times from start_times");
    }
    if (r.errors) c.errors = *r.errors;
    if (r.ttfts) {
      const std::vector<double>& t = *r.ttfts;
      if (t.size() != r.input_lens->size()) {
        return OutOfRange(
            path, "ttfts", absl::StrFormat("an array of %d entries", t.size()),
            absl::StrFormat("one entry per input_lens entry (%d)", r.input_lens->size()));
      }
      for (size_t i = 0; i < t.size(); ++i) {
        if (!std::isfinite(t[i]) || t[i] < 0 || t[i] > 1e9) {
          return OutOfRange(path, absl::StrFormat("ttfts[%d]", i), JsonNumberText(t[i]),
                            "finite seconds, 0..1e9");
        }
      }
      c.ttfts = t;
    }
    // The arrays must agree with the summary the medians came from: vLLM
    // sums output_lens into total_output_tokens (failed requests add 0) and
    // counts the requests without an error as completed.
    // vLLM's total_input_tokens sums the input lengths of the successful
    // requests only (a failed request's output_lens entry is 0, its
    // input_lens entry is not), so with an errors list the input sum is
    // taken over the requests without an error.
    for (const auto& [lens_key, total_key, lens] :
         {std::tuple<const char*, const char*, const std::vector<double>*>{
              "input_lens", "total_input_tokens", &*r.input_lens},
          {"output_lens", "total_output_tokens", &*r.output_lens}}) {
      auto it = r.metrics.find(total_key);
      if (it == r.metrics.end()) continue;
      double sum = 0;
      double sum_ok = 0;
      for (size_t i = 0; i < lens->size(); ++i) {
        sum += (*lens)[i];
        if (!r.errors || (*r.errors)[i].empty()) sum_ok += (*lens)[i];
      }
      if (sum != it->second && sum_ok != it->second) {
        return OutOfRange(path, lens_key, absl::StrFormat("entries summing to %.0f", sum),
                          absl::StrFormat("entries summing to %s (%s)", total_key,
                                          JsonNumberText(it->second)));
      }
    }
    if (r.errors) {
      const auto ok = std::count(r.errors->begin(), r.errors->end(), std::string());
      if (static_cast<double>(ok) != completed) {
        return OutOfRange(
            path, "errors", absl::StrFormat("%d empty (successful) entries", ok),
            absl::StrFormat("one empty entry per completed request (completed %s)",
                            JsonNumberText(completed)));
      }
    }
    c.input_tokens = Mean(*r.input_lens);
    c.output_tokens = Mean(*r.output_lens);
    c.fixed_lengths = AllEqual(*r.input_lens) && AllEqual(*r.output_lens);
    how.emplace_back("lengths from input_lens/output_lens");
  } else {
    constexpr std::string_view kTotalRange = "an integer token count >= 0";
    ASSIGN_OR_RETURN(std::optional<double> in,
                     CheckedNumber(r, path, "total_input_tokens", count, kTotalRange));
    ASSIGN_OR_RETURN(std::optional<double> out,
                     CheckedNumber(r, path, "total_output_tokens", count, kTotalRange));
    if (!in || !out) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: keys total_input_tokens/total_output_tokens (or per-request input_lens/"
          "output_lens) are needed to infer the request lengths",
          path));
    }
    c.input_tokens = *in / completed;
    c.output_tokens = *out / completed;
    for (const auto& [key, mean] :
         {std::pair<const char*, double>{"total_input_tokens", c.input_tokens},
          {"total_output_tokens", c.output_tokens}}) {
      if (mean > kMaxInt32) {
        return OutOfRange(path, key, JsonNumberText(r.metrics.at(key)),
                          "at most 2147483647 tokens per completed request");
      }
    }
    c.fixed_lengths = c.input_tokens == std::floor(c.input_tokens) &&
                      c.output_tokens == std::floor(c.output_tokens);
    how.emplace_back("lengths from total_*_tokens / completed");
  }
  if (r.ttfts) c.has_per_request = true;
  // vLLM writes 0 for a metric no request produced (median TPOT of
  // one-token outputs): 0 means "not measured" and is not fitted.
  constexpr std::string_view kMetricRange = "a finite number >= 0; 0: not measured";
  double* const targets[] = {&c.output_throughput, &c.total_throughput, &c.median_ttft_ms,
                             &c.median_tpot_ms,    &c.mean_ttft_ms,     &c.p99_ttft_ms,
                             &c.mean_tpot_ms,      &c.median_itl_ms,    &c.p99_itl_ms};
  const char* const keys[] = {
      "output_throughput", "total_token_throughput", "median_ttft_ms",
      "median_tpot_ms",    "mean_ttft_ms",           "p99_ttft_ms",
      "mean_tpot_ms",      "median_itl_ms",          "p99_itl_ms"};
  for (size_t i = 0; i < std::size(keys); ++i) {
    ASSIGN_OR_RETURN(std::optional<double> v,
                     CheckedNumber(r, path, keys[i], non_negative, kMetricRange));
    *targets[i] = v.value_or(0);
    // A latency of one request cannot outlast the whole run.
    if (v && duration && absl::EndsWith(keys[i], "_ms") && *v > *duration * 1e3 * 1.001) {
      return OutOfRange(
          path, keys[i], JsonNumberText(*v),
          absl::StrFormat("a latency no longer than the run (duration %s s)",
                          JsonNumberText(*duration)));
    }
  }
  // vLLM writes the throughputs as the totals over the duration: a value
  // that is not that quotient (a hand edit, another tool's field) would be
  // fitted as measured.
  if (duration) {
    const auto total = [&r](const char* key) -> std::optional<double> {
      auto it = r.metrics.find(key);
      if (it == r.metrics.end()) return std::nullopt;
      return it->second;
    };
    const std::optional<double> in = total("total_input_tokens");
    const std::optional<double> out = total("total_output_tokens");
    const std::pair<const char*, std::optional<double>> rates[] = {
        {"output_throughput",
         out ? std::optional<double>(*out / *duration) : std::nullopt},
        {"total_token_throughput",
         in && out ? std::optional<double>((*in + *out) / *duration) : std::nullopt}};
    for (const auto& [key, expect] : rates) {
      auto it = r.metrics.find(key);
      if (!expect || it == r.metrics.end() || it->second == 0 || *expect <= 0) continue;
      if (std::abs(it->second / *expect - 1) > 0.01) {
        return OutOfRange(
            path, key, JsonNumberText(it->second),
            absl::StrFormat("within 1%% of %s / duration (%.6g tok/s), as vLLM writes it",
                            std::string_view(key) == "output_throughput"
                                ? "total_output_tokens"
                                : "(total_input_tokens + total_output_tokens)",
                            *expect));
      }
    }
  }
  if (c.output_throughput <= 0) {
    if (duration) {
      c.output_throughput = c.output_tokens * completed / *duration;
      how.emplace_back("output_throughput from total_output_tokens / duration");
    }
  }
  c.inferred = absl::StrJoin(how, "; ");
  return c;
}

absl::StatusOr<std::vector<Measurement>> CellMeasurements(const ImportedCell& cell,
                                                          const std::string& run_id,
                                                          double tolerance_pct) {
  const bool open_loop = std::isfinite(cell.request_rate);
  // vLLM takes a request's start time after the concurrency semaphore: with
  // a limit (closed loop, or an open loop with max_concurrency) the start
  // times record when the measured server freed a slot, so replaying them
  // would feed the measured speed into the prediction. Only an unlimited
  // open loop's start times are the client's own schedule.
  const bool replay_sends =
      open_loop && cell.max_concurrency == 0 && !cell.start_times.empty();
  ClientMethod client;
  int left_out = 0;          // requests with an error: not replayed
  int unmeasured = 0;        // replayed for their load, not in the metrics
  double kept_fraction = 1;  // of the file's requests
  std::vector<double> kept_ttfts_ms;
  if (!cell.fixed_lengths || (replay_sends && !cell.input_lens.empty())) {
    if (cell.input_lens.empty()) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "%s: request lengths vary (mean %.1f in / %.1f out) and the file has no "
          "per-request input_lens/output_lens to replay (save it with "
          "--save-detailed), or use fixed lengths (random dataset, range ratio 0, "
          "--ignore-eos)",
          cell.path, cell.input_tokens, cell.output_tokens));
    }
    // Replay the measured lengths. A request with an error is left out (the
    // server refused or lost it). One without an error that streamed no
    // token was still prefilled and ended at once (an end-of-sequence first
    // token under greedy sampling): it is replayed as a one-token request
    // for the load it put on the server and left out of the metrics, as
    // the file's client left it out of its TPOT (older clients count its
    // TTFT as 0; the median TTFT below is taken over the measured ones).
    double in_sum = 0, out_sum = 0;
    double first_send = 0;
    int measured = 0;
    for (size_t i = 0; i < cell.input_lens.size(); ++i) {
      if (cell.input_lens[i] < 1) continue;
      if (i < cell.errors.size() && !cell.errors[i].empty()) continue;
      const bool streamed = cell.output_lens[i] >= 1;
      if (!streamed) client.add_unmeasured(client.input_lens_size());
      client.add_input_lens(cell.input_lens[i]);
      client.add_output_lens(streamed ? cell.output_lens[i] : 1);
      if (replay_sends) {
        if (client.send_times_s_size() == 0) first_send = cell.start_times[i];
        client.add_send_times_s(cell.start_times[i] - first_send);
      }
      if (!streamed) continue;
      ++measured;
      in_sum += cell.input_lens[i];
      out_sum += cell.output_lens[i];
      if (!cell.ttfts.empty()) kept_ttfts_ms.push_back(cell.ttfts[i] * 1e3);
    }
    if (measured == 0) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "%s: no request in input_lens/output_lens has both input and output tokens",
          cell.path));
    }
    const int n = client.input_lens_size();
    left_out = static_cast<int>(cell.input_lens.size()) - n;
    unmeasured = client.unmeasured_size();
    kept_fraction = static_cast<double>(n) / static_cast<double>(cell.input_lens.size());
    client.set_num_prompts(n);
    client.set_input_tokens(
        std::max(1, static_cast<int32_t>(std::lround(in_sum / measured))));
    client.set_output_tokens(
        std::max(1, static_cast<int32_t>(std::lround(out_sum / measured))));
    client.set_dataset(absl::StrFormat(
        "per-request lengths%s from the result file (%d requests%s%s)",
        replay_sends ? " and send times" : "", n,
        left_out > 0 ? absl::StrFormat(", %d with an error left out", left_out)
                     : std::string(),
        unmeasured > 0
            ? absl::StrFormat(", %d that streamed no token replayed as one-token "
                              "requests and left out of the metrics",
                              unmeasured)
            : std::string()));
  } else {
    client.set_num_prompts(static_cast<int32_t>(cell.num_prompts));
    client.set_input_tokens(static_cast<int32_t>(cell.input_tokens));
    client.set_output_tokens(static_cast<int32_t>(cell.output_tokens));
    client.set_dataset("random (from the result file)");
  }
  if (open_loop) {
    client.set_kind(ClientMethod::BENCH_SERVE_OPEN_LOOP);
    // Drawn arrivals: the kept requests are a thinning of the file's
    // process, which (Poisson or Gamma renewal alike, to first order) runs
    // at the rate times the kept fraction.
    client.set_request_rate(client.send_times_s_size() == 0
                                ? cell.request_rate * kept_fraction
                                : cell.request_rate);
    if (left_out > 0 && client.send_times_s_size() == 0) {
      client.set_dataset(
          absl::StrFormat("%s; sent at %g req/s, the file's %g x %d/%d kept",
                          client.dataset(), client.request_rate(), cell.request_rate,
                          client.num_prompts(), cell.input_lens.size()));
    }
    client.set_burstiness(cell.burstiness);
    client.set_max_concurrency(cell.max_concurrency);  // 0: no limit
  } else {
    client.set_kind(ClientMethod::BENCH_SERVE_CLOSED_LOOP);
    client.set_max_concurrency(cell.max_concurrency > 0
                                   ? cell.max_concurrency
                                   : static_cast<int32_t>(client.num_prompts()));
  }
  client.set_ignore_eos(true);
  client.set_client_version("vllm bench serve");
  const std::string stem = !cell.id_stem.empty()
                               ? cell.id_stem
                               : std::filesystem::path(cell.path).filename().string();
  std::vector<Measurement> out;
  auto add = [&](servesim::proto::Metric metric, double value, const char* unit,
                 const char* key, double sigma, bool fit = true) {
    if (!(value > 0)) return;
    Measurement m;
    m.set_id(absl::StrFormat("%s/%s", stem, MetricName(metric)));
    m.set_run(run_id);
    m.set_metric(metric);
    m.set_value(value);
    m.set_unit(unit);
    *m.mutable_client() = client;
    m.mutable_provenance()->set_writeup("user bench file");
    m.mutable_provenance()->set_section(cell.path);
    m.mutable_provenance()->set_cell(key);
    m.mutable_provenance()->set_note(cell.inferred);
    m.set_tolerance_pct(fit ? tolerance_pct : 0);
    m.set_tolerance_rule(fit ? absl::StrFormat("calibrate: within %g%%", tolerance_pct)
                             : std::string("reported, not fitted"));
    m.set_fit(fit);
    m.set_rel_sigma(sigma);
    out.push_back(std::move(m));
  };
  // An open loop whose arrivals are drawn (not replayed) has a duration that
  // follows the draw: its throughput is known to ~1/sqrt(requests), and
  // vLLM's newer clients also rescale the draw to end at N / rate.
  const double throughput_sigma =
      open_loop && client.send_times_s_size() == 0
          ? std::max(0.03, 1.0 / std::sqrt(static_cast<double>(client.num_prompts())))
          : 0.03;
  add(servesim::proto::OUTPUT_THROUGHPUT, cell.output_throughput, "tok/s",
      "output_throughput", throughput_sigma);
  // TTFT statistics over the measured requests: the file's, unless some
  // were left out or unmeasured and the file has the per-request ttfts to
  // take them again (older clients count a request that streamed no token
  // with a TTFT of 0). numpy's statistics, as vLLM's client takes them.
  double median_ttft_ms = cell.median_ttft_ms, mean_ttft_ms = cell.mean_ttft_ms;
  double p99_ttft_ms = cell.p99_ttft_ms;
  const char* median_key = "median_ttft_ms";
  const char* mean_key = "mean_ttft_ms";
  const char* p99_key = "p99_ttft_ms";
  if (left_out + unmeasured > 0 && !kept_ttfts_ms.empty()) {
    const LatencySummary t = Summarize(kept_ttfts_ms);
    median_ttft_ms = t.median_ms;
    mean_ttft_ms = t.mean_ms;
    p99_ttft_ms = t.p99_ms;
    median_key = "median of ttfts over the measured requests";
    mean_key = "mean of ttfts over the measured requests";
    p99_key = "p99 of ttfts over the measured requests";
  }
  add(servesim::proto::MEDIAN_TTFT_MS, median_ttft_ms, "ms", median_key, 0.03);
  add(servesim::proto::MEDIAN_TPOT_MS, cell.median_tpot_ms, "ms", "median_tpot_ms", 0.03);
  // Reported beside the fitted three: the rest of the latency summary. A
  // request that streamed fewer than two tokens has no TPOT or ITL, so the
  // file's TPOT and ITL statistics are over the measured requests already.
  add(servesim::proto::MEAN_TTFT_MS, mean_ttft_ms, "ms", mean_key, 0.03, false);
  add(servesim::proto::P99_TTFT_MS, p99_ttft_ms, "ms", p99_key, 0.03, false);
  add(servesim::proto::MEAN_TPOT_MS, cell.mean_tpot_ms, "ms", "mean_tpot_ms", 0.03,
      false);
  add(servesim::proto::MEDIAN_ITL_MS, cell.median_itl_ms, "ms", "median_itl_ms", 0.03,
      false);
  add(servesim::proto::P99_ITL_MS, cell.p99_itl_ms, "ms", "p99_itl_ms", 0.03, false);
  return out;
}

}  // namespace servesim
