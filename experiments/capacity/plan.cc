#include "experiments/capacity/plan.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <tuple>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "experiments/capacity/saturation.h"
#include "sim/base/json_writer.h"
#include "sim/base/parallel.h"
#include "sim/base/status_macros.h"

namespace servesim {
namespace {

// The installed Abseil has its own string_view (not std::string_view).
absl::string_view A(std::string_view s) { return {s.data(), s.size()}; }

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

int IndexOf(const std::vector<std::string>& names, std::string_view name) {
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] == name) return static_cast<int>(i);
  }
  return -1;
}

std::string_view OpText(SloTerm::Op op) {
  switch (op) {
    case SloTerm::Op::kLe:
      return "<=";
    case SloTerm::Op::kLt:
      return "<";
    case SloTerm::Op::kGe:
      return ">=";
    case SloTerm::Op::kGt:
      return ">";
  }
  return "?";
}

// The opposite comparison, for "missed" text: value > threshold.
std::string_view MissText(SloTerm::Op op) {
  switch (op) {
    case SloTerm::Op::kLe:
      return ">";
    case SloTerm::Op::kLt:
      return ">=";
    case SloTerm::Op::kGe:
      return "<";
    case SloTerm::Op::kGt:
      return "<=";
  }
  return "?";
}

std::string Num(double v, int digits = 4) {
  if (std::isnan(v)) return "-";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return absl::StrFormat("%.*g", digits, v);
}

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// A value of `metric`: times (*_ms) of 10 s and more in s, min or h (not
// "1.855e+08"); other values as Num.
std::string MetricText(std::string_view metric, double v) {
  if (!EndsWith(metric, "_ms") || !std::isfinite(v) || std::abs(v) < 1e4) return Num(v);
  if (std::abs(v) < 6e5) return absl::StrCat(Num(v / 1e3, 3), " s");
  if (std::abs(v) < 3.6e7) return absl::StrCat(Num(v / 6e4, 3), " min");
  return absl::StrCat(Num(v / 3.6e6, 3), " h");
}

// A latency whose value for one request alone on an idle replica is a
// floor no fleet can beat (more replicas only remove queueing).
bool HasSingleRequestFloor(const SloTerm& t) {
  if (t.op != SloTerm::Op::kLe && t.op != SloTerm::Op::kLt) return false;
  if (absl::StartsWith(t.metric, "std_")) return false;
  for (const char* m : {"_ttft_ms", "_tpot_ms", "_itl_ms", "_e2el_ms"}) {
    if (EndsWith(t.metric, m)) return true;
  }
  return false;
}

constexpr char kNotSearched[] = "not searched";

// " TP4", " TP2 PP2 DP4", or "" for one chip.
std::string ParallelSuffix(int tp, int pp, int dp) {
  return absl::StrCat(tp > 1 ? absl::StrCat(" TP", tp) : "",
                      pp > 1 ? absl::StrCat(" PP", pp) : "",
                      dp > 1 ? absl::StrCat(" DP", dp) : "");
}

std::string FleetLabel(const std::vector<FleetPart>& fleet) {
  std::vector<std::string> parts;
  parts.reserve(fleet.size());
  for (const FleetPart& p : fleet)
    parts.push_back(
        absl::StrCat(p.count, " x ", p.device,
                     ParallelSuffix(p.tensor_parallel_size, p.pipeline_parallel_size,
                                    p.data_parallel_size)));
  return absl::StrJoin(parts, " + ");
}

// The PlanDevice a fleet part runs on (same device and TP); nullptr if none.
const PlanDevice* FindPlanDevice(const std::vector<PlanDevice>& devices,
                                 const FleetPart& part) {
  for (const PlanDevice& d : devices) {
    if (d.device == part.device && d.tensor_parallel_size == part.tensor_parallel_size)
      return &d;
  }
  return nullptr;
}

FleetPart Part(const PlanDevice& d, int count) {
  return FleetPart{d.device,
                   count,
                   d.offer.usd_per_hour,
                   d.tensor_parallel_size,
                   d.pipeline_parallel_size,
                   d.data_parallel_size};
}

}  // namespace

std::string PlanDeviceLabel(const PlanDevice& d) {
  return absl::StrCat(d.device,
                      ParallelSuffix(d.tensor_parallel_size, d.pipeline_parallel_size,
                                     d.data_parallel_size));
}

bool SloTerm::Meets(double value) const {
  if (std::isnan(value)) return false;
  switch (op) {
    case Op::kLe:
      return value <= threshold;
    case Op::kLt:
      return value < threshold;
    case Op::kGe:
      return value >= threshold;
    case Op::kGt:
      return value > threshold;
  }
  return false;
}

