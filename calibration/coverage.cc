#include "calibration/coverage.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "sim/base/json_writer.h"
#include "sim/base/median.h"

namespace servesim {
namespace {

constexpr const char* kRefit[] = {kLeaveOneInputLengthOut, kLeaveOneConcurrencyOut,
                                  kLeaveOneModelOut};
constexpr const char* kAllPasses[] = {kLeaveOneInputLengthOut, kLeaveOneConcurrencyOut,
                                      kLeaveOneModelOut, kLeaveOneDeviceOut};
constexpr const char* kFamilies[] = {"throughput", "ttft", "tpot"};

bool Usable(const ValidatedPoint& v) {
  return v.excluded.empty() && !v.measured_infeasible && v.measured > 0 &&
         !ValidateMetricFamily(v.metric).empty();
}

// held-out / measured of `v` in `pass`, or NaN.
double Ratio(const ValidatedPoint& v, const std::string& pass) {
  auto it = v.block_held_out.find(pass);
  if (it == v.block_held_out.end() || !(it->second > 0) || !std::isfinite(it->second)) {
    return std::nan("");
  }
  return it->second / v.measured;
}

servesim::proto::StructuralError MakeEntry(const std::string& pass,
                                           const std::string& family,
                                           const std::string& metric,
                                           const std::vector<double>& ratios) {
  servesim::proto::StructuralError se;
  se.set_pass(pass);
  se.set_family(family);
  se.set_metric(metric);
  const int n = static_cast<int>(ratios.size());
  se.set_num_points(n);
  double abs_sum = 0, sq_sum = 0, log_sum = 0;
  std::vector<double> abs_log;
  abs_log.reserve(ratios.size());
  for (double r : ratios) {
    const double l = std::log(r);
    abs_sum += std::abs(r - 1.0);
    sq_sum += l * l;
    log_sum += l;
    abs_log.push_back(std::abs(l));
  }
  se.set_mape(100.0 * abs_sum / n);
  se.set_rms_log_error(std::sqrt(sq_sum / n));
  se.set_mean_log_error(log_sum / n);
  for (double level : kStructuralLevels) {
    auto* q = se.add_abs_log_error_quantiles();
    q->set_level(level);
    q->set_abs_log_error(ConformalQuantile(abs_log, level));
  }
  if (pass == kLeaveOneDeviceOut) {
    std::sort(abs_log.begin(), abs_log.end());
    for (double x : abs_log) se.add_abs_log_errors(x);
  }
  return se;
}

struct Acc {
  int n = 0, in50 = 0, in90 = 0;
  std::vector<double> h50, h90;
  void Add(double abs_err, double half50, double half90) {
    ++n;
    in50 += abs_err <= half50;
    in90 += abs_err <= half90;
    h50.push_back(half50);
    h90.push_back(half90);
  }
  MetricCoverage Take(const std::string& metric) const {
    MetricCoverage m;
    m.metric = metric;
    m.num_predictions = n;
    m.judged = n >= kMinJudgedPredictions;
    if (n > 0) {
      m.coverage_50 = static_cast<double>(in50) / n;
      m.coverage_90 = static_cast<double>(in90) / n;
      m.median_half_50 = Median(h50);
      m.median_half_90 = Median(h90);
      m.wilson_50 = WilsonInterval(in50, n);
      m.wilson_90 = WilsonInterval(in90, n);
    }
    m.in_target = m.judged && InTarget(m.coverage_50, kTarget50) &&
                  InTarget(m.coverage_90, kTarget90);
    return m;
  }
};

}  // namespace

bool InTarget(double coverage, const CoverageTarget& t) {
  // The printed percentages are exact ratios: a count k / n on the edge is in.
  return coverage >= t.lo - 1e-12 && coverage <= t.hi + 1e-12;
}

double CalibratedInTargetProbability(int n, const CoverageTarget& t) {
  if (n <= 0) return 0;
  double p = 0;
  const double lp = std::log(t.level), lq = std::log1p(-t.level);
  for (int k = 0; k <= n; ++k) {
    if (!InTarget(static_cast<double>(k) / n, t)) continue;
    p += std::exp(std::lgamma(n + 1.0) - std::lgamma(k + 1.0) - std::lgamma(n - k + 1.0) +
                  k * lp + (n - k) * lq);
  }
  return p;
}

std::pair<double, double> WilsonInterval(int k, int n) {
  if (n <= 0) return {0, 1};
  constexpr double kZ = 1.959963984540054;  // two-sided 95%
  const double p = static_cast<double>(k) / n, z2 = kZ * kZ;
  const double centre = (p + z2 / (2.0 * n)) / (1 + z2 / n);
  const double half = kZ * std::sqrt(p * (1 - p) / n + z2 / (4.0 * n * n)) / (1 + z2 / n);
  return {std::max(0.0, centre - half), std::min(1.0, centre + half)};
}

double ConformalQuantile(std::vector<double> values, double level) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const auto n = static_cast<double>(values.size());
  const double rank = std::min(n, std::ceil((n + 1) * level));
  return values[static_cast<size_t>(std::max(1.0, rank)) - 1];
}

