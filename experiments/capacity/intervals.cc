#include "experiments/capacity/intervals.h"

#include <algorithm>
#include <cmath>
#include <exception>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <utility>

#include "Eigen/Dense"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "calibration/coverage.h"
#include "experiments/capacity/cost.h"
#include "experiments/capacity/saturation.h"
#include "experiments/runner/config.h"
#include "hwmodels/calibration_profile.h"
#include "hwmodels/catalog.h"
#include "sim/base/hash.h"
#include "sim/base/parallel.h"
#include "sim/base/random.h"
#include "sim/base/status_macros.h"
#include "sim/simulation.h"

namespace servesim {
namespace {

// The metric `validate` grades that an interval metric is ("" if none;
// calibration's ValidateMetricFamily lists them).
std::string GradedMetric(const std::string& name) {
  if (name == "total_token_throughput") return "total_throughput";
  for (const char* graded :
       {"output_throughput", "mean_ttft_ms", "median_ttft_ms", "p99_ttft_ms",
        "median_tpot_ms", "median_itl_ms", "p99_itl_ms"}) {
    if (name == graded) return name;
  }
  return "";
}

// The effective normal sigma of a structural entry at `level`: its
// quantile q_L / z_L at the stored levels, linear in the level between
// them, the end values outside; rms_log_error for an entry without
// quantiles (a profile written before them).
double EntrySigma(const servesim::proto::StructuralError& e, double level) {
  std::vector<std::pair<double, double>> pts;  // (level, sigma)
  for (const auto& q : e.abs_log_error_quantiles()) {
    if (q.level() > 0 && q.level() < 1) {
      pts.emplace_back(q.level(),
                       q.abs_log_error() / NormalQuantile(0.5 + q.level() / 2));
    }
  }
  if (pts.empty()) return e.rms_log_error();
  std::sort(pts.begin(), pts.end());
  if (level <= pts.front().first) return pts.front().second;
  if (level >= pts.back().first) return pts.back().second;
  for (size_t i = 1; i < pts.size(); ++i) {
    if (level <= pts[i].first) {
      const double t = (level - pts[i - 1].first) / (pts[i].first - pts[i - 1].first);
      return pts[i - 1].second + t * (pts[i].second - pts[i - 1].second);
    }
  }
  return pts.back().second;
}

std::string EntryName(const servesim::proto::StructuralError& e) {
  return e.metric().empty() ? absl::StrCat(e.pass(), " ", e.family())
                            : absl::StrCat(e.pass(), " ", e.metric());
}

// A deployment's truncated joint normal over its profile's fitted
// parameters, in the log of each rate (see LogScale): y = mean + a z, z
// standard normal, x_i = exp(y_i) where log_scale[i] (else x_i = y_i),
// redrawn until inside the bounds (clamped after kMaxTries). A time is
// inversely proportional to a rate (an efficiency, a bandwidth), so a
// normal draw of a poorly known rate has a tail of near-zero rates and
// near-infinite steps: the L4's GEMM efficiency 0.61 +- 0.31 drew values
// near its 0.02 bound, 30x slower steps, an output-throughput band of
// [18.7, 1400] around 1,004 tok/s, and a plan confidence below 0.9 for any
// fleet. In log space it draws 0.27-1.0 at 90% (0.61 / e^(1.645 x 0.5)
// and up). Additive costs (us, ms, s) and shape constants stay normal:
// a time proportional to them has no such tail, and near zero their
// relative errors are large (an API overhead of 3.4 +- 6.6 ms would draw
// 0.1-90 ms in log space).
struct ParameterSampler {
  std::vector<std::string> names;
  Eigen::VectorXd mean, lower, upper;  // mean: log where log_scale
  Eigen::MatrixXd a;                   // a a^T = covariance (log where log_scale)
  std::vector<bool> log_scale;
};

// Whether parameter `p` at `value` is drawn in log space: a rate the step
// time is inversely proportional to (hwmodels/step_model.cc's units
// "fraction": the efficiencies; "GB/s": attn_unit_gbs), at a positive
// value.
bool LogScale(const Parameter& p, double value) {
  return value > 0 && (p.unit == "fraction" || p.unit == "GB/s");
}

constexpr int kMaxTries = 100;

// Which deployments DrawParameterSets draws.
struct DrawKinds {
  bool fitted = true;  // those with a calibration profile
  bool prior = true;   // datasheet-only ones
};

// The bounds of parameter `p` for the rejection step (none when unset).
void SetBounds(const Parameter& p, int i, ParameterSampler* s) {
  s->lower[i] = p.lower < p.upper ? p.lower : -HUGE_VAL;
  s->upper[i] = p.lower < p.upper ? p.upper : HUGE_VAL;
}

// Every shipped profile, parsed once per process (embedded, immutable;
// each interval metric reads them). Thread-safe (static initialisation).
const std::vector<servesim::proto::CalibrationProfile>& ShippedProfiles() {
  static const auto* const kProfiles = [] {
    auto* v = new std::vector<servesim::proto::CalibrationProfile>();
    for (const std::string& name : ShippedProfileNames()) {
      absl::StatusOr<ResolvedProfile> rp = ResolveCalibrationProfile(name, "");
      if (rp.ok() && rp->found) v->push_back(std::move(rp->profile));
    }
    return v;
  }();
  return *kProfiles;
}

// Each shipped device's own profile with the device's vendor, parsed once
// per process as above.
struct VendorProfile {
  std::string vendor;
  servesim::proto::CalibrationProfile profile;
};
const std::vector<VendorProfile>& DeviceProfiles() {
  static const auto* const kProfiles = [] {
    auto* v = new std::vector<VendorProfile>();
    for (const proto::Device& dev : EmbeddedDevices()) {
      absl::StatusOr<ResolvedProfile> rp = ResolveCalibrationProfile("", dev.id());
      if (rp.ok() && rp->found) v->push_back({dev.vendor(), std::move(rp->profile)});
    }
    return v;
  }();
  return *kProfiles;
}

// The largest fitted std error of each parameter over the calibrated
// devices the priors-by-rule average (hwmodels/catalog_priors.h: the
// shipped devices of `vendor` with a profile, all of them when the vendor
// has none); a parameter no profile fits with one is absent.
std::map<std::string, double> ClassFittedStdErrors(const std::string& vendor) {
  std::map<std::string, double> same, all;
  for (const VendorProfile& vp : DeviceProfiles()) {
    for (const auto& pp : vp.profile.parameters()) {
      if (!(pp.std_error() > 0)) continue;
      all[pp.name()] = std::max(all[pp.name()], pp.std_error());
      if (vp.vendor == vendor)
        same[pp.name()] = std::max(same[pp.name()], pp.std_error());
    }
  }
  return same.empty() ? all : same;
}

// A datasheet-only deployment's priors as a joint normal: mean the prior
// value, covariance diagonal (StepParameterTable: every parameter with a
// prior sigma, as the fitter would free it). Each sigma is the prior's, or
// the largest std error fitted for that parameter on the calibrated devices
// its prior by rule averages when that is larger: a device nobody measured
// does not know a parameter better than those devices know their fitted
// values (the fit's s2 = max(1, chi2 / (n - p)) scales the prior rows too,
// so a fitted std error can exceed the prior sigma it started from).
ParameterSampler PriorSampler(const Deployment& d) {
  ParameterSampler s;
  std::vector<const Parameter*> keep;
  for (const Parameter& p : d.params.params()) {
    if (p.prior_sigma > 0) keep.push_back(&p);
  }
  const std::map<std::string, double> fitted_se = ClassFittedStdErrors(d.device.vendor());
  const int n = static_cast<int>(keep.size());
  if (n == 0) return s;
  s.mean.resize(n);
  s.lower.resize(n);
  s.upper.resize(n);
  s.a = Eigen::MatrixXd::Zero(n, n);
  for (int i = 0; i < n; ++i) {
    const Parameter& p = *keep[i];
    s.names.push_back(p.name);
    SetBounds(p, i, &s);
    auto it = fitted_se.find(p.name);
    const double sigma =
        std::max(p.prior_sigma, it == fitted_se.end() ? 0.0 : it->second);
    s.log_scale.push_back(LogScale(p, p.value));
    // Log space: the relative sigma (the delta method at the mean).
    s.mean[i] = s.log_scale[i] ? std::log(p.value) : p.value;
    s.a(i, i) = s.log_scale[i] ? sigma / p.value : sigma;
  }
  return s;
}

// nullopt-like: names empty when the deployment has nothing to draw. A
// calibrated deployment draws from its profile's fit (`prior` false), a
// datasheet-only one from its priors (`prior` true).
absl::StatusOr<ParameterSampler> MakeSampler(const Deployment& d, bool* prior) {
  ParameterSampler s;
  *prior = !d.calibrated;
  if (!d.calibrated) return PriorSampler(d);
  ASSIGN_OR_RETURN(ResolvedProfile rp,
                   ResolveCalibrationProfile(d.spec.calibration_profile, d.device.id()));
  if (!rp.found) return s;
  const servesim::proto::CalibrationProfile& prof = rp.profile;
  std::vector<std::string> names;
  std::vector<double> cov;
  if (prof.covariance().names_size() > 0) {
    const int n = prof.covariance().names_size();
    if (prof.covariance().values_size() != n * n) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: covariance: %d values for %d names (needs %d, row-major)",
                          rp.origin, prof.covariance().values_size(), n, n * n));
    }
    names.assign(prof.covariance().names().begin(), prof.covariance().names().end());
    cov.assign(prof.covariance().values().begin(), prof.covariance().values().end());
  } else {  // an older profile: independent parameters of its std errors
    for (const auto& pp : prof.parameters()) names.push_back(pp.name());
    const size_t n = names.size();
    cov.assign(n * n, 0.0);
    for (size_t i = 0; i < n; ++i) {
      const double se = prof.parameters(static_cast<int>(i)).std_error();
      cov[i * n + i] = se * se;
    }
  }
  // Only the parameters this deployment's model has (and with variance).
  std::vector<int> keep;
  for (size_t i = 0; i < names.size(); ++i) {
    if (d.params.Find(names[i]) != nullptr && cov[i * names.size() + i] > 0) {
      keep.push_back(static_cast<int>(i));
    }
  }
  const int n = static_cast<int>(keep.size());
  if (n == 0) return s;
  Eigen::MatrixXd c(n, n);
  s.mean.resize(n);
  s.lower.resize(n);
  s.upper.resize(n);
  std::vector<double> scale(n, 1.0);  // d log x / d x where log_scale
  for (int i = 0; i < n; ++i) {
    const Parameter* p = d.params.Find(names[keep[i]]);
    s.names.push_back(p->name);
    SetBounds(*p, i, &s);
    s.log_scale.push_back(LogScale(*p, p->value));
    s.mean[i] = s.log_scale[i] ? std::log(p->value) : p->value;
    if (s.log_scale[i]) scale[i] = 1.0 / p->value;
  }
  // The covariance carried to the drawing space (delta method).
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j)
      c(i, j) = cov[keep[i] * names.size() + keep[j]] * scale[i] * scale[j];
  }
  // Symmetric square root by eigen-decomposition (a rank-deficient
  // covariance, e.g. a prior-dominated direction, is fine).
  Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> eig(0.5 * (c + c.transpose()));
  Eigen::VectorXd sq = eig.eigenvalues().cwiseMax(0.0).cwiseSqrt();
  s.a = eig.eigenvectors() * sq.asDiagonal();
  return s;
}