absl::StatusOr<std::vector<SloTerm>> ParseSlo(
    std::string_view text, const std::vector<std::string>& metric_names) {
  std::vector<SloTerm> terms;
  for (absl::string_view raw : absl::StrSplit(A(text), ',')) {
    const absl::string_view t = absl::StripAsciiWhitespace(raw);
    if (t.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--slo '", A(text),
                       "': empty term (a stray comma?); terms are NAME<=VALUE "
                       "separated by commas"));
    }
    SloTerm term;
    term.text = std::string(t);
    size_t pos = t.find_first_of("<>");
    if (pos == absl::string_view::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("--slo term '", t,
                       "': expected NAME<=VALUE, NAME<VALUE, NAME>=VALUE or NAME>VALUE"));
    }
    const bool lt = t[pos] == '<';
    const bool eq = pos + 1 < t.size() && t[pos + 1] == '=';
    term.op = lt ? (eq ? SloTerm::Op::kLe : SloTerm::Op::kLt)
                 : (eq ? SloTerm::Op::kGe : SloTerm::Op::kGt);
    const std::string name(absl::StripAsciiWhitespace(t.substr(0, pos)));
    std::string value(absl::StripAsciiWhitespace(t.substr(pos + (eq ? 2 : 1))));
    // Metric name.
    if (IndexOf(metric_names, name) >= 0) {
      term.metric = name;
    } else {
      const size_t us = name.rfind('_');
      if (us != std::string::npos) {
        const std::string lat = name.substr(0, us);
        std::string stat = name.substr(us + 1);
        if (stat == "p50") stat = "median";
        term.metric = absl::StrCat(stat, "_", lat, "_ms");
      }
      if (IndexOf(metric_names, term.metric) < 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--slo term '", t, "': unknown metric '", name,
            "'; use <ttft|tpot|itl|e2el>_<mean|median|p50|p90|p99> or one of: ",
            absl::StrJoin(metric_names, ", ")));
      }
    }
    // A time threshold needs its unit: a bare 1 could mean 1 s or 1 ms.
    double scale = 1;
    const bool is_ms = absl::EndsWith(term.metric, "_ms");
    if (is_ms) {
      if (absl::EndsWith(value, "ms")) {
        value.resize(value.size() - 2);
      } else if (absl::EndsWith(value, "us")) {
        value.resize(value.size() - 2);
        scale = 1e-3;
      } else if (absl::EndsWith(value, "s")) {
        value.resize(value.size() - 1);
        scale = 1e3;
      } else if (double bare; absl::SimpleAtod(value, &bare) && std::isfinite(bare)) {
        return absl::InvalidArgumentError(
            absl::StrCat("--slo term '", t, "': the time '", value,
                         "' has no unit; write it with us, ms or s (e.g. ", value,
                         "ms or ", value, "s)"));
      }
    }
    double v;
    if (!absl::SimpleAtod(value, &v) || !std::isfinite(v)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--slo term '", t, "': '", value, "' is not a finite number",
                       is_ms ? " (a time: NUMBER with unit us, ms or s)" : ""));
    }
    if (v < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--slo term '", t, "': threshold ", value, " is negative (allowed: >= 0)"));
    }
    term.threshold = v * scale;
    for (const SloTerm& prev : terms) {
      if (prev.metric == term.metric && prev.op == term.op) {
        return absl::InvalidArgumentError(
            absl::StrCat("--slo term '", t, "': ", term.metric, " is bounded twice ('",
                         prev.text, "'); give it once"));
      }
    }
    terms.push_back(std::move(term));
  }
  if (terms.empty()) return absl::InvalidArgumentError("--slo: no terms");
  return terms;
}

proto::ExperimentConfig FleetExperiment(const proto::ExperimentConfig& base,
                                        const std::vector<FleetPart>& fleet,
                                        const std::vector<PlanDevice>& devices) {
  proto::ExperimentConfig c = base;
  proto::FleetConfig* f = c.mutable_fleet();
  f->clear_replicas();
  for (const FleetPart& p : fleet) {
    proto::FleetReplica* r = f->add_replicas();
    *r->mutable_server() = base.server();
    r->mutable_server()->set_device(p.device);
    if (p.tensor_parallel_size > 1)
      r->mutable_server()->set_tensor_parallel_size(p.tensor_parallel_size);
    for (const PlanDevice& d : devices) {
      if (d.device == p.device && !d.calibration_profile.empty()) {
        r->mutable_server()->set_calibration_profile(d.calibration_profile);
      }
    }
    r->set_count(p.count);
  }
  c.set_name(
      absl::StrCat(base.name().empty() ? "plan" : base.name(), ": ", FleetLabel(fleet)));
  return c;
}

