#include "calibration/coverage.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "sim/base/json_writer.h"

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

double Median(std::vector<double> x) {
  if (x.empty()) return 0;
  std::sort(x.begin(), x.end());
  const size_t n = x.size();
  return n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
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
    if (n > 0) {
      m.coverage_50 = static_cast<double>(in50) / n;
      m.coverage_90 = static_cast<double>(in90) / n;
      m.median_half_50 = Median(h50);
      m.median_half_90 = Median(h90);
    }
    return m;
  }
};

}  // namespace

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
    const std::vector<double> r =
        ratios({kRefit[0], kRefit[1], kRefit[2]},
               [&metric](const ValidatedPoint& v) { return v.metric == metric; });
    if (static_cast<int>(r.size()) >= kMinMetricErrors) {
      out.push_back(
          MakeEntry(kPooledRefitPasses, ValidateMetricFamily(metric), metric, r));
    }
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
  std::map<std::string, Acc> by_metric;
  Acc all;
  for (const ValidatedPoint& v : pts) {
    if (!Usable(v)) continue;
    const std::string family = ValidateMetricFamily(v.metric);
    // Refit passes: the errors of the group's points outside the point's
    // block, pass by pass.
    std::vector<double> of_metric, of_family;
    for (const ValidatedPoint& u : pts) {
      if (!Usable(u) || u.device != v.device || u.software_build != v.software_build ||
          ValidateMetricFamily(u.metric) != family) {
        continue;
      }
      for (const char* pass : kRefit) {
        const auto ub = u.block_of.find(pass);
        if (ub == u.block_of.end()) continue;
        const auto own = v.block_of.find(pass);
        if (own != v.block_of.end() && ub->second == own->second) continue;
        const double r = Ratio(u, pass);
        if (!std::isfinite(r)) continue;
        of_family.push_back(std::abs(std::log(r)));
        if (u.metric == v.metric) of_metric.push_back(std::abs(std::log(r)));
      }
    }
    const std::vector<double>& band =
        static_cast<int>(of_metric.size()) >= kMinMetricErrors ? of_metric : of_family;
    if (!band.empty()) {
      const double h50 = ConformalQuantile(band, 0.5);
      const double h90 = ConformalQuantile(band, 0.9);
      for (const char* pass : kRefit) {
        const double r = Ratio(v, pass);
        if (!std::isfinite(r)) continue;
        by_metric[v.metric].Add(std::abs(std::log(r)), h50, h90);
        all.Add(std::abs(std::log(r)), h50, h90);
      }
    }
    // Device-out: the largest leave_one_device_out quantile of the family
    // over the other devices.
    const double r = Ratio(v, kLeaveOneDeviceOut);
    if (!std::isfinite(r)) continue;
    double h50 = -1, h90 = -1;
    for (const auto& [key, list] : entries) {
      if (key.first == v.device) continue;
      for (const auto& se : list) {
        if (se.pass() != kLeaveOneDeviceOut || se.family() != family) continue;
        h50 = std::max(h50, StructuralQuantileAt(se, 0.5));
        h90 = std::max(h90, StructuralQuantileAt(se, 0.9));
      }
    }
    if (h50 < 0 || h90 < 0) continue;
    by_metric[v.metric].Add(std::abs(std::log(r)), h50, h90);
    all.Add(std::abs(std::log(r)), h50, h90);
  }
  CoverageReport out;
  for (auto& [metric, acc] : by_metric) out.metrics.push_back(acc.Take(metric));
  out.overall = all.Take("all");
  return out;
}

std::string FormatCoverageText(const CoverageReport& c) {
  std::string out =
      "Interval coverage over the block-held-out predictions (conformal quantile band "
      "sized without the point's block; target 90%: 80-97%, 50%: 40-60%)\n";
  absl::StrAppend(&out, absl::StrFormat("  %-20s %6s %8s %8s %8s %8s\n", "metric", "n",
                                        "cov_50", "cov_90", "q_50", "q_90"));
  auto row = [&out](const MetricCoverage& m) {
    absl::StrAppend(
        &out, absl::StrFormat("  %-20s %6d %7.1f%% %7.1f%% %8.3f %8.3f\n", m.metric,
                              m.num_predictions, 100 * m.coverage_50, 100 * m.coverage_90,
                              m.median_half_50, m.median_half_90));
  };
  for (const MetricCoverage& m : c.metrics) row(m);
  row(c.overall);
  return out;
}

std::string FormatCoverageJson(const CoverageReport& c) {
  JsonWriter w(0);
  w.BeginObject();
  auto obj = [&w](const MetricCoverage& m) {
    w.Key(m.metric).BeginObject();
    w.KV("num_predictions", static_cast<int64_t>(m.num_predictions))
        .KV("coverage_50", m.coverage_50)
        .KV("coverage_90", m.coverage_90)
        .KV("median_half_width_log_50", m.median_half_50)
        .KV("median_half_width_log_90", m.median_half_90)
        .EndObject();
  };
  for (const MetricCoverage& m : c.metrics) obj(m);
  obj(c.overall);
  w.EndObject();
  return w.Take();
}

}  // namespace servesim