double StructuralQuantileAt(const servesim::proto::StructuralError& e, double level) {
  for (const auto& q : e.abs_log_error_quantiles()) {
    if (q.level() == level) return q.abs_log_error();
  }
  return -1;
}

std::vector<servesim::proto::StructuralError> StructuralErrors(
    const std::vector<ValidatedPoint>& points, const std::string& device,
    const std::string& software_build) {
  std::vector<const ValidatedPoint*> group;
  for (const ValidatedPoint& v : points) {
    if (v.device == device && v.software_build == software_build && Usable(v)) {
      group.push_back(&v);
    }
  }
  // The ratios of the group's points selected by `keep`, over `passes`.
  auto ratios = [&group](std::initializer_list<const char*> passes, auto keep) {
    std::vector<double> out;
    for (const char* pass : passes) {
      for (const ValidatedPoint* v : group) {
        if (!keep(*v)) continue;
        const double r = Ratio(*v, pass);
        if (std::isfinite(r)) out.push_back(r);
      }
    }
    return out;
  };
  std::vector<servesim::proto::StructuralError> out;
  for (const char* pass : kAllPasses) {
    for (const char* family : kFamilies) {
      const std::vector<double> r = ratios({pass}, [family](const ValidatedPoint& v) {
        return ValidateMetricFamily(v.metric) == family;
      });
      if (!r.empty()) out.push_back(MakeEntry(pass, family, "", r));
    }
  }
  for (const char* family : kFamilies) {
    const std::vector<double> r =
        ratios({kRefit[0], kRefit[1], kRefit[2]}, [family](const ValidatedPoint& v) {
          return ValidateMetricFamily(v.metric) == family;
        });
    if (!r.empty()) out.push_back(MakeEntry(kPooledRefitPasses, family, "", r));
  }
  std::set<std::string> metrics;
  for (const ValidatedPoint* v : group) metrics.insert(v->metric);
  for (const std::string& metric : metrics) {
    std::vector<double> r =
        ratios({kRefit[0], kRefit[1], kRefit[2]},
               [&metric](const ValidatedPoint& v) { return v.metric == metric; });
    if (static_cast<int>(r.size()) < kMinMetricErrors) {
      // Too few of its own: the same metric's refit errors of the other
      // groups join them (ComputeCoverage's rule).
      for (const char* pass : kRefit) {
        for (const ValidatedPoint& u : points) {
          if (u.metric != metric || !Usable(u) ||
              (u.device == device && u.software_build == software_build)) {
            continue;
          }
          const double x = Ratio(u, pass);
          if (std::isfinite(x)) r.push_back(x);
        }
      }
    }
    if (static_cast<int>(r.size()) >= kMinMetricErrors) {
      out.push_back(
          MakeEntry(kPooledRefitPasses, ValidateMetricFamily(metric), metric, r));
    }
  }
  return out;
}