namespace {

// Simulates one candidate and grades it.
PlanCandidate EvaluateOnce(const PlanOptions& o, const PointRunner& runner,
                           std::string group, std::vector<FleetPart> fleet) {
  PlanCandidate c;
  c.group = std::move(group);
  c.label = FleetLabel(fleet);
  for (const FleetPart& p : fleet) c.num_replicas += p.count;
  c.usd_per_hour = FleetUsdPerHour(fleet);
  c.fleet = std::move(fleet);
  c.slo_values.assign(o.slo.size(), kNaN);
  absl::StatusOr<std::vector<double>> r =
      runner.run(FleetExperiment(o.base, c.fleet, o.devices));
  if (r.ok() && r->size() != runner.metric_names.size()) {
    r = absl::InternalError(absl::StrCat("runner returned ", r->size(),
                                         " metrics, expected ",
                                         runner.metric_names.size()));
  }
  if (!r.ok()) {
    c.error = std::string(r.status().message());
    c.does_not_fit = absl::IsResourceExhausted(r.status());
    return c;
  }
  c.ran = true;
  c.metrics = *std::move(r);
  c.met = true;
  for (size_t k = 0; k < o.slo.size(); ++k) {
    const SloTerm& t = o.slo[k];
    const double v = c.metrics[IndexOf(runner.metric_names, t.metric)];
    c.slo_values[k] = v;
    if (!t.Meets(v)) {
      c.met = false;
      c.missed.push_back(absl::StrCat(t.metric, " ", MetricText(t.metric, v), " ",
                                      A(MissText(t.op)), " ",
                                      MetricText(t.metric, t.threshold)));
    }
  }
  // A request the server rejected (too long for max_model_len or the KV
  // cache) is not served: no fleet meets an SLO while any is rejected.
  const int failed = IndexOf(runner.metric_names, "failed");
  if (failed >= 0 && c.metrics[failed] > 0) {
    c.met = false;
    c.rejected_requests = c.metrics[failed];
    c.missed.push_back(absl::StrCat(Num(c.metrics[failed]),
                                    " requests rejected by the server (longer than "
                                    "max_model_len or the KV cache)"));
  }
  const int out = IndexOf(runner.metric_names, "output_throughput");
  const int tot = IndexOf(runner.metric_names, "total_token_throughput");
  c.output_tokens_per_s = out >= 0 ? c.metrics[out] : kNaN;
  c.total_tokens_per_s = tot >= 0 ? c.metrics[tot] : kNaN;
  c.usd_per_million_output = UsdPerMillionTokens(c.usd_per_hour, c.output_tokens_per_s);
  c.usd_per_million_total = UsdPerMillionTokens(c.usd_per_hour, c.total_tokens_per_s);
  // Saturated: the fleet serves under 90% of the offered rate with a
  // queue that grows for the whole run (experiments/capacity/saturation.h).
  const int served = IndexOf(runner.metric_names, "request_throughput");
  const int queue = IndexOf(runner.metric_names, "p99_queueing_ms");
  const int client_wait = IndexOf(runner.metric_names, "p99_client_wait_ms");
  const double offered = o.base.client().request_rate();
  // The requests the run sent (a whole trace has num_prompts 0).
  const int completed = IndexOf(runner.metric_names, "completed");
  const double sent = completed >= 0 && failed >= 0
                          ? c.metrics[completed] + c.metrics[failed]
                          : static_cast<double>(o.base.client().num_prompts());
  const Saturation sat =
      served < 0
          ? Saturation{}
          : FallsBehind(
                offered, sent, c.metrics[served],
                queue >= 0 ? std::optional<double>(c.metrics[queue]) : std::nullopt,
                client_wait >= 0 ? std::optional<double>(c.metrics[client_wait])
                                 : std::nullopt);
  const bool at_client = sat.at_client;
  if (sat.falls_behind) {
    c.saturated = true;
    c.served_requests_per_s = c.metrics[served];
    // A short run drains its queue after the last arrival, so its
    // latencies can look fine; at the offered rate the queue grows
    // without bound and no latency target holds: not met.
    c.met = false;
    const int cap = o.base.client().max_concurrency();
    c.missed.push_back(absl::StrCat(
        "saturated: serves ", Num(c.metrics[served], 3), " of ", Num(offered, 3),
        " req/s offered (the queue grows without bound at that rate",
        at_client && cap > 0
            ? absl::StrCat(": at the client, whose --max-concurrency ", cap,
                           " holds requests back (p99 wait ",
                           MetricText("p99_client_wait_ms", c.metrics[client_wait]),
                           c.metrics[client_wait] < 1e4 ? " ms" : "", ")")
            : "",
        ")"));
  }
  return c;
}

// EvaluateOnce, then the caller's progress hook.
PlanCandidate Evaluate(const PlanOptions& o, const PointRunner& runner, std::string group,
                       std::vector<FleetPart> fleet) {
  PlanCandidate c = EvaluateOnce(o, runner, std::move(group), std::move(fleet));
  if (o.on_candidate) o.on_candidate(c);
  return c;
}

struct GroupWork {
  PlanGroup group;
  std::vector<PlanCandidate> candidates;  // local; indices fixed up on merge
};

// `bound_usd_per_hour`: the device's chosen fleet at a smaller TP (+inf
// when none); a group whose one replica costs as much is not searched.
GroupWork SearchSingle(const PlanOptions& o, const PointRunner& runner,
                       const PlanDevice& d, double bound_usd_per_hour) {
  GroupWork w;
  w.group.group = PlanDeviceLabel(d);
  w.group.tensor_parallel_size = d.tensor_parallel_size;
  if (d.offer.usd_per_hour >= bound_usd_per_hour) {
    w.group.reason =
        absl::StrCat(kNotSearched, ": one replica costs $", Num(d.offer.usd_per_hour, 6),
                     "/h, no less than the ", d.device,
                     " fleet already chosen at a smaller "
                     "tensor parallel size ($",
                     Num(bound_usd_per_hour, 6), "/h)");
    return w;
  }
  for (int n = 1; n <= o.max_replicas; ++n) {
    w.candidates.push_back(Evaluate(o, runner, w.group.group, {Part(d, n)}));
    const PlanCandidate& c = w.candidates.back();
    const int idx = static_cast<int>(w.candidates.size()) - 1;
    w.group.candidates.push_back(idx);
    if (!c.ran) {
      w.group.reason = n == 1 ? absl::StrCat("cannot serve: ", c.error)
                              : absl::StrCat(c.label, " failed: ", c.error);
      return w;
    }
    if (c.met) {
      w.group.chosen = idx;
      if (idx > 0) w.group.one_fewer.push_back(idx - 1);
      return w;
    }
    if (n == 1 && c.rejected_requests > 0) {
      w.group.reason = absl::StrCat(
          "cannot serve the workload: one replica rejects ", Num(c.rejected_requests),
          " requests (longer than max_model_len or the KV cache), and so does any number "
          "of them (a request does not span replicas): raise --max-model-len, use a "
          "larger tensor parallel size or shorter prompts");
      return w;
    }
    if (n == 1) {
      // Each request alone on one idle replica (client concurrency 1): a
      // latency term it misses is unattainable at any fleet size.
      proto::ExperimentConfig alone = FleetExperiment(o.base, {Part(d, 1)}, o.devices);
      alone.mutable_client()->set_max_concurrency(1);
      absl::StatusOr<std::vector<double>> floor = runner.run(alone);
      if (floor.ok() && floor->size() == runner.metric_names.size()) {
        std::vector<std::string> unattainable;
        for (const SloTerm& t : o.slo) {
          const double v = (*floor)[IndexOf(runner.metric_names, t.metric)];
          if (HasSingleRequestFloor(t) && !t.Meets(v)) {
            unattainable.push_back(absl::StrCat(
                "single-request ", t.metric, " ", MetricText(t.metric, v), " ",
                A(MissText(t.op)), " ", MetricText(t.metric, t.threshold)));
          }
        }
        if (!unattainable.empty()) {
          w.group.reason = absl::StrCat(
              "unattainable on ", w.group.group, ": ", absl::StrJoin(unattainable, ", "),
              " (each request alone on an idle replica; no fleet size beats it)");
          // A random workload's prompts beyond every fitted cell's: the
          // verdict rests on extrapolated prefill.
          const proto::ClientConfig& cl = o.base.client();
          const int64_t longest =
              cl.trace().empty() ? static_cast<int64_t>(cl.random_input_len() *
                                                        (1 + cl.random_range_ratio()))
                                 : 0;
          if (d.fitted_max_input_tokens > 0 && longest > d.fitted_max_input_tokens) {
            absl::StrAppend(
                &w.group.reason, "; beyond the fit: its profile saw prompts of at most ",
                d.fitted_max_input_tokens, " tokens, this workload's reach ", longest,
                ", so the prefill behind this TTFT is extrapolated (how far that held on "
                "measured cells: `servesim validate`, leave_one_input_length_out)");
          }
          return w;
        }
      }
    }
  }
  w.group.reason =
      absl::StrCat("no fleet of up to ", o.max_replicas, " replicas meets the SLO");
  if (!w.candidates.empty() && !w.candidates.back().missed.empty()) {
    // Why the largest misses (a client that holds requests back, ...).
    absl::StrAppend(&w.group.reason, "; ", w.candidates.back().label,
                    " misses: ", absl::StrJoin(w.candidates.back().missed, "; "));
  }
  return w;
}

GroupWork SearchPair(const PlanOptions& o, const PointRunner& runner, const PlanDevice& a,
                     const PlanDevice& b, double bound_usd_per_hour) {
  GroupWork w;
  w.group.group = absl::StrCat(PlanDeviceLabel(a), "+", PlanDeviceLabel(b));
  w.group.tensor_parallel_size = 0;
  struct Cand {
    int i, j;
    double usd;
  };
  std::vector<Cand> cands;
  for (int i = 1; i < o.max_replicas; ++i) {
    for (int j = 1; i + j <= o.max_replicas; ++j) {
      const double usd = i * a.offer.usd_per_hour + j * b.offer.usd_per_hour;
      if (usd < bound_usd_per_hour) cands.push_back({i, j, usd});
    }
  }
  std::sort(cands.begin(), cands.end(), [](const Cand& x, const Cand& y) {
    return std::tie(x.usd, x.i, x.j) < std::tie(y.usd, y.i, y.j);
  });
  for (const Cand& k : cands) {
    // A fleet that contains a missed fleet's replicas plus more may meet;
    // one contained in a missed fleet cannot (more replicas never hurt).
    bool dominated = false;
    for (int idx : w.group.candidates) {
      const PlanCandidate& prev = w.candidates[idx];
      if (!prev.met && prev.fleet[0].count >= k.i && prev.fleet[1].count >= k.j) {
        dominated = true;
      }
    }
    if (dominated) continue;
    w.candidates.push_back(
        Evaluate(o, runner, w.group.group, {Part(a, k.i), Part(b, k.j)}));
    const int idx = static_cast<int>(w.candidates.size()) - 1;
    w.group.candidates.push_back(idx);
    const PlanCandidate& c = w.candidates.back();
    if (!c.ran) {
      w.group.reason = absl::StrCat(c.label, " failed: ", c.error);
      return w;
    }
    if (c.met) {
      w.group.chosen = idx;
      for (int p : w.group.candidates) {
        const auto& f = w.candidates[p].fleet;
        if ((f[0].count == k.i - 1 && f[1].count == k.j) ||
            (f[0].count == k.i && f[1].count == k.j - 1)) {
          w.group.one_fewer.push_back(p);
        }
      }
      return w;
    }
  }
  w.group.reason =
      cands.empty()
          ? "no mixed fleet is cheaper than both devices' own choices"
          : "no mixed fleet cheaper than both devices' own choices meets the SLO";
  return w;
}

}  // namespace