Eigen::VectorXd Draw(const ParameterSampler& s, Rng& rng) {
  const int n = static_cast<int>(s.names.size());
  Eigen::VectorXd x(n);
  for (int t = 0; t < kMaxTries; ++t) {
    Eigen::VectorXd z(n);
    for (int i = 0; i < n; ++i) z[i] = rng.Normal();
    x = s.mean + s.a * z;
    for (int i = 0; i < n; ++i) {
      if (s.log_scale[i]) x[i] = std::exp(x[i]);
    }
    bool inside = true;
    for (int i = 0; i < n; ++i) inside &= x[i] >= s.lower[i] && x[i] <= s.upper[i];
    if (inside) return x;
  }
  return x.cwiseMax(s.lower).cwiseMin(s.upper);
}

// A seed below 2^63 (--seed's range) for sample k of a stream.
uint64_t SampleSeed(uint64_t seed, RngStream stream, int k) {
  return HashCombine(StreamSeed(seed, stream), static_cast<uint64_t>(k)) >> 1;
}

// One re-simulation: the point's fleet with step models rebuilt from
// `params` (one set per deployment; empty: the point's) and the client's
// seed replaced by `client_seed` (< 0: the point's).
absl::StatusOr<RunResult> RunSample(const proto::ExperimentConfig& config,
                                    const ExperimentRun& point,
                                    const std::vector<ParameterSet>& params,
                                    int64_t client_seed) {
  const std::vector<Deployment>& deps = point.fleet.deployments;
  std::vector<ReplicaConfig> replicas = point.fleet.replicas;
  std::vector<std::shared_ptr<const StepTimeModel>> models;
  double api_ms = point.fleet.api_overhead_ms;
  if (!params.empty()) {
    api_ms = 0;
    for (size_t k = 0; k < deps.size(); ++k) {
      models.push_back(RebuildStepModel(deps[k], params[k]));
      double a = deps[k].api_overhead_ms;
      if (const Parameter* p = params[k].Find("api_overhead_ms"); p != nullptr && a > 0) {
        a = std::max(0.0, p->value);
      }
      api_ms = std::max(api_ms, a);
    }
    for (ReplicaConfig& rc : replicas) {
      for (size_t k = 0; k < deps.size(); ++k) {
        if (rc.step_model == deps[k].step_model.get()) rc.step_model = models[k].get();
      }
    }
  }
  proto::ClientConfig cl = config.client();
  if (client_seed >= 0) cl.set_seed(static_cast<uint64_t>(client_seed));
  // The pipeline RunExperiment runs (sim/simulation.h): its router default
  // and its API-overhead rounding.
  SimulationSpec spec;
  spec.replicas = std::move(replicas);
  spec.router = FleetRouterName(config, point.fleet);
  spec.client = ToClientConfig(cl);
  spec.api_overhead_ms = api_ms;
  ASSIGN_OR_RETURN(std::unique_ptr<RequestSource> source, OpenRequestSource(cl));
  ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine,
                   Simulate(std::move(spec), source.get()));
  return engine->Result();
}