std::vector<double> PooledDeviceOutErrors(
    const std::vector<const servesim::proto::StructuralError*>& entries,
    const std::string& family) {
  std::vector<double> out;
  for (const servesim::proto::StructuralError* se : entries) {
    if (se->pass() != kLeaveOneDeviceOut || se->family() != family ||
        !se->metric().empty()) {
      continue;
    }
    out.insert(out.end(), se->abs_log_errors().begin(), se->abs_log_errors().end());
  }
  return out;
}

CoverageReport ComputeCoverage(const ValidationReport& report) {
  const std::vector<ValidatedPoint>& pts = report.points;
  // Every group's entries, for the device-out bands.
  std::map<std::pair<std::string, std::string>,
           std::vector<servesim::proto::StructuralError>>
      entries;
  for (const ValidatedPoint& v : pts) {
    if (!Usable(v)) continue;
    const auto key = std::make_pair(v.device, v.software_build);
    if (!entries.contains(key))
      entries[key] = StructuralErrors(pts, v.device, v.software_build);
  }
  std::map<std::string, Acc> by_metric, by_family;
  Acc all;
  auto add = [&](const ValidatedPoint& v, double abs_err, double h50, double h90) {
    by_metric[v.metric].Add(abs_err, h50, h90);
    by_family[ValidateMetricFamily(v.metric)].Add(abs_err, h50, h90);
    all.Add(abs_err, h50, h90);
  };
  for (const ValidatedPoint& v : pts) {
    if (!Usable(v)) continue;
    const std::string family = ValidateMetricFamily(v.metric);
    // Refit passes: the errors of the group's points outside the point's
    // block, pass by pass; the same metric's refit errors of the other
    // groups (whose fits never saw the point) beside them.
    std::vector<double> of_metric, of_family, of_metric_elsewhere;
    for (const ValidatedPoint& u : pts) {
      if (!Usable(u) || ValidateMetricFamily(u.metric) != family) continue;
      const bool same_group =
          u.device == v.device && u.software_build == v.software_build;
      if (!same_group && u.metric != v.metric) continue;
      for (const char* pass : kRefit) {
        const auto ub = u.block_of.find(pass);
        if (ub == u.block_of.end()) continue;
        if (same_group) {
          const auto own = v.block_of.find(pass);
          if (own != v.block_of.end() && ub->second == own->second) continue;
        }
        const double r = Ratio(u, pass);
        if (!std::isfinite(r)) continue;
        if (!same_group) {
          of_metric_elsewhere.push_back(std::abs(std::log(r)));
          continue;
        }
        of_family.push_back(std::abs(std::log(r)));
        if (u.metric == v.metric) of_metric.push_back(std::abs(std::log(r)));
      }
    }
    if (static_cast<int>(of_metric.size()) < kMinMetricErrors) {
      of_metric.insert(of_metric.end(), of_metric_elsewhere.begin(),
                       of_metric_elsewhere.end());
    }
    const std::vector<double>& band =
        static_cast<int>(of_metric.size()) >= kMinMetricErrors ? of_metric : of_family;
    if (!band.empty()) {
      const double h50 = ConformalQuantile(band, 0.5);
      const double h90 = ConformalQuantile(band, 0.9);
      for (const char* pass : kRefit) {
        const double r = Ratio(v, pass);
        if (!std::isfinite(r)) continue;
        add(v, std::abs(std::log(r)), h50, h90);
      }
    }
    // Device-out: as simulate bands a device without a profile
    // (PooledDeviceOutErrors), the conformal quantile of the other
    // devices' leave_one_device_out errors of the family, pooled.
    const double r = Ratio(v, kLeaveOneDeviceOut);
    if (!std::isfinite(r)) continue;
    std::vector<const servesim::proto::StructuralError*> others;
    for (const auto& [key, list] : entries) {
      if (key.first == v.device) continue;
      for (const auto& se : list) others.push_back(&se);
    }
    const std::vector<double> pooled = PooledDeviceOutErrors(others, family);
    if (pooled.empty()) continue;
    const double h50 = ConformalQuantile(pooled, 0.5);
    const double h90 = ConformalQuantile(pooled, 0.9);
    add(v, std::abs(std::log(r)), h50, h90);
  }
  CoverageReport out;
  for (auto& [metric, acc] : by_metric) out.metrics.push_back(acc.Take(metric));
  for (const char* family : kFamilies) {
    const auto it = by_family.find(family);
    if (it != by_family.end()) out.families.push_back(it->second.Take(family));
  }
  out.overall = all.Take("all");
  return out;
}