namespace {

// Daily bill of a chosen fleet running `busy_hours` a day (one stretch).
absl::StatusOr<DailyCost> FleetDailyCost(const PlanOptions& o, const PlanCandidate& c,
                                         IdlePolicy policy) {
  // One "request" per second per busy hour carrying the fleet's simulated
  // output tokens per second: tokens a day = tok/s x 3600 x busy hours.
  TrafficProfile profile;
  profile.requests_per_s.assign(24, 0.0);
  for (int h = 0; h < o.busy_hours_per_day; ++h) profile.requests_per_s[h] = 1.0;
  profile.output_tokens_per_request = c.output_tokens_per_s;
  DailyCost total;
  for (const FleetPart& part : c.fleet) {
    const PlanDevice* dev = FindPlanDevice(o.devices, part);
    if (dev == nullptr)
      return absl::InternalError("plan: fleet part of an unknown device");
    ASSIGN_OR_RETURN(DailyCost part_cost,
                     DailyEndpointCost(dev->offer, part.count, profile, policy));
    total.busy_hours = part_cost.busy_hours;
    total.starts = part_cost.starts;
    total.output_tokens_per_day = part_cost.output_tokens_per_day;
    total.startup_hours = std::max(total.startup_hours, part_cost.startup_hours);
    total.billed_hours = std::max(total.billed_hours, part_cost.billed_hours);
    total.usd_per_day += part_cost.usd_per_day;
  }
  total.usd_per_million_output_tokens =
      total.output_tokens_per_day > 0
          ? total.usd_per_day / total.output_tokens_per_day * 1e6
          : std::numeric_limits<double>::infinity();
  return total;
}

}  // namespace