std::string Num(double v) {
  if (!std::isfinite(v)) return "-";
  const double a = std::abs(v);
  if (a >= 100) return absl::StrFormat("%.0f", v);
  if (a >= 10) return absl::StrFormat("%.1f", v);
  if (a >= 1) return absl::StrFormat("%.2f", v);
  return absl::StrFormat("%.3g", v);
}

// The structural log sigma of every metric of `metrics` for a fleet at
// `level`: the largest over its deployments, by metric index; with the
// reasons, by metric name.
absl::StatusOr<std::vector<std::pair<double, std::string>>> FleetSigmas(
    const std::vector<Deployment>& deps, const std::vector<MetricInterval>& metrics,
    double level) {
  std::vector<std::optional<servesim::proto::CalibrationProfile>> profiles;
  for (const Deployment& d : deps) {
    std::optional<servesim::proto::CalibrationProfile> prof;
    if (d.calibrated) {
      ASSIGN_OR_RETURN(
          ResolvedProfile rp,
          ResolveCalibrationProfile(d.spec.calibration_profile, d.device.id()));
      if (rp.found) prof = rp.profile;
    }
    profiles.push_back(std::move(prof));
  }
  std::vector<std::pair<double, std::string>> sigma;
  sigma.reserve(metrics.size());
  for (const MetricInterval& m : metrics) {
    double best = -1;
    std::vector<std::string> whys;
    for (size_t i = 0; i < deps.size(); ++i) {
      std::string why;
      const double s = StructuralSigma(profiles[i] ? &*profiles[i] : nullptr, m.family,
                                       m.name, level, &why, deps[i].device.id());
      best = std::max(best, s);
      whys.push_back(absl::StrFormat("%s %.3g (%s)", deps[i].device.id(), s, why));
    }
    sigma.emplace_back(best, absl::StrJoin(whys, "; "));
  }
  return sigma;
}

// K parameter sets per deployment, each deployment drawn from its own
// distribution when `kinds` asks for its kind (fitted: a profile's joint
// normal; prior: a datasheet-only deployment's priors), the others at
// their point values; none when no deployment has a distribution of those
// kinds. What was drawn is appended to `drawn`. Draw i of a seed is the
// same vector whatever K.
absl::StatusOr<std::vector<std::vector<ParameterSet>>> DrawParameterSets(
    const std::vector<Deployment>& deps, int k, uint64_t seed, DrawKinds kinds,
    std::vector<std::string>* drawn) {
  std::vector<ParameterSampler> samplers;
  bool any = false;
  for (const Deployment& d : deps) {
    bool prior = false;
    ASSIGN_OR_RETURN(ParameterSampler s, MakeSampler(d, &prior));
    if (!(prior ? kinds.prior : kinds.fitted)) s = ParameterSampler{};
    any |= !s.names.empty();
    if (!s.names.empty()) {
      drawn->push_back(absl::StrCat(d.device.id(), prior ? " (priors): " : ": ",
                                    absl::StrJoin(s.names, ", ")));
    }
    samplers.push_back(std::move(s));
  }
  // One stream whatever the kinds: a device with and without its profile
  // is compared on the same normal draws.
  std::vector<std::vector<ParameterSet>> sets(any ? k : 0);
  for (int i = 0; i < static_cast<int>(sets.size()); ++i) {
    Rng rng(SampleSeed(seed, RngStream::kIntervalParameters, i));
    for (size_t j = 0; j < deps.size(); ++j) {
      ParameterSet ps = deps[j].params;
      if (!samplers[j].names.empty()) {
        const Eigen::VectorXd x = Draw(samplers[j], rng);
        for (size_t q = 0; q < samplers[j].names.size(); ++q) {
          ps.FindMutable(samplers[j].names[q])->value = x[static_cast<int>(q)];
        }
      }
      sets[i].push_back(std::move(ps));
    }
  }
  return sets;
}