namespace {

// "in target", "OUT of target", or "too few to judge ..." (the Wilson
// intervals, percent).
std::string Verdict(const MetricCoverage& m) {
  if (m.judged) return m.in_target ? "in target" : "OUT of target";
  return absl::StrFormat(
      "too few to judge (n < %d; 95%%: [%.0f, %.0f]%%, [%.0f, %.0f]%%)",
      kMinJudgedPredictions, 100 * m.wilson_50.first, 100 * m.wilson_50.second,
      100 * m.wilson_90.first, 100 * m.wilson_90.second);
}

}  // namespace

std::string FormatCoverageText(const CoverageReport& c) {
  std::string out = absl::StrFormat(
      "Interval coverage over the block-held-out predictions (conformal quantile band "
      "sized without the point's block; target 90%%: 80-97%%, 50%%: 40-60%%; judged from "
      "n >= %d, smaller metrics count in their family's row)\n",
      kMinJudgedPredictions);
  absl::StrAppend(
      &out, absl::StrFormat("  %-20s %6s %8s %8s %8s %8s  %s\n", "metric", "n", "cov_50",
                            "cov_90", "q_50", "q_90", "verdict"));
  auto row = [&out](const std::string& name, const MetricCoverage& m) {
    absl::StrAppend(
        &out, absl::StrFormat("  %-20s %6d %7.1f%% %7.1f%% %8.3f %8.3f  %s\n", name,
                              m.num_predictions, 100 * m.coverage_50, 100 * m.coverage_90,
                              m.median_half_50, m.median_half_90, Verdict(m)));
  };
  for (const MetricCoverage& m : c.metrics) row(m.metric, m);
  for (const MetricCoverage& m : c.families) row(absl::StrCat("family:", m.metric), m);
  row(c.overall.metric, c.overall);
  return out;
}

std::string FormatCoverageJson(const CoverageReport& c) {
  JsonWriter w(0);
  w.BeginObject();
  auto obj = [&w](const std::string& name, const MetricCoverage& m) {
    w.Key(name).BeginObject();
    w.KV("num_predictions", static_cast<int64_t>(m.num_predictions))
        .KV("coverage_50", m.coverage_50)
        .KV("coverage_90", m.coverage_90)
        .KV("median_half_width_log_50", m.median_half_50)
        .KV("median_half_width_log_90", m.median_half_90)
        .KV("judged", m.judged)
        .KV("in_target", m.in_target)
        .KV("min_judged_predictions", static_cast<int64_t>(kMinJudgedPredictions));
    w.Key("wilson_95_50")
        .BeginArray()
        .Double(m.wilson_50.first)
        .Double(m.wilson_50.second);
    w.EndArray();
    w.Key("wilson_95_90")
        .BeginArray()
        .Double(m.wilson_90.first)
        .Double(m.wilson_90.second);
    w.EndArray();
    w.EndObject();
  };
  for (const MetricCoverage& m : c.metrics) obj(m.metric, m);
  for (const MetricCoverage& m : c.families) obj(absl::StrCat("family:", m.metric), m);
  obj(c.overall.metric, c.overall);
  w.EndObject();
  return w.Take();
}

}  // namespace servesim