absl::StatusOr<PlanResult> RunPlan(const PlanOptions& o, const PointRunner& runner) {
  if (o.devices.empty()) return absl::InvalidArgumentError("plan: no devices to try");
  if (o.busy_hours_per_day < 1 || o.busy_hours_per_day > 24) {
    return absl::InvalidArgumentError(
        absl::StrCat("--busy-hours: ", o.busy_hours_per_day, " is out of range [1, 24]"));
  }
  if (o.slo.empty()) return absl::InvalidArgumentError("plan: no SLO terms");
  if (o.max_replicas < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max-replicas: ", o.max_replicas, " is not >= 1"));
  }
  for (const SloTerm& t : o.slo) {
    if (IndexOf(runner.metric_names, t.metric) < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("SLO term '", t.text, "': the runner has no metric ", t.metric));
    }
  }
  const int jobs = std::max(1, o.jobs);
  const int nd = static_cast<int>(o.devices.size());
  // The entries of one device (its tensor parallel sizes, increasing) are
  // searched in order by one task: a larger TP is bounded by the smaller
  // ones' choice. Devices run in parallel.
  std::vector<std::vector<int>> by_device;
  for (int i = 0; i < nd; ++i) {
    auto it = std::find_if(by_device.begin(), by_device.end(), [&](const auto& v) {
      return o.devices[v.front()].device == o.devices[i].device;
    });
    if (it == by_device.end()) {
      by_device.push_back({i});
    } else {
      it->push_back(i);
    }
  }
  std::vector<GroupWork> work(nd);
  // Per device: its first group that ran (the smallest TP that fits);
  // mixed pairs are formed over these.
  std::vector<int> representative(by_device.size(), -1);
  ParallelFor(static_cast<int>(by_device.size()), jobs, [&](int k) {
    double bound = kInf;
    for (int i : by_device[k]) {
      work[i] = SearchSingle(o, runner, o.devices[i], bound);
      const GroupWork& g = work[i];
      if (g.group.chosen >= 0)
        bound = std::min(bound, g.candidates[g.group.chosen].usd_per_hour);
      if (representative[k] < 0 && !g.candidates.empty() && g.candidates[0].ran)
        representative[k] = i;
    }
  });

  if (o.mixed_pairs) {
    std::vector<std::pair<int, int>> pairs;
    for (size_t x = 0; x < representative.size(); ++x) {
      for (size_t y = x + 1; y < representative.size(); ++y) {
        if (representative[x] >= 0 && representative[y] >= 0)
          pairs.emplace_back(representative[x], representative[y]);
      }
    }
    std::vector<GroupWork> pw(pairs.size());
    ParallelFor(static_cast<int>(pairs.size()), jobs, [&](int k) {
      auto bound = [&](int d) {
        return work[d].group.chosen >= 0
                   ? work[d].candidates[work[d].group.chosen].usd_per_hour
                   : kInf;
      };
      const auto [a, b] = pairs[k];
      pw[k] =
          SearchPair(o, runner, o.devices[a], o.devices[b], std::min(bound(a), bound(b)));
    });
    for (auto& g : pw) work.push_back(std::move(g));
  }

  PlanResult result;
  result.metric_names = runner.metric_names;
  for (GroupWork& w : work) {
    const int offset = static_cast<int>(result.candidates.size());
    for (auto& c : w.candidates) result.candidates.push_back(std::move(c));
    for (int& i : w.group.candidates) i += offset;
    for (int& i : w.group.one_fewer) i += offset;
    if (w.group.chosen >= 0) w.group.chosen += offset;
    result.groups.push_back(std::move(w.group));
  }
  for (size_t g = 0; g < result.groups.size(); ++g) {
    const int c = result.groups[g].chosen;
    if (c < 0) continue;
    if (result.best_group < 0) {
      result.best_group = static_cast<int>(g);
      continue;
    }
    const PlanCandidate& best =
        result.candidates[result.groups[result.best_group].chosen];
    const PlanCandidate& cur = result.candidates[c];
    if (std::tie(cur.usd_per_hour, cur.num_replicas) <
        std::tie(best.usd_per_hour, best.num_replicas)) {
      result.best_group = static_cast<int>(g);
    }
  }
  if (o.busy_hours_per_day < 24) {
    for (PlanGroup& g : result.groups) {
      if (g.chosen < 0) continue;
      for (IdlePolicy p :
           {IdlePolicy::kAlwaysOn, IdlePolicy::kStop, IdlePolicy::kDelete}) {
        ASSIGN_OR_RETURN(DailyCost d, FleetDailyCost(o, result.candidates[g.chosen], p));
        g.daily.emplace_back(p, d);
      }
    }
  }
  return result;
}

