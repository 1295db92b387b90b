#include "calibration/coverage.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "sim/base/json_writer.h"

namespace servesim {
namespace {

// Normal quantiles of 0.75 and 0.95 (two-sided 50% and 90%).
constexpr double kZ50 = 0.6744897501960817;
constexpr double kZ90 = 1.6448536269514722;

constexpr const char* kRefit[] = {kLeaveOneInputLengthOut, kLeaveOneConcurrencyOut,
                                  kLeaveOneModelOut};

bool Usable(const ValidatedPoint& v) {
  return v.excluded.empty() && !v.measured_infeasible && v.measured > 0 &&
         !ValidateMetricFamily(v.metric).empty();
}

// log(held-out / measured) of `v` in `pass`, or NaN.
double LogError(const ValidatedPoint& v, const std::string& pass) {
  auto it = v.block_held_out.find(pass);
  if (it == v.block_held_out.end() || !(it->second > 0) || !std::isfinite(it->second)) {
    return std::nan("");
  }
  return std::log(it->second / v.measured);
}

struct Acc {
  int n = 0, in50 = 0, in90 = 0;
  std::vector<double> sigmas;
  void Add(double err, double sigma) {
    ++n;
    in50 += std::abs(err) <= kZ50 * sigma;
    in90 += std::abs(err) <= kZ90 * sigma;
    sigmas.push_back(sigma);
  }
  MetricCoverage Take(const std::string& metric) {
    MetricCoverage m;
    m.metric = metric;
    m.num_predictions = n;
    if (n > 0) {
      m.coverage_50 = static_cast<double>(in50) / n;
      m.coverage_90 = static_cast<double>(in90) / n;
      std::sort(sigmas.begin(), sigmas.end());
      m.median_sigma = n % 2 ? sigmas[n / 2] : 0.5 * (sigmas[n / 2 - 1] + sigmas[n / 2]);
    }
    return m;
  }
};

}  // namespace

CoverageReport ComputeCoverage(const ValidationReport& report) {
  const std::vector<ValidatedPoint>& pts = report.points;
  // Per device and family: the leave-one-device-out rms log error.
  std::map<std::pair<std::string, std::string>, std::pair<double, int>> device_out;
  for (const ValidatedPoint& v : pts) {
    if (!Usable(v)) continue;
    const double e = LogError(v, kLeaveOneDeviceOut);
    if (!std::isfinite(e)) continue;
    auto& [sq, n] = device_out[{v.device, ValidateMetricFamily(v.metric)}];
    sq += e * e;
    ++n;
  }
  std::map<std::string, Acc> by_metric;
  Acc all;
  for (size_t i = 0; i < pts.size(); ++i) {
    const ValidatedPoint& v = pts[i];
    if (!Usable(v)) continue;
    const std::string family = ValidateMetricFamily(v.metric);
    // Refit passes: the band from the group's other blocks.
    double sigma_refit = -1;
    for (const char* pass : kRefit) {
      const auto own = v.block_of.find(pass);
      double sq = 0;
      int n = 0;
      for (const ValidatedPoint& u : pts) {
        if (!Usable(u) || u.device != v.device || u.software_build != v.software_build ||
            ValidateMetricFamily(u.metric) != family) {
          continue;
        }
        const auto ub = u.block_of.find(pass);
        if (ub == u.block_of.end()) continue;
        if (own != v.block_of.end() && ub->second == own->second) continue;
        const double e = LogError(u, pass);
        if (!std::isfinite(e)) continue;
        sq += e * e;
        ++n;
      }
      if (n > 0) sigma_refit = std::max(sigma_refit, std::sqrt(sq / n));
    }
    // Device-out band: the other devices' largest.
    double sigma_device = -1;
    for (const auto& [key, acc] : device_out) {
      if (key.first == v.device || key.second != family) continue;
      sigma_device = std::max(sigma_device, std::sqrt(acc.first / acc.second));
    }
    for (const char* pass : kRefit) {
      const double e = LogError(v, pass);
      if (!std::isfinite(e) || !(sigma_refit > 0)) continue;
      by_metric[v.metric].Add(e, sigma_refit);
      all.Add(e, sigma_refit);
    }
    const double e = LogError(v, kLeaveOneDeviceOut);
    if (std::isfinite(e) && sigma_device > 0) {
      by_metric[v.metric].Add(e, sigma_device);
      all.Add(e, sigma_device);
    }
  }
  CoverageReport out;
  for (auto& [metric, acc] : by_metric) out.metrics.push_back(acc.Take(metric));
  out.overall = all.Take("all");
  return out;
}

std::string FormatCoverageText(const CoverageReport& c) {
  std::string out =
      "Interval coverage over the block-held-out predictions (structural band sized "
      "without the point's block; target 90%: 80-97%, 50%: 40-60%)\n";
  absl::StrAppend(&out, absl::StrFormat("  %-20s %6s %8s %8s %8s\n", "metric", "n",
                                        "cov_50", "cov_90", "sigma"));
  auto row = [&out](const MetricCoverage& m) {
    absl::StrAppend(&out, absl::StrFormat("  %-20s %6d %7.1f%% %7.1f%% %8.3f\n", m.metric,
                                          m.num_predictions, 100 * m.coverage_50,
                                          100 * m.coverage_90, m.median_sigma));
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
        .KV("median_sigma_log", m.median_sigma)
        .EndObject();
  };
  for (const MetricCoverage& m : c.metrics) obj(m);
  obj(c.overall);
  w.EndObject();
  return w.Take();
}

}  // namespace servesim