double StdNormalCdf(double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); }

}  // namespace

double NormalQuantile(double p) {
  // Acklam's coefficients.
  static constexpr double a[] = {-3.969683028665376e+01, 2.209460984245205e+02,
                                 -2.759285104469687e+02, 1.383577518672690e+02,
                                 -3.066479806614716e+01, 2.506628277459239e+00};
  static constexpr double b[] = {-5.447609879822406e+01, 1.615858368580409e+02,
                                 -1.556989798598866e+02, 6.680131188771972e+01,
                                 -1.328068155288572e+01};
  static constexpr double c[] = {-7.784894002430293e-03, -3.223964580411365e-01,
                                 -2.400758277161838e+00, -2.549732539343734e+00,
                                 4.374664141464968e+00,  2.938163982698783e+00};
  static constexpr double d[] = {7.784695709041462e-03, 3.224671290700398e-01,
                                 2.445134137142996e+00, 3.754408661907416e+00};
  constexpr double kLow = 0.02425;
  double x;
  if (p < kLow) {
    const double q = std::sqrt(-2 * std::log(p));
    x = (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
        ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  } else if (p <= 1 - kLow) {
    const double q = p - 0.5, r = q * q;
    x = (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
        (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1);
  } else {
    const double q = std::sqrt(-2 * std::log(1 - p));
    x = -(((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
        ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1);
  }
  // One Halley step on Phi(x) - p.
  const double e = 0.5 * std::erfc(-x / std::sqrt(2.0)) - p;
  const double u = e * std::sqrt(2 * M_PI) * std::exp(x * x / 2);
  return x - u / (1 + x * u / 2);
}

SourceBand LogNormalBand(double point, double sd_log, double z) {
  SourceBand b;
  b.sd_log = b.sd_log_lo = b.sd_log_hi = sd_log;
  b.lo = point * std::exp(-z * sd_log);
  b.hi = point * std::exp(z * sd_log);
  return b;
}

SourceBand SampleBand(double point, const std::vector<double>& samples, double z) {
  SourceBand b;
  b.lo = b.hi = point;
  std::vector<double> l;
  for (double x : samples) {
    if (std::isfinite(x) && x > 0 && point > 0) l.push_back(std::log(x / point));
  }
  if (l.size() < 2 || !(point > 0)) {
    b.applicable = false;
    return b;
  }
  double m = 0;
  for (double v : l) m += v;
  m /= static_cast<double>(l.size());
  double ss = 0;
  for (double v : l) ss += (v - m) * (v - m);
  b.mean_log = m;
  b.sd_log = std::sqrt(ss / static_cast<double>(l.size() - 1));
  std::vector<double> sorted = l;
  std::sort(sorted.begin(), sorted.end());
  const size_t n = sorted.size();
  const double c = n % 2 == 1 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
  double below = 0, above = 0;
  for (double v : l) (v < c ? below : above) += (v - c) * (v - c);
  b.center_log = c;
  b.sd_log_lo = std::sqrt(2 * below / static_cast<double>(n - 1));
  b.sd_log_hi = std::sqrt(2 * above / static_cast<double>(n - 1));
  b.lo = point * std::exp(c - z * b.sd_log_lo);
  b.hi = point * std::exp(c + z * b.sd_log_hi);
  return b;
}

void CombineSources(double z, MetricInterval* m) {
  // The workload's centre is left out (the point is itself one draw of it).
  const double center = m->parameters.center_log + m->prior_parameters.center_log +
                        m->structural.center_log;
  double var_lo = 0, var_hi = 0;
  for (const SourceBand* b :
       {&m->parameters, &m->prior_parameters, &m->workload, &m->structural}) {
    var_lo += b->sd_log_lo * b->sd_log_lo;
    var_hi += b->sd_log_hi * b->sd_log_hi;
  }
  m->lo = m->point * std::exp(center - z * std::sqrt(var_lo));
  m->hi = m->point * std::exp(center + z * std::sqrt(var_hi));
}

std::vector<MetricInterval> IntervalMetrics(
    const RunResult& r, const std::vector<ReportContext::Cost>& costs) {
  std::vector<MetricInterval> out;
  auto add = [&out](std::string name, std::string label, std::string unit,
                    std::string family, double v) {
    MetricInterval m;
    m.name = std::move(name);
    m.label = std::move(label);
    m.unit = std::move(unit);
    m.family = std::move(family);
    m.point = v;
    out.push_back(std::move(m));
  };
  add("request_throughput", "request throughput", "req/s", "throughput",
      r.request_throughput);
  add("output_throughput", "output throughput", "tok/s", "throughput",
      r.output_throughput);
  add("total_token_throughput", "total token throughput", "tok/s", "throughput",
      r.total_token_throughput);
  // E2E latency is TTFT plus the decode of the output: the TPOT family's
  // band (the wider of the two on every shipped profile but one).
  const struct {
    const char* key;
    const char* label;
    const char* family;
    const LatencySummary* s;
  } lat[] = {{"ttft", "TTFT", "ttft", &r.ttft},
             {"tpot", "TPOT", "tpot", &r.tpot},
             {"itl", "ITL", "tpot", &r.itl},
             {"e2el", "E2E latency", "tpot", &r.e2el}};
  for (const auto& l : lat) {
    add(absl::StrCat("mean_", l.key, "_ms"), absl::StrCat("mean ", l.label), "ms",
        l.family, l.s->mean_ms);
    add(absl::StrCat("median_", l.key, "_ms"), absl::StrCat("median ", l.label), "ms",
        l.family, l.s->median_ms);
    add(absl::StrCat("p90_", l.key, "_ms"), absl::StrCat("p90 ", l.label), "ms", l.family,
        l.s->p90_ms);
    add(absl::StrCat("p99_", l.key, "_ms"), absl::StrCat("p99 ", l.label), "ms", l.family,
        l.s->p99_ms);
  }
  // KV occupancy follows the load the throughput carries: that family.
  add("kv_occupancy_mean", "KV occupancy (time-weighted mean)", "", "throughput",
      r.kv_occupancy_mean);
  add("kv_occupancy_max", "KV occupancy (max)", "", "throughput", r.kv_occupancy_max);
  for (const ReportContext::Cost& c : costs) {
    add(absl::StrCat("usd_per_m_output_tokens_", c.tier),
        absl::StrCat("$/Mtok output (", c.tier, ")"), "", "throughput",
        r.output_throughput > 0 ? UsdPerMillionTokens(c.usd_per_hour, r.output_throughput)
                                : 0.0);
  }
  return out;
}

namespace {

// The entry a calibrated device's band comes from (StructuralSigma): the
// metric's pooled refit entry, else its family's, else the family's
// leave_one_device_out entry; null when the profile has none of them.
const servesim::proto::StructuralError* OwnEntry(
    const servesim::proto::CalibrationProfile& profile, const std::string& family,
    const std::string& graded) {
  std::vector<std::pair<std::string, std::string>> picks;  // (pass, metric)
  if (!graded.empty()) picks.emplace_back(kPooledRefitPasses, graded);
  picks.emplace_back(kPooledRefitPasses, "");
  picks.emplace_back(kLeaveOneDeviceOut, "");
  for (const auto& [pass, of_metric] : picks) {
    for (const auto& se : profile.structural_errors()) {
      if (se.pass() == pass && se.family() == family && se.metric() == of_metric &&
          se.num_points() > 0) {
        return &se;
      }
    }
  }
  return nullptr;
}

}  // namespace

double StructuralSigma(const servesim::proto::CalibrationProfile* profile,
                       const std::string& family, const std::string& metric, double level,
                       std::string* why, const std::string& datasheet_device) {
  const std::string graded = GradedMetric(metric);
  if (profile != nullptr) {
    if (const auto* use = OwnEntry(*profile, family, graded)) {
      *why = absl::StrFormat("%s %s", profile->device(), EntryName(*use));
      return EntrySigma(*use, level);
    }
  }
  // A device without a profile is predicted from priors, as the
  // leave_one_device_out pass predicts a device from the others: its band
  // is the conformal quantile of the shipped profiles' leave_one_device_out
  // errors of the family, pooled (validate's coverage scores its
  // device-out predictions the same way, from the other devices).
  std::vector<const servesim::proto::CalibrationProfile*> shipped, own;
  for (const servesim::proto::CalibrationProfile& p : ShippedProfiles()) {
    // The other devices' errors, as validate bands a device-out prediction;
    // a datasheet copy of a shipped device keeps its own apart (the floor
    // below).
    const std::string& self = profile != nullptr ? profile->device() : datasheet_device;
    if (!self.empty() && p.device() == self) {
      if (profile == nullptr) own.push_back(&p);
      continue;
    }
    shipped.push_back(&p);
  }
  std::vector<const servesim::proto::StructuralError*> entries;
  for (const auto* p : shipped) {
    for (const auto& se : p->structural_errors()) entries.push_back(&se);
  }
  const std::vector<double> pooled = PooledDeviceOutErrors(entries, family);
  const char* lead = profile != nullptr ? "profile holds no block error for it; "
                                        : "no calibration profile; ";
  double sigma = kFallbackStructuralSigma;
  if (!pooled.empty()) {
    *why = absl::StrFormat(
        "%sthe pooled leave-one-device-out errors of %d shipped profiles (%d errors)",
        lead, static_cast<int>(shipped.size()), static_cast<int>(pooled.size()));
    sigma = ConformalQuantile(pooled, level) / NormalQuantile(0.5 + level / 2);
  } else {
    *why =
        absl::StrFormat("%sno shipped profile has device-out errors: fallback sigma %g",
                        lead, kFallbackStructuralSigma);
  }
  // A datasheet-only copy of a shipped device: that device's own error when
  // predicted from the others' priors is a floor, and so is its calibrated
  // band (without its profile it is known no better than with it).
  if (profile == nullptr) {
    for (const auto* p : own) {
      if (const auto* use = OwnEntry(*p, family, graded)) {
        const double own_sigma = EntrySigma(*use, level);
        if (own_sigma > sigma) {
          sigma = own_sigma;
          *why = absl::StrFormat(
              "no calibration profile; %s's calibrated %s (wider than the "
              "pooled device-out band)",
              datasheet_device, EntryName(*use));
        }
      }
      for (const auto& se : p->structural_errors()) {
        if (se.pass() != kLeaveOneDeviceOut || se.family() != family ||
            !se.metric().empty() || se.num_points() == 0) {
          continue;
        }
        const double own_sigma = EntrySigma(se, level);
        if (own_sigma > sigma) {
          sigma = own_sigma;
          *why = absl::StrFormat(
              "no calibration profile; %s's own %s (wider than the "
              "pooled device-out band)",
              datasheet_device, EntryName(se));
        }
      }
    }
  }
  return sigma;
}

absl::Status ValidateIntervalOptions(const IntervalOptions& o) {
  if (!(o.level > 0 && o.level < 1)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--interval: %g is out of range (allowed: 0 < LEVEL < 1, e.g. "
                        "0.9)",
                        o.level));
  }
  if (o.num_samples < 2 || o.num_samples > 1000) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--interval-samples: %d is out of range (allowed: 2..1000)", o.num_samples));
  }
  return absl::OkStatus();
}

absl::StatusOr<IntervalReport> ComputeIntervals(const proto::ExperimentConfig& config,
                                                const ExperimentRun& point,
                                                const ReportContext& ctx,
                                                const IntervalOptions& options,
                                                uint64_t seed) {
  RETURN_IF_ERROR(ValidateIntervalOptions(options));
  proto::ExperimentConfig cfg = config;
  ApplyDefaults(cfg);
  const double z = NormalQuantile(0.5 + options.level / 2);
  const std::vector<Deployment>& deps = point.fleet.deployments;
  IntervalReport report;
  report.level = options.level;
  report.metrics = IntervalMetrics(point.engine->Result(), ctx.costs);

  // (a) parameter draws: fitted (profiles) and priors (datasheet-only
  // deployments), each its own source and its own K runs; a fleet mixing
  // both kinds draws them together in one set of K runs, reported as
  // "parameters" (2K + 1 runs in all, as for a fleet of one kind).
  bool has_fitted = false, has_prior = false;
  for (const Deployment& d : deps) (d.calibrated ? has_fitted : has_prior) = true;
  const bool mixed = has_fitted && has_prior;
  std::vector<std::string> drawn, drawn_priors;
  const int k = options.num_samples;
  ASSIGN_OR_RETURN(std::vector<std::vector<ParameterSet>> param_sets,
                   DrawParameterSets(deps, k, seed, DrawKinds{true, mixed}, &drawn));
  std::vector<std::vector<ParameterSet>> prior_sets;
  if (!mixed) {
    ASSIGN_OR_RETURN(prior_sets, DrawParameterSets(deps, k, seed, DrawKinds{false, true},
                                                   &drawn_priors));
  }
  report.num_parameter_samples = static_cast<int>(param_sets.size());
  report.num_prior_samples = static_cast<int>(prior_sets.size());
  const bool workload = cfg.client().trace().empty();
  report.num_workload_seeds = workload ? k : 0;
  // Runs: fitted draws, then prior draws, then workload seeds; one slot
  // each.
  const int num_param_runs = static_cast<int>(param_sets.size());
  const int num_prior_runs = static_cast<int>(prior_sets.size());
  const int num_drawn_runs = num_param_runs + num_prior_runs;
  const int num_runs = num_drawn_runs + report.num_workload_seeds;
  std::vector<absl::StatusOr<RunResult>> runs(num_runs);
  ParallelFor(num_runs, options.jobs, [&](int i) {
    try {
      if (i < num_param_runs) {
        runs[i] = RunSample(cfg, point, param_sets[i], -1);
      } else if (i < num_drawn_runs) {
        runs[i] = RunSample(cfg, point, prior_sets[i - num_param_runs], -1);
      } else {
        const int w = i - num_drawn_runs;
        runs[i] = RunSample(
            cfg, point, {},
            static_cast<int64_t>(SampleSeed(seed, RngStream::kIntervalWorkload, w)));
      }
    } catch (const std::exception& e) {  // e.g. bad_alloc: an error, not a crash
      runs[i] = absl::InternalError(absl::StrCat("interval run ", i, ": ", e.what()));
    }
  });
  std::vector<std::vector<MetricInterval>> values;
  for (int i = 0; i < num_runs; ++i) {
    if (!runs[i].ok()) {
      return absl::Status(runs[i].status().code(),
                          absl::StrCat("--interval: re-simulation ", i + 1, " of ",
                                       num_runs, ": ", runs[i].status().message()));
    }
    values.push_back(IntervalMetrics(*runs[i], ctx.costs));
    const Saturation sat =
        FallsBehind(cfg.client().request_rate(),
                    static_cast<double>(runs[i]->num_prompts),  // a trace: 0 in cfg
                    runs[i]->request_throughput, runs[i]->queueing.p99_ms,
                    runs[i]->client_wait.count > 0
                        ? std::optional<double>(runs[i]->client_wait.p99_ms)
                        : std::nullopt);
    if (sat.falls_behind) {
      ++(i < num_param_runs   ? report.saturated_parameter_samples
         : i < num_drawn_runs ? report.saturated_prior_samples
                              : report.saturated_workload_seeds);
      if (report.least_served_request_rate == 0 ||
          runs[i]->request_throughput < report.least_served_request_rate) {
        report.least_served_request_rate = runs[i]->request_throughput;
      }
    }
  }

  // (c) structural sigma per metric at the level: the largest over the
  // deployments.
  ASSIGN_OR_RETURN(const auto sigma, FleetSigmas(deps, report.metrics, options.level));

  for (size_t j = 0; j < report.metrics.size(); ++j) {
    MetricInterval& m = report.metrics[j];
    std::vector<double> ps, qs, ws;
    for (int i = 0; i < num_runs; ++i) {
      (i < num_param_runs   ? ps
       : i < num_drawn_runs ? qs
                            : ws)
          .push_back(values[i][j].point);
    }
    m.parameters = SampleBand(m.point, ps, z);
    m.prior_parameters = SampleBand(m.point, qs, z);
    m.workload = SampleBand(m.point, ws, z);
    if (!(m.point > 0)) {
      m.structural = SourceBand{.lo = m.point, .hi = m.point, .applicable = false};
    } else {
      m.structural = LogNormalBand(m.point, sigma[j].first, z);
    }
    CombineSources(z, &m);
  }

  report.notes.push_back(
      num_param_runs > 0
          ? absl::StrFormat(
                "parameters: %d draws from each profile's fitted joint normal "
                "(covariance; in the log of each rate: efficiencies and bandwidths, "
                "carried there by the delta method), truncated to the fit bounds, "
                "common random numbers (the point's workload seed)%s; drawn: %s",
                k,
                mixed ? ", with the datasheet-only deployments' priors drawn in the "
                        "same runs (a mixed fleet)"
                      : "",
                absl::StrJoin(drawn, "; "))
          : "parameters: none drawn (no deployment has a calibration profile)");
  report.notes.push_back(
      num_prior_runs > 0
          ? absl::StrFormat(
                "prior_parameters: %d draws from the datasheet-only deployments' "
                "priors (independent normals, in the log of each rate: efficiencies "
                "and bandwidths, median the prior, sigma the larger of the prior "
                "sigma of hwmodels/step_model.cc's table and the largest std error "
                "fitted for it on the calibrated devices of its vendor, relative to "
                "the prior there), truncated to the bounds, common random numbers; "
                "drawn: %s",
                k, absl::StrJoin(drawn_priors, "; "))
      : mixed ? "prior_parameters: drawn with parameters (a mixed fleet)"
              : "prior_parameters: none drawn (every deployment has a calibration "
                "profile)");
  report.notes.push_back(
      workload ? absl::StrFormat(
                     "workload: %d other seeds of the arrival and length draws (at the "
                     "point's parameters)",
                     k)
               : "workload: none (a trace replays fixed arrival times and lengths)");
  // One line per distinct source, naming the metrics it sizes.
  std::vector<std::pair<std::string, std::vector<std::string>>> by_source;
  for (size_t j = 0; j < report.metrics.size(); ++j) {
    const std::string src =
        absl::StrFormat("sigma %.3g from %s", sigma[j].first, sigma[j].second);
    auto it = std::find_if(by_source.begin(), by_source.end(),
                           [&src](const auto& b) { return b.first == src; });
    if (it == by_source.end()) {
      by_source.emplace_back(src, std::vector<std::string>{});
      it = std::prev(by_source.end());
    }
    it->second.push_back(report.metrics[j].name);
  }
  for (const auto& [src, names] : by_source) {
    report.notes.push_back(absl::StrFormat(
        "structural %s: log-normal, %s (at level %g: the conformal quantile of the "
        "block-held-out |log error| / z)",
        absl::StrJoin(names, ", "), src, options.level));
  }
  report.notes.emplace_back(
      "combined on the log scale: means of the parameter and structural factors add, "
      "the three variances add (independent sources)");
  if (const int n = report.saturated_parameter_samples + report.saturated_prior_samples +
                    report.saturated_workload_seeds;
      n > 0) {
    std::vector<std::string> which;
    if (report.saturated_parameter_samples > 0) {
      which.push_back(absl::StrFormat("%d of %d parameter draws",
                                      report.saturated_parameter_samples,
                                      num_param_runs));
    }
    if (report.saturated_prior_samples > 0) {
      which.push_back(absl::StrFormat("%d of %d prior draws",
                                      report.saturated_prior_samples, num_prior_runs));
    }
    if (report.saturated_workload_seeds > 0) {
      which.push_back(absl::StrFormat("%d of %d workload seeds",
                                      report.saturated_workload_seeds,
                                      report.num_workload_seeds));
    }
    report.notes.insert(
        report.notes.begin(),
        absl::StrFormat(
            "saturation: the server falls behind the offered %s req/s in %s (serving "
            "down to %s req/s): in those runs the queue grows for the whole run, so "
            "the latency bands' upper ends reflect this run's length (--num-prompts), "
            "not a steady state; read them as 'may saturate at this rate' (more "
            "--interval-samples size the odds)",
            Num(cfg.client().request_rate()), absl::StrJoin(which, ", "),
            Num(report.least_served_request_rate)));
  }
  return report;
}

absl::StatusOr<double> SloProbability(const proto::ExperimentConfig& config,
                                      const std::vector<SloBound>& terms,
                                      const IntervalOptions& options, uint64_t seed) {
  RETURN_IF_ERROR(ValidateIntervalOptions(options));
  ASSIGN_OR_RETURN(ExperimentRun point, RunExperiment(config));
  proto::ExperimentConfig cfg = config;
  ApplyDefaults(cfg);
  const std::vector<MetricInterval> names = IntervalMetrics(point.engine->Result(), {});
  std::vector<int> index;
  for (const SloBound& t : terms) {
    int found = -1;
    for (size_t j = 0; j < names.size(); ++j) {
      if (names[j].name == t.metric) found = static_cast<int>(j);
    }
    if (found < 0) {
      std::vector<std::string> allowed;
      allowed.reserve(names.size());
      for (const MetricInterval& m : names) allowed.push_back(m.name);
      return absl::InvalidArgumentError(
          absl::StrFormat("--confidence: SLO metric '%s' has no interval (allowed: %s)",
                          t.metric, absl::StrJoin(allowed, ", ")));
    }
    index.push_back(found);
  }
  const std::vector<Deployment>& deps = point.fleet.deployments;
  std::vector<std::string> drawn;
  ASSIGN_OR_RETURN(
      std::vector<std::vector<ParameterSet>> sets,
      DrawParameterSets(deps, options.num_samples, seed, DrawKinds{}, &drawn));
  // One term is met with probability >= C exactly when its threshold lies
  // outside the one-sided C band: the two-sided band of level 2C - 1.
  ASSIGN_OR_RETURN(const auto sigma,
                   FleetSigmas(deps, names, std::max(0.0, 2 * options.level - 1)));
  std::vector<absl::StatusOr<RunResult>> runs(sets.size());
  ParallelFor(static_cast<int>(sets.size()), options.jobs, [&](int i) {
    try {
      runs[i] = RunSample(cfg, point, sets[i], -1);
    } catch (const std::exception& e) {
      runs[i] = absl::InternalError(absl::StrCat("confidence run ", i, ": ", e.what()));
    }
  });
  std::vector<std::vector<MetricInterval>> draws;
  if (sets.empty()) draws.push_back(names);
  for (auto& r : runs) {
    RETURN_IF_ERROR(r.status());
    draws.push_back(IntervalMetrics(*r, {}));
  }
  double sum = 0;
  for (const std::vector<MetricInterval>& d : draws) {
    double p = 1;
    for (size_t t = 0; t < terms.size(); ++t) {
      const MetricInterval& m = d[index[t]];
      const double s = sigma[index[t]].first;
      const double v = m.point, th = terms[t].threshold;
      double pt;
      if (!(v > 0) || !(th > 0) || !(s > 0)) {
        pt = terms[t].upper ? (v <= th ? 1.0 : 0.0) : (v >= th ? 1.0 : 0.0);
      } else {
        const double x = std::log(th / v) / s;
        pt = terms[t].upper ? StdNormalCdf(x) : StdNormalCdf(-x);
      }
      p *= pt;
    }
    sum += p;
  }
  return sum / static_cast<double>(draws.size());
}

PointRunner WithIntervals(PointRunner base, const IntervalOptions& options) {
  std::vector<std::string> names;
  for (const MetricInterval& m : IntervalMetrics(RunResult{}, {})) {
    if (std::find(base.metric_names.begin(), base.metric_names.end(), m.name) !=
        base.metric_names.end()) {
      names.push_back(m.name);
    }
  }
  PointRunner r;
  r.metric_names = base.metric_names;
  for (const std::string& n : names) {
    r.metric_names.push_back(n + "_lo");
    r.metric_names.push_back(n + "_hi");
  }
  // Re-simulations that fell behind the offered rate (all sources): a
  // point with any has latency bands that are not steady-state figures.
  r.metric_names.emplace_back("interval_saturated_runs");
  IntervalOptions io = options;
  io.jobs = 1;
  r.run = [run_base = std::move(base.run), names,
           io](const proto::ExperimentConfig& c) -> absl::StatusOr<std::vector<double>> {
    ASSIGN_OR_RETURN(std::vector<double> v, run_base(c));
    ASSIGN_OR_RETURN(ExperimentRun point, RunExperiment(c));
    ASSIGN_OR_RETURN(IntervalReport ir,
                     ComputeIntervals(c, point, ReportContext{}, io,
                                      c.client().has_seed() ? c.client().seed() : 0));
    for (const std::string& n : names) {
      for (const MetricInterval& m : ir.metrics) {
        if (m.name != n) continue;
        v.push_back(m.lo);
        v.push_back(m.hi);
      }
    }
    v.push_back(static_cast<double>(ir.saturated_parameter_samples +
                                    ir.saturated_prior_samples +
                                    ir.saturated_workload_seeds));
    return v;
  };
  return r;
}

void WriteIntervalsJson(const IntervalReport& report, JsonWriter& w) {
  auto band = [&w](const char* key, const SourceBand& b) {
    w.Key(key).BeginObject().KV("lo", b.lo).KV("hi", b.hi);
    w.KV("sd_log", b.sd_log).KV("center_log", b.center_log);
    w.KV("sd_log_lo", b.sd_log_lo).KV("sd_log_hi", b.sd_log_hi);
    w.KV("applicable", b.applicable).EndObject();
  };
  w.Key("intervals").BeginObject();
  for (const MetricInterval& m : report.metrics) {
    w.Key(m.name).BeginObject();
    w.KV("lo", m.lo).KV("hi", m.hi).KV("level", report.level).KV("point", m.point);
    w.Key("sources").BeginObject();
    band("parameters", m.parameters);
    band("prior_parameters", m.prior_parameters);
    band("workload", m.workload);
    band("structural", m.structural);
    w.EndObject().EndObject();
  }
  w.EndObject();
  w.Key("interval_method").BeginObject();
  w.KV("level", report.level)
      .KV("num_parameter_samples", static_cast<int64_t>(report.num_parameter_samples))
      .KV("num_prior_samples", static_cast<int64_t>(report.num_prior_samples))
      .KV("num_workload_seeds", static_cast<int64_t>(report.num_workload_seeds));
  w.Key("saturated_runs").BeginObject();
  w.KV("parameters", static_cast<int64_t>(report.saturated_parameter_samples))
      .KV("prior_parameters", static_cast<int64_t>(report.saturated_prior_samples))
      .KV("workload", static_cast<int64_t>(report.saturated_workload_seeds))
      .KV("least_served_request_rate", report.least_served_request_rate);
  w.EndObject();
  w.Key("notes").BeginArray();
  for (const std::string& n : report.notes) w.String(n);
  w.EndArray().EndObject();
}

std::string IntervalsText(const IntervalReport& report) {
  std::string out;
  absl::StrAppend(&out,
                  absl::StrFormat("%.0f%% intervals (%d parameter draws, %d prior draws, "
                                  "%d workload seeds): combined [parameters | "
                                  "prior_parameters | workload | structural]\n",
                                  100 * report.level, report.num_parameter_samples,
                                  report.num_prior_samples, report.num_workload_seeds));
  if (const int n = report.saturated_parameter_samples + report.saturated_prior_samples +
                    report.saturated_workload_seeds;
      n > 0) {
    absl::StrAppend(&out, "SATURATES in ", n, " of ",
                    report.num_parameter_samples + report.num_prior_samples +
                        report.num_workload_seeds,
                    " re-simulations (note: saturation): latency upper ends are not "
                    "steady-state figures\n");
  }
  auto br = [](const SourceBand& b) {
    if (!b.applicable) return std::string("-");
    return absl::StrCat(Num(b.lo), ", ", Num(b.hi));
  };
  for (const MetricInterval& m : report.metrics) {
    absl::StrAppend(&out, m.label, " ", Num(m.point), m.unit.empty() ? "" : " ", m.unit,
                    " [", Num(m.lo), ", ", Num(m.hi), "]  (", br(m.parameters), " | ",
                    br(m.prior_parameters), " | ", br(m.workload), " | ",
                    br(m.structural), ")\n");
  }
  for (const std::string& n : report.notes) absl::StrAppend(&out, "note: ", n, "\n");
  return out;
}

}  // namespace servesim