// The offer each replica group of `fleet` pays ("l4: gce g2-standard-4
// on-demand $0.7045/h").
std::string FleetOffers(const PlanOptions& o, const std::vector<FleetPart>& fleet) {
  std::vector<std::string> parts;
  for (const FleetPart& p : fleet) {
    if (const PlanDevice* d = FindPlanDevice(o.devices, p); d != nullptr)
      parts.push_back(absl::StrCat(PlanDeviceLabel(*d), ": ", OfferLabel(d->offer)));
  }
  return absl::StrJoin(parts, "; ");
}

std::string FormatPlanText(const PlanOptions& o, const PlanResult& r) {
  std::string out;
  std::vector<std::string> slo_text;
  for (const SloTerm& t : o.slo) {
    slo_text.push_back(absl::StrCat(t.metric, A(OpText(t.op)), Num(t.threshold, 6)));
  }
  absl::StrAppend(&out, "SLO: ", absl::StrJoin(slo_text, ", "), "\n");
  absl::StrAppend(&out, "Prices:");
  for (const PlanDevice& d : o.devices) {
    absl::StrAppend(&out, " ", PlanDeviceLabel(d), " $", Num(d.offer.usd_per_hour, 6),
                    "/h (", d.offer.kind, d.offer.provider.empty() ? "" : ", ",
                    d.offer.provider, d.offer.region.empty() ? "" : " ", d.offer.region,
                    ")");
    if (!d.price_note.empty()) absl::StrAppend(&out, " [", d.price_note, "]");
    out += ";";
  }
  out.back() = '\n';
  out += "\nCandidates tried:\n";
  std::string header = absl::StrFormat("  %-22s %9s %-5s", "fleet", "$/h", "SLO");
  for (const SloTerm& t : o.slo)
    absl::StrAppend(&header, absl::StrFormat(" %13s", t.metric));
  absl::StrAppend(&header, absl::StrFormat(" %11s %10s %10s  %s\n", "out tok/s",
                                           "$/1M out", "$/1M total", "offer"));
  for (const PlanGroup& g : r.groups) {
    if (g.candidates.empty()) continue;  // the summary below says why
    absl::StrAppend(&out, g.group, ":\n");
    out += header;
    for (int i : g.candidates) {
      const PlanCandidate& c = r.candidates[i];
      std::string line = absl::StrFormat("  %-22s %9.4f %-5s", c.label, c.usd_per_hour,
                                         !c.ran ? "error" : (c.met ? "met" : "miss"));
      for (size_t k = 0; k < c.slo_values.size(); ++k) {
        absl::StrAppend(&line, absl::StrFormat(" %13s", MetricText(o.slo[k].metric,
                                                                   c.slo_values[k])));
      }
      if (c.ran) {
        absl::StrAppend(
            &line,
            absl::StrFormat(" %11s %10s %10s  %s", Num(c.output_tokens_per_s),
                            Num(c.usd_per_million_output), Num(c.usd_per_million_total),
                            FleetOffers(o, c.fleet)));
      } else {
        absl::StrAppend(&line, "  ", c.error);
      }
      out += line;
      if (c.rejected_requests > 0) {
        absl::StrAppend(&out, "  [", Num(c.rejected_requests),
                        " requests rejected: longer than max_model_len or the KV cache]");
      }
      if (c.saturated) {
        absl::StrAppend(&out, "  [saturated: serves ", Num(c.served_requests_per_s, 3),
                        " of ", Num(o.base.client().request_rate(), 3),
                        " req/s; $/1M counts only what it serves]");
      }
      if (i == g.chosen) out += "  <- chosen";
      out += "\n";
    }
  }
  out += "\nCheapest fleet per device:\n";
  std::vector<std::string> not_searched;
  for (size_t gi = 0; gi < r.groups.size(); ++gi) {
    const PlanGroup& g = r.groups[gi];
    if (g.chosen < 0 && g.candidates.empty() &&
        absl::StartsWith(g.reason, kNotSearched)) {
      not_searched.push_back(g.group);
      continue;
    }
    if (g.chosen < 0) {
      absl::StrAppend(&out, "  ", g.group, ": none (", g.reason, ")\n");
      continue;
    }
    const PlanCandidate& c = r.candidates[g.chosen];
    absl::StrAppend(&out, "  ", g.group, ": ", c.label, ", $", Num(c.usd_per_hour, 6),
                    "/h, $", Num(c.usd_per_million_output), " per 1M output tokens, $",
                    Num(c.usd_per_million_total), " per 1M total tokens (",
                    FleetOffers(o, c.fleet), ")\n");
    if (g.one_fewer.empty()) {
      absl::StrAppend(&out, "    (",
                      c.num_replicas == 1 ? "1 replica: the smallest fleet"
                                          : "no smaller fleet was needed",
                      ")\n");
    }
    for (int f : g.one_fewer) {
      const PlanCandidate& m = r.candidates[f];
      absl::StrAppend(&out, "    one replica fewer (", m.label,
                      ") misses: ", m.ran ? absl::StrJoin(m.missed, ", ") : m.error,
                      "\n");
    }
  }
  if (!not_searched.empty()) {
    absl::StrAppend(&out, "  not searched (one replica costs no less than the device's ",
                    "fleet chosen at a smaller tensor parallel size): ",
                    absl::StrJoin(not_searched, ", "), "\n");
  }
  if (o.busy_hours_per_day < 24 && r.best_group >= 0) {
    absl::StrAppend(&out, "\nDaily bill, traffic ", o.busy_hours_per_day,
                    " h a day (one stretch; start-up time billed on each start):\n");
    for (const PlanGroup& g : r.groups) {
      if (g.daily.empty()) continue;
      absl::StrAppend(&out, "  ", g.group, " (", r.candidates[g.chosen].label, ")");
      for (const FleetPart& part : r.candidates[g.chosen].fleet) {
        const PlanDevice* d = FindPlanDevice(o.devices, part);
        if (d != nullptr && d->offer.startup_s <= 0) {
          absl::StrAppend(&out, " [no start-up time on record for ", PlanDeviceLabel(*d),
                          ": counted as 0]");
        }
      }
      out += ":\n";
      for (const auto& [policy, d] : g.daily) {
        absl::StrAppend(
            &out, absl::StrFormat(
                      "    %-17s %12s/day  %6s h billed  $%s/1M out\n",
                      A(IdlePolicyName(policy)), absl::StrCat("$", Num(d.usd_per_day, 6)),
                      Num(d.billed_hours, 4), Num(d.usd_per_million_output_tokens)));
      }
    }
  }
  if (r.best_group >= 0) {
    const PlanCandidate& c = r.candidates[r.groups[r.best_group].chosen];
    absl::StrAppend(&out, "\nCheapest overall: ", c.label, " at $",
                    Num(c.usd_per_hour, 6), "/h\n");
  } else {
    out += "\nNo fleet meets the SLO.\n";
  }
  // Each device's gaps once (a device planned at several TP sizes repeats).
  std::vector<std::string> gap_devices;
  for (const PlanDevice& d : o.devices) {
    if (d.known_gaps.empty() || std::find(gap_devices.begin(), gap_devices.end(),
                                          d.device) != gap_devices.end()) {
      continue;
    }
    if (gap_devices.empty()) {
      out +=
          "\nKnown gaps of the shipped calibration profiles (what `servesim validate` "
          "misses with them; docs/measurement_plan.md has the runs that would settle "
          "them):\n";
    }
    gap_devices.push_back(d.device);
    for (const std::string& g : d.known_gaps) absl::StrAppend(&out, "  ", g, "\n");
  }
  // Server settings no fitted run had, per device shape (each line once).
  std::vector<std::string> said;
  for (const PlanDevice& d : o.devices) {
    for (const std::string& line : d.outside_fit) {
      if (std::find(said.begin(), said.end(), line) != said.end()) continue;
      if (said.empty()) {
        out += "\nServer settings the calibration profiles were not fitted under:\n";
      }
      said.push_back(line);
      absl::StrAppend(&out, "  ", PlanDeviceLabel(d), ": ", line, "\n");
    }
  }
  return out;
}

std::string FormatPlanJson(const PlanOptions& o, const PlanResult& r) {
  JsonWriter w(2);
  w.BeginObject();
  w.Key("slo").BeginArray();
  for (const SloTerm& t : o.slo) {
    w.BeginObject().KV("text", t.text).KV("metric", t.metric).KV("op", OpText(t.op));
    w.KV("threshold", t.threshold).EndObject();
  }
  w.EndArray();
  w.Key("devices").BeginArray();
  for (const PlanDevice& d : o.devices) {
    w.BeginObject()
        .KV("device", d.device)
        .KV("tensor_parallel_size", d.tensor_parallel_size);
    w.KV("pipeline_parallel_size", d.pipeline_parallel_size)
        .KV("data_parallel_size", d.data_parallel_size)
        .KV("chips_per_replica", static_cast<int64_t>(d.tensor_parallel_size) *
                                     d.pipeline_parallel_size * d.data_parallel_size);
    w.KV("price_kind", d.offer.kind);
    w.KV("usd_per_hour", d.offer.usd_per_hour).KV("provider", d.offer.provider);
    w.KV("instance", d.offer.instance).KV("region", d.offer.region);
    w.KV("date", d.offer.date).KV("source", d.offer.source);
    w.KV("price_note", d.price_note);
    w.KV("calibration_profile", d.calibration_profile);
    w.Key("outside_fit").BeginArray();
    for (const std::string& g : d.outside_fit) w.String(g);
    w.EndArray();
    w.Key("known_gaps").BeginArray();
    for (const std::string& g : d.known_gaps) w.String(g);
    w.EndArray();
    w.EndObject();
  }
  w.EndArray();
  w.Key("candidates").BeginArray();
  for (const PlanCandidate& c : r.candidates) {
    w.BeginObject().KV("group", c.group).KV("fleet", c.label);
    w.Key("replicas").BeginArray();
    for (const FleetPart& p : c.fleet) {
      w.BeginObject().KV("device", p.device).KV("count", p.count);
      w.KV("tensor_parallel_size", p.tensor_parallel_size);
      w.KV("pipeline_parallel_size", p.pipeline_parallel_size)
          .KV("data_parallel_size", p.data_parallel_size)
          .KV("chips_per_replica", static_cast<int64_t>(p.tensor_parallel_size) *
                                       p.pipeline_parallel_size * p.data_parallel_size);
      w.KV("usd_per_hour", p.usd_per_hour);
      if (const PlanDevice* d = FindPlanDevice(o.devices, p); d != nullptr) {
        w.KV("price_kind", d->offer.kind).KV("offer", OfferLabel(d->offer));
      }
      w.EndObject();
    }
    w.EndArray();
    w.KV("num_replicas", c.num_replicas).KV("usd_per_hour", c.usd_per_hour);
    w.KV("status", c.ran ? (c.met ? "met" : "missed") : "error").KV("error", c.error);
    w.Key("slo_values").BeginArray();
    for (double v : c.slo_values) w.Double(v);
    w.EndArray();
    w.Key("missed").BeginArray();
    for (const auto& m : c.missed) w.String(m);
    w.EndArray();
    w.KV("output_tokens_per_s", c.output_tokens_per_s);
    w.KV("total_tokens_per_s", c.total_tokens_per_s);
    w.KV("usd_per_million_output_tokens", c.usd_per_million_output);
    w.KV("usd_per_million_total_tokens", c.usd_per_million_total);
    w.KV("saturated", c.saturated);
    w.Key("metrics").BeginObject();
    for (size_t m = 0; m < c.metrics.size(); ++m) w.KV(r.metric_names[m], c.metrics[m]);
    w.EndObject();
    w.EndObject();
  }
  w.EndArray();
  w.Key("groups").BeginArray();
  for (const PlanGroup& g : r.groups) {
    w.BeginObject().KV("group", g.group);
    w.KV("tensor_parallel_size", g.tensor_parallel_size);
    w.Key("candidates").BeginArray();
    for (int i : g.candidates) w.Int(i);
    w.EndArray();
    w.Key("chosen");
    if (g.chosen >= 0) {
      w.Int(g.chosen);
    } else {
      w.Null();
    }
    w.Key("one_fewer").BeginArray();
    for (int i : g.one_fewer) w.Int(i);
    w.EndArray();
    w.KV("reason", g.reason);
    // What would fit (null unless a replica of the group does not fit).
    w.Key("fit");
    if (g.fit.known) {
      w.BeginObject();
      w.KV("largest_fitting_max_model_len", int64_t{g.fit.largest_max_model_len});
      w.KV("smallest_fitting_tensor_parallel_size",
           int64_t{g.fit.smallest_tensor_parallel_size});
      w.Key("quantizations_that_fit").BeginArray();
      for (const std::string& q : g.fit.quantizations) w.String(q);
      w.EndArray();
      w.EndObject();
    } else {
      w.Null();
    }
    w.Key("daily_cost").BeginArray();
    for (const auto& [policy, d] : g.daily) {
      w.BeginObject().KV("policy", IdlePolicyName(policy));
      w.KV("busy_hours", d.busy_hours).KV("starts", d.starts);
      w.KV("startup_hours", d.startup_hours).KV("billed_hours", d.billed_hours);
      w.KV("usd_per_day", d.usd_per_day);
      w.KV("output_tokens_per_day", d.output_tokens_per_day);
      w.KV("usd_per_million_output_tokens", d.usd_per_million_output_tokens);
      w.EndObject();
    }
    w.EndArray();
    w.EndObject();
  }
  w.EndArray();
  w.Key("best");
  if (r.best_group >= 0) {
    w.Int(r.groups[r.best_group].chosen);
  } else {
    w.Null();
  }
  w.EndObject();
  std::string s = w.Take();
  s.push_back('\n');
  return s;
}

}  // namespace servesim
