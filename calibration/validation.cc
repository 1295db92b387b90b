#include "calibration/validation.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "calibration/coverage.h"
#include "calibration/embedded_data.h"
#include "calibration/physics.h"
#include "calibration/predictor.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/text_format.h"
#include "hwmodels/calibration_profile.h"
#include "hwmodels/catalog.h"
#include "hwmodels/catalog_priors.h"
#include "hwmodels/deployment.h"
#include "hwmodels/step_model.h"
#include "proto/text_format.h"
#include "sim/base/hash.h"
#include "sim/base/json_writer.h"
#include "sim/base/median.h"
#include "sim/base/read_file.h"
#include "sim/base/status_macros.h"

namespace servesim {
namespace {

using servesim::proto::ClientMethod;
using servesim::proto::FitConfig;
using servesim::proto::FitSpec;
using servesim::proto::Measurement;

// Points measured in the same benchmark cell are held out together.
std::string CellKeyOf(const Measurement& m) {
  const ClientMethod& c = m.client();
  if (c.kind() == ClientMethod::SERVER_LOG) return absl::StrCat(m.run(), "|log|", m.id());
  std::string key = absl::StrFormat(
      "%s|%s|c%d|n%d|in%d|out%d|%d-%d", m.run(), ClientMethod::Kind_Name(c.kind()),
      c.max_concurrency(), c.num_prompts(), c.input_tokens(), c.output_tokens(),
      c.short_output_tokens(), c.long_output_tokens());
  if (c.kind() == ClientMethod::BENCH_SERVE_OPEN_LOOP) {
    absl::StrAppend(
        &key, absl::StrFormat("|rate%.17g|b%.17g", c.request_rate(), c.burstiness()));
  }
  if (c.input_lens_size() > 0) {
    // Per-request lengths (and send times): one fingerprint (FNV-1a).
    Fnv1a64 fnv;
    auto mix = [&fnv](uint64_t x) { fnv.AddU64(x); };
    for (int i = 0; i < c.input_lens_size(); ++i) {
      mix(static_cast<uint64_t>(c.input_lens(i)));
      mix(static_cast<uint64_t>(c.output_lens(i)));
    }
    for (double t : c.send_times_s()) mix(static_cast<uint64_t>(std::llround(t * 1e9)));
    for (int32_t i : c.unmeasured()) mix(static_cast<uint64_t>(i) | (1ull << 40));
    absl::StrAppend(&key, absl::StrFormat("|lens%016x", fnv.value()));
  }
  return key;
}

double Pct(double pred, double meas) {
  if (!(meas > 0) || !std::isfinite(pred)) return std::nan("");
  return 100.0 * (pred / meas - 1.0);
}

const FitSpec* FindSpec(const FitConfig& config, const std::string& device,
                        const std::string& build) {
  for (const FitSpec& s : config.fits()) {
    if (s.device() == device &&
        (s.software_build() == build || s.software_build().empty())) {
      return &s;
    }
  }
  return nullptr;
}

// Mean / max of |x| over finite values.
std::pair<double, double> MeanMaxAbs(const std::vector<double>& v) {
  double sum = 0, mx = 0;
  int n = 0;
  for (double x : v) {
    if (!std::isfinite(x)) continue;
    sum += std::abs(x);
    mx = std::max(mx, std::abs(x));
    ++n;
  }
  return {n ? sum / n : 0.0, mx};
}

std::string Num(double v) {
  if (!std::isfinite(v)) return "-";
  const double a = std::abs(v);
  if (a >= 1e5) return absl::StrFormat("%.0f", v);
  if (a >= 100) return absl::StrFormat("%.1f", v);
  if (a >= 1) return absl::StrFormat("%.2f", v);
  return absl::StrFormat("%.3f", v);
}

std::string PctStr(double v) {
  if (!std::isfinite(v)) return "-";
  return absl::StrFormat("%+.1f", v);
}

// `text` broken at spaces into lines of at most `width` characters (a
// longer word stands alone), each after `indent` spaces, newline-ended.
std::string WrapIndented(const std::string& text, int indent, int width) {
  std::string out, line;
  const std::string pad(indent, ' ');
  for (const absl::string_view word : absl::StrSplit(text, ' ', absl::SkipEmpty())) {
    if (!line.empty() &&
        static_cast<int>(line.size() + 1 + word.size()) > width - indent) {
      absl::StrAppend(&out, pad, line, "\n");
      line.clear();
    }
    absl::StrAppend(&line, line.empty() ? "" : " ", word);
  }
  if (!line.empty()) absl::StrAppend(&out, pad, line, "\n");
  return out;
}

}  // namespace

std::string ValidateMetricFamily(const std::string& metric) {
  if (metric == "output_throughput" || metric == "total_throughput" ||
      metric == "decode_rate") {
    return "throughput";
  }
  if (metric == "mean_ttft_ms" || metric == "median_ttft_ms" || metric == "p99_ttft_ms") {
    return "ttft";
  }
  if (metric == "median_tpot_ms" || metric == "median_itl_ms" || metric == "p99_itl_ms") {
    return "tpot";
  }
  return "";
}

absl::StatusOr<FitConfig> LoadFitConfig(const std::string& path) {
  ASSIGN_OR_RETURN(const std::string text, ReadTextFile(path, "fit config"));
  FitConfig config;
  RETURN_IF_ERROR(ParseTextProto(text, path, &config));
  RETURN_IF_ERROR(CheckFitSpecs(config, path));
  RETURN_IF_ERROR(CheckJointFits(config, path));
  RETURN_IF_ERROR(CheckKnownGaps(config, path));
  return config;
}

absl::StatusOr<FitConfig> LoadNamedFitConfig(const std::string& path) {
  if (path != kDefaultFitConfig) return LoadFitConfig(path);
  FitConfig config;
  RETURN_IF_ERROR(ParseTextProto(internal::kEmbeddedFitConfigFiles[0].text,
                                 kDefaultFitConfig, &config));
  RETURN_IF_ERROR(CheckFitSpecs(config, kDefaultFitConfig));
  RETURN_IF_ERROR(CheckJointFits(config, kDefaultFitConfig));
  RETURN_IF_ERROR(CheckKnownGaps(config, kDefaultFitConfig));
  return config;
}

namespace {

constexpr const char* kBlockPasses[] = {kLeaveOneInputLengthOut, kLeaveOneConcurrencyOut,
                                        kLeaveOneModelOut, kLeaveOneDeviceOut};

// The metric names a measurement can carry (lower-case Metric values).
std::vector<std::string> MetricNames() {
  std::vector<std::string> out;
  const auto* e = servesim::proto::Metric_descriptor();
  for (int i = 0; i < e->value_count(); ++i) {
    const auto m = static_cast<servesim::proto::Metric>(e->value(i)->number());
    if (m != servesim::proto::METRIC_UNSPECIFIED) out.push_back(MetricName(m));
  }
  return out;
}

bool Listed(const std::vector<std::string>& list, const std::string& v) {
  return std::find(list.begin(), list.end(), v) != list.end();
}

bool LimitInRange(double v) { return std::isfinite(v) && v > 0 && v <= 1e4; }

}  // namespace

absl::Status CheckFitSpecs(const FitConfig& config, const std::string& path) {
  std::vector<std::string> params = {kApiOverheadParam, kParallelCallExtraParam};
  for (const StepParameterSpec& p : StepParameterTable()) params.emplace_back(p.name);
  const std::vector<std::string> metrics = MetricNames();
  if (config.fits().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        path,
        ": no fits entry (every device would keep its priors; an entry with no "
        "free_parameters says so explicitly)"));
  }
  std::set<std::pair<std::string, std::string>> seen;
  for (int i = 0; i < config.fits_size(); ++i) {
    const FitSpec& spec = config.fits(i);
    const std::string where = absl::StrFormat("%s: fits[%d]", path, i);
    if (spec.device().empty()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": device is empty"));
    }
    if (absl::Status st = FindDevice(spec.device()).status(); !st.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": ", st.message()));
    }
    if (!seen.insert({spec.device(), spec.software_build()}).second) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: %s / %s has an earlier fits entry (one per device and "
                          "software_build)",
                          where, spec.device(), spec.software_build()));
    }
    std::set<std::string> names;
    for (const std::string& name : spec.free_parameters()) {
      if (!names.insert(name).second) {
        return absl::InvalidArgumentError(
            absl::StrFormat("%s (%s / %s): free parameter '%s' is listed twice", where,
                            spec.device(), spec.software_build(), name));
      }
      if (!Listed(params, name)) {
        return absl::InvalidArgumentError(
            absl::StrFormat("%s (%s / %s): free parameter '%s' is not a parameter; "
                            "allowed: %s",
                            where, spec.device(), spec.software_build(), name,
                            absl::StrJoin(params, ", ")));
      }
    }
    const double h = spec.huber_delta();
    if (h != 0 && !(std::isfinite(h) && h >= 1e-3 && h <= 1e3)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: huber_delta %g is out of range (allowed: 0 for the default 1, or [1e-3, "
          "1e3])",
          where, h));
    }
  }
  for (int i = 0; i < config.block_targets_size(); ++i) {
    const servesim::proto::BlockTarget& t = config.block_targets(i);
    const std::string where = absl::StrFormat("%s: block_targets[%d]", path, i);
    if (t.passes().empty()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": no passes"));
    }
    for (const std::string& pass : t.passes()) {
      if (std::find(std::begin(kBlockPasses), std::end(kBlockPasses), pass) ==
          std::end(kBlockPasses)) {
        return absl::InvalidArgumentError(
            absl::StrFormat("%s: passes: '%s' is not a block pass (allowed: %s)", where,
                            pass, absl::StrJoin(kBlockPasses, ", ")));
      }
    }
    for (const std::string& metric : t.metrics()) {
      if (!Listed(metrics, metric)) {
        return absl::InvalidArgumentError(
            absl::StrFormat("%s: metrics: '%s' is not a metric (allowed: %s)", where,
                            metric, absl::StrJoin(metrics, ", ")));
      }
    }
    for (int k = 0; k < t.limits_size(); ++k) {
      const auto& limit = t.limits(k);
      if (limit.statistic() != "MAPE" && limit.statistic() != "worst") {
        return absl::InvalidArgumentError(
            absl::StrFormat("%s: limits[%d]: statistic '%s' (allowed: MAPE, worst)",
                            where, k, limit.statistic()));
      }
      if (!LimitInRange(limit.limit_pct())) {
        return absl::InvalidArgumentError(
            absl::StrFormat("%s: limits[%d]: limit_pct %g is out of range (0, 1e4]",
                            where, k, limit.limit_pct()));
      }
    }
  }
  for (int i = 0; i < config.point_set_targets_size(); ++i) {
    const servesim::proto::PointSetTarget& t = config.point_set_targets(i);
    const std::string where = absl::StrFormat("%s: point_set_targets[%d]", path, i);
    if (absl::Status st = FindDevice(t.device()).status(); !st.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": ", st.message()));
    }
    if (!Listed(metrics, t.metric())) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: metric '%s' is not a metric (allowed: %s)", where,
                          t.metric(), absl::StrJoin(metrics, ", ")));
    }
    if (!LimitInRange(t.limit_pct())) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: limit_pct %g is out of range (0, 1e4]", where, t.limit_pct()));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckJointFits(const FitConfig& config, const std::string& path) {
  std::set<std::pair<std::string, std::string>> seen;
  for (int j = 0; j < config.joint_fits_size(); ++j) {
    const auto& jf = config.joint_fits(j);
    const std::string where = absl::StrFormat("%s: joint_fits[%d]", path, j);
    if (jf.members_size() < 2) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: %d member(s); a joint fit needs at least 2", where, jf.members_size()));
    }
    if (jf.shared_parameters_size() == 0) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: no shared_parameters (members that share nothing are "
                          "fitted alone)",
                          where));
    }
    for (const auto& mem : jf.members()) {
      const FitSpec* spec = nullptr;
      for (const FitSpec& s : config.fits()) {
        if (s.device() == mem.device() && s.software_build() == mem.software_build()) {
          spec = &s;
        }
      }
      if (spec == nullptr) {
        return absl::InvalidArgumentError(
            absl::StrFormat("%s: member %s / %s has no `fits` entry with that device and "
                            "software_build",
                            where, mem.device(), mem.software_build()));
      }
      if (!seen.insert({mem.device(), mem.software_build()}).second) {
        return absl::InvalidArgumentError(
            absl::StrFormat("%s: %s / %s is listed twice or in two joint fits", where,
                            mem.device(), mem.software_build()));
      }
      for (const std::string& name : jf.shared_parameters()) {
        if (std::find(spec->free_parameters().begin(), spec->free_parameters().end(),
                      name) == spec->free_parameters().end()) {
          return absl::InvalidArgumentError(absl::StrFormat(
              "%s: shared parameter '%s' is not a free parameter of %s / %s", where, name,
              mem.device(), mem.software_build()));
        }
      }
    }
  }
  return absl::OkStatus();
}

absl::Status CheckKnownGaps(const FitConfig& config, const std::string& path) {
  for (int i = 0; i < config.known_gaps_size(); ++i) {
    const servesim::proto::KnownGap& gap = config.known_gaps(i);
    const std::string where = absl::StrFormat("%s: known_gaps[%d]", path, i);
    auto bad = [&where](const std::string& what) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": ", what));
    };
    if (gap.device().empty())
      return bad("no device (the device whose misses it explains)");
    if (gap.passes().empty() && gap.metrics().empty() && gap.points().empty()) {
      return bad(absl::StrCat(
          "device ", gap.device(),
          ": set passes, metrics or points (a gap for every check of a device explains "
          "nothing)"));
    }
    for (const std::string& pass : gap.passes()) {
      if (std::find(std::begin(kBlockPasses), std::end(kBlockPasses), pass) ==
          std::end(kBlockPasses)) {
        return bad(absl::StrFormat("passes: '%s' is not a block pass (allowed: %s)", pass,
                                   absl::StrJoin(kBlockPasses, ", ")));
      }
    }
    if (gap.missing().empty()) return bad("missing: empty (the term the model lacks)");
    if (gap.settle_with().empty()) {
      return bad("settle_with: empty (the measurement that would settle it)");
    }
  }
  return absl::OkStatus();
}

namespace {

// One (device, software build) group: its points, predictor and fit options.
struct GroupData {
  std::string device, build;
  std::vector<std::string> ids;
  std::optional<Predictor> predictor;
  std::vector<FitPoint> pts;
  std::vector<std::string> cells;
  FitOptions fo;
  bool reported = true;  // matches the device filter
  // Per point: the physics rule's reason when its cell is excluded.
  std::vector<std::string> excluded;
  // Block pass -> per point block label ("" never held out), for the passes
  // with at least two blocks holding a fitted point.
  std::map<std::string, std::vector<std::string>> block_labels;
};

// A fitted group: parameters at the fit, and every point held out.
struct GroupFit {
  ParameterSet params;
  std::vector<double> held_out;
  bool converged = true;
  int iterations = 0;
  std::vector<std::string> joint_with, shared;
  std::string joint_reason;
  int joint_fit_points = 0;  // fitted points of the whole joint problem
  // Block pass -> every point predicted by the refit without its block.
  std::map<std::string, std::vector<double>> block_held_out;
  // The fit's covariance over this group's free parameters (FitResult).
  std::vector<std::string> covariance_names;
  std::vector<double> covariance;
};

std::string GroupName(const GroupData& g) {
  return absl::StrCat(g.device, " / ", g.build);
}

// The block of a point in a block pass ("" : in no block). Bench cells of
// fixed lengths have an input length and a concurrency; every timed point
// has its run's model. Memory-log rows are in no block.
std::string BlockLabel(const std::string& pass, const Measurement& m,
                       const servesim::proto::ServerRun& run) {
  const ClientMethod& c = m.client();
  if (c.kind() == ClientMethod::SERVER_LOG ||
      c.kind() == ClientMethod::KIND_UNSPECIFIED) {
    return "";
  }
  if (pass == kLeaveOneInputLengthOut) {
    if (c.input_lens_size() > 0) return "";
    return absl::StrCat("in", c.input_tokens());
  }
  if (pass == kLeaveOneConcurrencyOut) {
    if (c.kind() == ClientMethod::SAGEMAKER_DECODE_RATE) return "c1";
    if (c.kind() == ClientMethod::BENCH_SERVE_OPEN_LOOP || c.max_concurrency() <= 0) {
      return "";
    }
    return absl::StrCat("c", c.max_concurrency());
  }
  if (pass == kLeaveOneModelOut) return run.model();
  return "";
}

// Metrics the block passes grade (the per-dollar and cost rows are the
// throughput divided by a price, the memory rows come from the planner).
bool BlockGraded(const std::string& metric) {
  return !ValidateMetricFamily(metric).empty();
}

// Per-metric held-out errors of points (id, metric, error %), metrics in
// name order.
std::vector<MetricError> ErrorsByMetric(
    const std::vector<std::tuple<std::string, std::string, double>>& errs) {
  std::map<std::string, MetricError> by;
  for (const auto& [id, metric, e] : errs) {
    if (!std::isfinite(e)) continue;
    MetricError& me = by[metric];
    me.metric = metric;
    ++me.num_points;
    me.mape += std::abs(e);
    if (me.worst_id.empty() || std::abs(e) > std::abs(me.worst_error_pct)) {
      me.worst_id = id;
      me.worst_error_pct = e;
    }
  }
  std::vector<MetricError> out;
  for (auto& [metric, me] : by) {
    me.mape /= me.num_points;
    out.push_back(me);
  }
  return out;
}

// Name of a member's own (unshared) parameter in a joint problem.
std::string JointName(size_t member, const std::string& name) {
  return absl::StrCat("m", member, ":", name);
}

// Fits the members together: each keeps its own free parameters, the shared
// ones take one value. Leave-one-cell-out refits the whole joint problem.
absl::StatusOr<std::vector<GroupFit>> FitJointly(const std::vector<GroupData*>& members,
                                                 const std::vector<std::string>& shared,
                                                 bool skip_loo) {
  const std::set<std::string> shared_set(shared.begin(), shared.end());
  ParameterSet start;
  FitOptions fo = members[0]->fo;
  fo.free_parameters.clear();
  for (const GroupData* g : members) {
    if (g->fo.huber_delta != fo.huber_delta) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "fit config: %s and %s are fitted jointly but have different huber_delta "
          "(%g, %g)",
          GroupName(*members[0]), GroupName(*g), fo.huber_delta, g->fo.huber_delta));
    }
  }
  std::vector<FitPoint> pts;
  std::vector<std::string> cells;
  std::vector<size_t> offset;
  for (size_t k = 0; k < members.size(); ++k) {
    const GroupData& g = *members[k];
    const ParameterSet& prior = g.predictor->prior_params();
    for (const std::string& name : g.fo.free_parameters) {
      const Parameter* q = prior.Find(name);
      if (q == nullptr) {
        return absl::InvalidArgumentError(
            absl::StrFormat("fit config: free parameter '%s' is not a parameter of %s",
                            name, GroupName(g)));
      }
      if (shared_set.count(name)) continue;
      Parameter own = *q;
      own.name = JointName(k, name);
      start.mutable_params().push_back(own);
      fo.free_parameters.push_back(own.name);
    }
    for (const std::string& name : shared) {
      if (std::find(g.fo.free_parameters.begin(), g.fo.free_parameters.end(), name) ==
          g.fo.free_parameters.end()) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "fit config: shared parameter '%s' is not free in %s", name, GroupName(g)));
      }
    }
    offset.push_back(pts.size());
    pts.insert(pts.end(), g.pts.begin(), g.pts.end());
    cells.insert(cells.end(), g.cells.begin(), g.cells.end());
  }
  // A shared parameter must mean the same in every member: same prior,
  // width and bounds (so the fit does not depend on the members' order).
  for (const std::string& name : shared) {
    const Parameter& first = *members[0]->predictor->prior_params().Find(name);
    for (size_t k = 1; k < members.size(); ++k) {
      const Parameter& q = *members[k]->predictor->prior_params().Find(name);
      if (q.prior != first.prior || q.prior_sigma != first.prior_sigma ||
          q.lower != first.lower || q.upper != first.upper) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "fit config: shared parameter '%s' has prior %g +- %g in [%g, %g] in %s but "
            "%g +- %g in [%g, %g] in %s; a shared parameter needs one prior",
            name, first.prior, first.prior_sigma, first.lower, first.upper,
            GroupName(*members[0]), q.prior, q.prior_sigma, q.lower, q.upper,
            GroupName(*members[k])));
      }
    }
    start.mutable_params().push_back(first);
    fo.free_parameters.push_back(name);
  }
  // The member's parameter set at the joint values.
  auto member_params = [&](size_t k, const ParameterSet& joint) {
    ParameterSet q = members[k]->predictor->prior_params();
    for (const std::string& name : members[k]->fo.free_parameters) {
      const Parameter* j = joint.Find(shared_set.count(name) ? name : JointName(k, name));
      Parameter* dst = q.FindMutable(name);
      dst->value = j->value;
      dst->std_error = j->std_error;
    }
    return q;
  };
  // Memoized: every refit starts where the all-points fit did.
  const PredictFn fn = MemoizePredict(
      [&](const ParameterSet& joint) -> absl::StatusOr<std::vector<double>> {
        std::vector<double> out;
        out.reserve(pts.size());
        for (size_t k = 0; k < members.size(); ++k) {
          ASSIGN_OR_RETURN(std::vector<double> v,
                           members[k]->predictor->PredictValues(member_params(k, joint)));
          out.insert(out.end(), v.begin(), v.end());
        }
        return out;
      });
  // The all-points fit and every refit, in one pool of tasks.
  std::vector<std::vector<std::string>> labelings;
  std::set<std::string> passes;
  if (!skip_loo) {
    labelings.push_back(cells);
    // Block passes: a member's block is held out of the whole joint
    // problem (labels carry the member index, so one member's block at a
    // time).
    for (const GroupData* g : members) {
      for (const auto& [pass, labels] : g->block_labels) passes.insert(pass);
    }
    for (const std::string& pass : passes) {
      std::vector<std::string>& labels = labelings.emplace_back();
      for (size_t k = 0; k < members.size(); ++k) {
        auto it = members[k]->block_labels.find(pass);
        for (size_t i = 0; i < members[k]->pts.size(); ++i) {
          const std::string& l =
              it == members[k]->block_labels.end() ? "" : it->second[i];
          labels.push_back(l.empty() ? "" : absl::StrCat("m", k, ":", l));
        }
      }
    }
  }
  ASSIGN_OR_RETURN(GroupsLeftOut left_out, LeaveGroupsOut(start, pts, labelings, fn, fo));
  const FitResult& fit = left_out.all;
  std::vector<double> held_out = fit.predicted;
  std::map<std::string, std::vector<double>> block_held_out;
  if (!skip_loo) {
    held_out = std::move(left_out.held_out[0]);
    size_t l = 1;
    for (const std::string& pass : passes) {
      block_held_out[pass] = std::move(left_out.held_out[l++]);
    }
  }
  std::vector<GroupFit> out(members.size());
  for (size_t k = 0; k < members.size(); ++k) {
    GroupFit& f = out[k];
    f.params = member_params(k, fit.params);
    auto slice = [&](const std::vector<double>& v) {
      return std::vector<double>(
          v.begin() + static_cast<std::ptrdiff_t>(offset[k]),
          v.begin() + static_cast<std::ptrdiff_t>(offset[k] + members[k]->pts.size()));
    };
    f.held_out = slice(held_out);
    for (const auto& [pass, v] : block_held_out) {
      if (members[k]->block_labels.count(pass)) f.block_held_out[pass] = slice(v);
    }
    f.converged = fit.converged;
    f.iterations = fit.iterations;
    // The member's block of the joint covariance, under its own names.
    {
      std::vector<int> rows;
      for (const std::string& name : members[k]->fo.free_parameters) {
        const std::string jn = shared_set.count(name) ? name : JointName(k, name);
        const auto it =
            std::find(fit.covariance_names.begin(), fit.covariance_names.end(), jn);
        if (it == fit.covariance_names.end()) continue;
        rows.push_back(static_cast<int>(it - fit.covariance_names.begin()));
        f.covariance_names.push_back(name);
      }
      const size_t n = fit.covariance_names.size();
      for (int a : rows) {
        for (int b : rows) f.covariance.push_back(fit.covariance[a * n + b]);
      }
    }
    f.shared = shared;
    f.joint_fit_points = fit.num_used;
    for (size_t j = 0; j < members.size(); ++j) {
      if (j != k) f.joint_with.push_back(GroupName(*members[j]));
    }
  }
  return out;
}

using GroupKey = std::pair<std::string, std::string>;  // (device, software build)

// The measurements by (device, software build), in name order. Groups
// outside the device filter are kept only to be fitted with a reported
// joint partner. NotFound when the filter matches no measurement.
absl::StatusOr<std::map<GroupKey, GroupData>> GroupMeasurements(
    const MeasurementDb& db, const ValidateOptions& options) {
  std::map<GroupKey, GroupData> groups;
  for (const Measurement& m : db.measurements()) {
    const auto* run = db.FindRun(m.run());
    GroupData& g = groups[{run->device(), run->software_build()}];
    g.device = run->device();
    g.build = run->software_build();
    g.reported = options.device.empty() || run->device() == options.device;
    g.ids.push_back(m.id());
  }
  bool any_reported = false;
  for (const auto& [key, g] : groups) any_reported |= g.reported;
  if (!any_reported) {
    return absl::NotFoundError(
        groups.empty() ? std::string("validate: the data files hold no measurement")
                       : absl::StrFormat("validate: no measurements for device '%s'",
                                         options.device));
  }
  return groups;
}

// The joint fits whose members all have data: group -> index in
// fit_config.joint_fits. A group belongs to one at most.
absl::StatusOr<std::map<GroupKey, int>> CompleteJointFits(
    const FitConfig& fit_config, const std::map<GroupKey, GroupData>& groups) {
  std::map<GroupKey, int> joint_of;
  for (int j = 0; j < fit_config.joint_fits_size(); ++j) {
    const auto& jf = fit_config.joint_fits(j);
    bool complete = jf.members_size() > 1;
    for (const auto& mem : jf.members()) {
      complete &= groups.count({mem.device(), mem.software_build()}) > 0;
    }
    if (!complete) continue;
    for (const auto& mem : jf.members()) {
      const auto key = std::make_pair(mem.device(), mem.software_build());
      if (joint_of.count(key)) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "fit config: %s / %s is in two joint fits", key.first, key.second));
      }
      joint_of[key] = j;
    }
  }
  return joint_of;
}

// The physics rule: a cell whose measured mean TTFT is below what fresh
// prompts allow is excluded, every point of it.
void ExcludeImpossibleTtftCells(const MeasurementDb& db, GroupData& g) {
  std::map<std::string, std::string> bad_cells;
  for (size_t i = 0; i < g.ids.size(); ++i) {
    const Measurement& m = *db.FindMeasurement(g.ids[i]);
    const ClientMethod& c = m.client();
    if (m.metric() != servesim::proto::MEAN_TTFT_MS ||
        c.kind() != ClientMethod::BENCH_SERVE_CLOSED_LOOP || c.input_lens_size() > 0 ||
        !(m.value() > 0)) {
      continue;
    }
    const Deployment* d = g.predictor->FindDeployment(m.run());
    if (d == nullptr || d->graph == nullptr) continue;
    const int32_t n =
        c.num_prompts() > 0 ? c.num_prompts() : std::max(8, 2 * c.max_concurrency());
    std::string why =
        ImpossibleTtftReason(*d, c.max_concurrency(), n, c.input_tokens(), m.value());
    if (!why.empty()) bad_cells[g.cells[i]] = why;
  }
  for (size_t i = 0; i < g.ids.size(); ++i) {
    auto it = bad_cells.find(g.cells[i]);
    if (it == bad_cells.end()) continue;
    g.excluded[i] = it->second;
    g.pts[i].use = false;
  }
}

// The warm-up rule: a closed-loop cell whose mean TTFT one or two requests
// carry loses its mean and p99 TTFT (the median stays).
void ExcludeWarmupOutliers(const MeasurementDb& db, GroupData& g) {
  struct Ttfts {
    double mean = 0, median = 0, p99 = 0;
    int32_t n = 0;
  };
  std::map<std::string, Ttfts> ttfts;
  for (size_t i = 0; i < g.ids.size(); ++i) {
    const Measurement& m = *db.FindMeasurement(g.ids[i]);
    const ClientMethod& c = m.client();
    if (c.kind() != ClientMethod::BENCH_SERVE_CLOSED_LOOP || !(m.value() > 0)) continue;
    Ttfts& t = ttfts[g.cells[i]];
    t.n = c.num_prompts() > 0 ? c.num_prompts() : std::max(8, 2 * c.max_concurrency());
    if (m.metric() == servesim::proto::MEAN_TTFT_MS) t.mean = m.value();
    if (m.metric() == servesim::proto::MEDIAN_TTFT_MS) t.median = m.value();
    if (m.metric() == servesim::proto::P99_TTFT_MS) t.p99 = m.value();
  }
  for (size_t i = 0; i < g.ids.size(); ++i) {
    const Measurement& m = *db.FindMeasurement(g.ids[i]);
    if (!g.excluded[i].empty() || (m.metric() != servesim::proto::MEAN_TTFT_MS &&
                                   m.metric() != servesim::proto::P99_TTFT_MS)) {
      continue;
    }
    auto it = ttfts.find(g.cells[i]);
    if (it == ttfts.end()) continue;
    const Ttfts& t = it->second;
    std::string why = WarmupOutlierReason(t.n, t.mean, t.median, t.p99);
    if (why.empty()) continue;
    g.excluded[i] = std::move(why);
    g.pts[i].use = false;
  }
}

// Block labels of the passes with at least two blocks of fitted points.
void LabelBlocks(const MeasurementDb& db, GroupData& g) {
  for (const char* pass :
       {kLeaveOneInputLengthOut, kLeaveOneConcurrencyOut, kLeaveOneModelOut}) {
    std::vector<std::string> labels;
    std::set<std::string> used;
    for (size_t i = 0; i < g.ids.size(); ++i) {
      const Measurement& m = *db.FindMeasurement(g.ids[i]);
      labels.push_back(g.excluded[i].empty() ? BlockLabel(pass, m, *db.FindRun(m.run()))
                                             : "");
      if (g.pts[i].use && !labels.back().empty()) used.insert(labels.back());
    }
    if (used.size() >= 2) g.block_labels[pass] = std::move(labels);
  }
}

// Everything a group needs before its fit: predictor, fit points, the
// exclusion rules, block labels and fit options.
absl::Status PrepareGroup(const MeasurementDb& db, const FitConfig& fit_config,
                          const ValidateOptions& options, GroupData& g) {
  ASSIGN_OR_RETURN(Predictor predictor, Predictor::Create(db, g.ids));
  g.predictor.emplace(std::move(predictor));
  for (const std::string& id : g.ids) {
    const Measurement& m = *db.FindMeasurement(id);
    FitPoint p;
    p.measured = m.value();
    p.rel_sigma = m.rel_sigma() > 0 ? m.rel_sigma() : 0.05;
    p.use = m.fit() && !m.infeasible() && m.value() > 0;
    g.pts.push_back(p);
    g.cells.push_back(CellKeyOf(m));
  }
  g.excluded.assign(g.ids.size(), "");
  ExcludeImpossibleTtftCells(db, g);
  ExcludeWarmupOutliers(db, g);
  if (!options.skip_loo) LabelBlocks(db, g);
  g.fo.jobs = options.jobs;
  const FitSpec* spec = FindSpec(fit_config, g.device, g.build);
  if (spec != nullptr) {
    g.fo.free_parameters.assign(spec->free_parameters().begin(),
                                spec->free_parameters().end());
    if (spec->huber_delta() > 0) g.fo.huber_delta = spec->huber_delta();
  }
  return absl::OkStatus();
}

// Fits every prepared group: the joint fits in `joints_needed` first, then
// the groups fitted alone (reported ones; with the block passes, every
// group with a predictor, since leave-one-device-out learns priors from
// the other devices' fits).
absl::StatusOr<std::map<GroupKey, GroupFit>> FitGroups(
    std::map<GroupKey, GroupData>& groups, const std::set<int>& joints_needed,
    const FitConfig& fit_config, const ValidateOptions& options) {
  std::map<GroupKey, GroupFit> fits;
  int fits_total = 0, fits_done = 0;
  for (int j : joints_needed) fits_total += fit_config.joint_fits(j).members_size();
  for (const auto& [key, gd] : groups) {
    bool joint = false;
    for (int j : joints_needed) {
      for (const auto& mem : fit_config.joint_fits(j).members()) {
        joint |= key == std::make_pair(mem.device(), mem.software_build());
      }
    }
    if (gd.predictor.has_value() && !joint) ++fits_total;
  }
  auto progress = [&](const std::string& label) {
    if (options.on_fit) options.on_fit(fits_done, fits_total, label);
  };
  for (int j : joints_needed) {
    const auto& jf = fit_config.joint_fits(j);
    std::vector<GroupData*> members;
    std::string label;
    for (const auto& mem : jf.members()) {
      members.push_back(&groups.at({mem.device(), mem.software_build()}));
      absl::StrAppend(&label, label.empty() ? "" : " + ", mem.device(), " / ",
                      mem.software_build());
    }
    progress(label);
    fits_done += static_cast<int>(members.size());
    ASSIGN_OR_RETURN(std::vector<GroupFit> f, FitJointly(members,
                                                         {jf.shared_parameters().begin(),
                                                          jf.shared_parameters().end()},
                                                         options.skip_loo));
    for (size_t k = 0; k < members.size(); ++k) {
      f[k].joint_reason = jf.reason();
      fits[{members[k]->device, members[k]->build}] = std::move(f[k]);
    }
  }
  for (auto& [key, gd] : groups) {
    if (!gd.predictor.has_value() || fits.count(key)) continue;
    progress(absl::StrCat(gd.device, " / ", gd.build));
    ++fits_done;
    const Predictor& predictor = *gd.predictor;
    // Memoized: every refit starts where the all-points fit did.
    const PredictFn fn = MemoizePredict(
        [&predictor](const ParameterSet& p) { return predictor.PredictValues(p); });
    const ParameterSet& start = predictor.prior_params();
    // The all-points fit, and with the held-out passes every refit of the
    // cell pass and the block passes, in one pool of tasks.
    std::vector<std::vector<std::string>> labelings;
    if (!options.skip_loo) {
      labelings.push_back(gd.cells);
      for (const auto& [pass, labels] : gd.block_labels) labelings.push_back(labels);
    }
    ASSIGN_OR_RETURN(GroupsLeftOut left_out,
                     LeaveGroupsOut(start, gd.pts, labelings, fn, gd.fo));
    const FitResult& fit = left_out.all;
    GroupFit gf;
    gf.params = fit.params;
    gf.covariance_names = fit.covariance_names;
    gf.covariance = fit.covariance;
    gf.converged = fit.converged;
    gf.iterations = fit.iterations;
    if (options.skip_loo) {
      gf.held_out = fit.predicted;
    } else {
      gf.held_out = std::move(left_out.held_out[0]);
      size_t l = 1;
      for (const auto& [pass, labels] : gd.block_labels) {
        gf.block_held_out[pass] = std::move(left_out.held_out[l++]);
      }
    }
    fits[key] = std::move(gf);
  }
  progress("");
  return fits;
}

// One reported group: its GroupReport, and its points (in-sample and
// held-out predictions, pass/fail) appended to `report`; the fitted points'
// errors appended to fit_err / loo_err.
absl::StatusOr<GroupReport> ReportGroupPoints(const MeasurementDb& db,
                                              const GroupData& gd, const GroupFit& gf,
                                              const ValidateOptions& options,
                                              ValidationReport& report,
                                              std::vector<double>& fit_err,
                                              std::vector<double>& loo_err) {
  const std::string& device = gd.device;
  const std::string& build = gd.build;
  const std::vector<std::string>& ids = gd.ids;
  const Predictor& predictor = *gd.predictor;
  const std::vector<FitPoint>& pts = gd.pts;
  const std::vector<std::string>& cells = gd.cells;
  const FitOptions& fo = gd.fo;
  ASSIGN_OR_RETURN(std::vector<PointPrediction> in_sample, predictor.Predict(gf.params));
  const std::vector<double>& held_out = gf.held_out;

  GroupReport g;
  g.device = device;
  g.software_build = build;
  g.free_parameters = fo.free_parameters;
  g.fitted = gf.params;
  g.converged = gf.converged;
  g.iterations = gf.iterations;
  g.joint_with = gf.joint_with;
  g.shared_parameters = gf.shared;
  g.joint_reason = gf.joint_reason;
  g.joint_fit_points = gf.joint_fit_points;
  g.covariance_names = gf.covariance_names;
  g.covariance = gf.covariance;
  std::set<std::string> fitted_cells;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (pts[i].use) fitted_cells.insert(cells[i]);
  }
  for (size_t i = 0; i < ids.size(); ++i) {
    const Measurement& m = *db.FindMeasurement(ids[i]);
    ValidatedPoint v;
    v.id = m.id();
    v.device = device;
    v.software_build = build;
    v.run = m.run();
    const servesim::proto::ServerRun* point_run = db.FindRun(m.run());
    v.model = point_run != nullptr ? point_run->model() : "";
    const ClientMethod& client = m.client();
    if (client.input_lens_size() > 0) {
      const auto [lo, hi] =
          std::minmax_element(client.input_lens().begin(), client.input_lens().end());
      v.min_input_tokens = *lo;
      v.max_input_tokens = *hi;
    } else {
      v.min_input_tokens = v.max_input_tokens = client.input_tokens();
    }
    v.concurrency = client.max_concurrency();
    v.metric = MetricName(m.metric());
    v.unit = m.unit();
    v.cell = absl::StrCat(m.provenance().writeup(), ": ", m.provenance().section(), ", ",
                          m.provenance().cell());
    v.measured = m.value();
    v.predicted = in_sample[i].value;
    v.held_out = held_out[i];
    v.fitted = pts[i].use;
    v.refit_without_cell = !options.skip_loo && fitted_cells.count(cells[i]) > 0;
    v.measured_infeasible = m.infeasible();
    v.predicted_feasible = in_sample[i].feasible;
    v.estimated = in_sample[i].estimated_value;
    v.tolerance_pct = m.tolerance_pct();
    v.tolerance_rule = m.tolerance_rule();
    v.note = in_sample[i].note;
    v.error_pct = Pct(v.predicted, v.measured);
    v.held_out_error_pct = Pct(v.held_out, v.measured);
    v.excluded = gd.excluded[i];
    for (const auto& [pass, pred] : gf.block_held_out) {
      if (!gd.block_labels.at(pass)[i].empty()) {
        v.block_held_out[pass] = pred[i];
        v.block_of[pass] = gd.block_labels.at(pass)[i];
      }
    }
    if (!v.excluded.empty()) {
      report.excluded.push_back(absl::StrCat(v.id, ": ", v.excluded));
    } else if (m.infeasible()) {
      v.checked = true;
      v.pass = !v.predicted_feasible;
      v.tolerance_rule = "measured infeasible: the simulator must reject the cell";
    } else if (m.metric() == servesim::proto::FITS_IN_MEMORY) {
      v.checked = true;
      v.pass = v.predicted == v.measured;
      v.error_pct = v.held_out_error_pct = std::nan("");
    } else if (m.tolerance_pct() > 0) {
      v.checked = true;
      v.pass = v.predicted_feasible && std::isfinite(v.held_out_error_pct) &&
               std::abs(v.held_out_error_pct) <= m.tolerance_pct();
      if (std::isfinite(v.held_out_error_pct) &&
          std::abs(v.held_out_error_pct) > report.worst_held_out_error_pct) {
        report.worst_held_out_error_pct = std::abs(v.held_out_error_pct);
        report.worst_id = v.id;
      }
    }
    if (v.fitted) {
      fit_err.push_back(v.error_pct);
      loo_err.push_back(v.held_out_error_pct);
      const double e = std::abs(v.held_out_error_pct);
      if (std::isfinite(e) && (g.worst_id.empty() || e > g.loo_max_ape)) {
        g.worst_id = v.id;
        g.loo_max_ape = e;
      }
    }
    if (v.checked) {
      ++report.num_checked;
      if (!v.pass) ++report.num_failed;
    }
    report.points.push_back(std::move(v));
  }
  return g;
}

// The leave-one-input-length / concurrency / model-out passes of one
// reported group (the refits ran in FitGroups), graded on `points`, the
// group's points in the report.
void ReportBlockPasses(const GroupData& gd, const ValidateOptions& options,
                       const ValidatedPoint* points, ValidationReport& report) {
  for (const char* pass :
       {kLeaveOneInputLengthOut, kLeaveOneConcurrencyOut, kLeaveOneModelOut}) {
    BlockPass bp;
    bp.pass = pass;
    bp.device = gd.device;
    bp.software_build = gd.build;
    auto lit = gd.block_labels.find(pass);
    bp.applicable = lit != gd.block_labels.end();
    if (options.skip_loo) {
      bp.note = "skipped (--no-held-out)";
    } else if (!bp.applicable) {
      bp.note = "not applicable: fewer than two blocks hold a fitted point";
    } else {
      std::map<std::string, std::vector<std::tuple<std::string, std::string, double>>>
          by_block;
      std::vector<std::tuple<std::string, std::string, double>> all;
      for (size_t i = 0; i < gd.ids.size(); ++i) {
        const ValidatedPoint& v = points[i];
        auto it = v.block_held_out.find(pass);
        if (it == v.block_held_out.end() || !BlockGraded(v.metric) ||
            v.measured_infeasible || !(v.measured > 0)) {
          continue;
        }
        const double e = Pct(it->second, v.measured);
        by_block[lit->second[i]].emplace_back(v.id, v.metric, e);
        all.emplace_back(v.id, v.metric, e);
      }
      for (const auto& [key, errs] : by_block) {
        bp.blocks.push_back(BlockResult{key, ErrorsByMetric(errs)});
      }
      bp.overall = ErrorsByMetric(all);
    }
    report.blocks.push_back(std::move(bp));
  }
}

// Leave-one-device-out of one reported group: no fit on this device; its
// free efficiencies take the median of the values fitted on other devices'
// groups that were not fitted jointly with a group of this device. Fills
// the block predictions of `points` (the group's points in the report).
absl::StatusOr<BlockPass> DeviceOutPass(
    const GroupData& gd, const std::map<GroupKey, GroupData>& groups,
    const std::map<GroupKey, GroupFit>& fits, const std::map<GroupKey, int>& joint_of,
    const FitConfig& fit_config, const ValidateOptions& options, ValidatedPoint* points) {
  const std::string& device = gd.device;
  const std::vector<std::string>& ids = gd.ids;
  const Predictor& predictor = *gd.predictor;
  const FitOptions& fo = gd.fo;
  BlockPass bp;
  bp.pass = kLeaveOneDeviceOut;
  bp.device = device;
  bp.software_build = gd.build;
  if (options.skip_loo) {
    bp.note = "skipped (--no-held-out)";
  } else if (!options.device.empty()) {
    bp.note = "not applicable with --device (the other devices are not fitted)";
  } else if (fo.free_parameters.empty()) {
    bp.note = "not applicable: no free parameters (priors only)";
  } else {
    ParameterSet q = predictor.prior_params();
    std::vector<std::string> learned;
    int num_learned = 0;
    // A joint fit's shared parameters belong to what its members share (a
    // client), not to a device: they are learned from a refit of the other
    // members alone, without any point of this device (the joint fit saw
    // them, so its values would leak this device's data). That refit's
    // efficiencies are not used: the members' kernels differ (T4's
    // Turing patch, L4's Marlin; docs/validation.md has the numbers).
    const GroupKey self{gd.device, gd.build};
    std::set<std::string> shared;
    std::map<GroupKey, ParameterSet> solo;  // other members, refit alone
    if (joint_of.count(self)) {
      const auto& jf = fit_config.joint_fits(joint_of.at(self));
      shared.insert(jf.shared_parameters().begin(), jf.shared_parameters().end());
      for (const auto& mem : jf.members()) {
        const GroupKey k{mem.device(), mem.software_build()};
        if (mem.device() == device || !groups.count(k)) continue;
        const GroupData& og = groups.at(k);
        if (!og.predictor.has_value()) continue;
        const Predictor& op = *og.predictor;
        const PredictFn fn = [&op](const ParameterSet& p) { return op.PredictValues(p); };
        ASSIGN_OR_RETURN(FitResult f,
                         FitParameters(op.prior_params(), og.pts, fn, og.fo));
        solo.emplace(k, std::move(f.params));
      }
    }
    for (const std::string& name : fo.free_parameters) {
      if (shared.count(name) && !solo.empty()) {
        std::vector<double> vals;
        std::vector<std::string> from;
        for (const auto& [k, params] : solo) {
          const Parameter* fp = params.Find(name);
          if (fp == nullptr) continue;
          vals.push_back(fp->value);
          from.push_back(absl::StrCat(k.first, " / ", k.second));
        }
        Parameter* dst = q.FindMutable(name);
        if (!vals.empty() && dst != nullptr) {
          dst->value = std::clamp(Median(vals), dst->lower, dst->upper);
          ++num_learned;
          learned.push_back(absl::StrFormat("%s %.4g (shared: refit on %s alone)", name,
                                            dst->value, absl::StrJoin(from, ", ")));
          continue;
        }
      }
      // Only the efficiencies and the GEMM shape law's constant transfer
      // across devices (TransfersAcrossDevices: also the rule of an
      // uncalibrated device's priors); times and counts belong to a
      // serving stack or a kernel and keep this device's prior.
      const Parameter* own = q.Find(name);
      if (own != nullptr && !TransfersAcrossDevices(name)) {
        learned.push_back(
            absl::StrFormat("%s prior %.4g (not an efficiency)", name, own->value));
        continue;
      }
      std::vector<double> vals;
      for (const auto& [okey, og] : groups) {
        if (okey.first == device || !fits.count(okey)) continue;
        if (joint_of.count(okey)) {
          bool with_this_device = false;
          const auto& jf = fit_config.joint_fits(joint_of.at(okey));
          for (const auto& mem : jf.members()) with_this_device |= mem.device() == device;
          if (with_this_device) continue;
        }
        if (std::find(og.fo.free_parameters.begin(), og.fo.free_parameters.end(), name) ==
            og.fo.free_parameters.end()) {
          continue;
        }
        const Parameter* fp = fits.at(okey).params.Find(name);
        if (fp != nullptr) vals.push_back(fp->value);
      }
      Parameter* dst = q.FindMutable(name);
      if (vals.empty() || dst == nullptr) {
        learned.push_back(absl::StrFormat("%s prior %.4g (no other device fits it)", name,
                                          dst == nullptr ? 0.0 : dst->value));
        continue;
      }
      const size_t n = vals.size();
      dst->value = std::clamp(Median(vals), dst->lower, dst->upper);
      ++num_learned;
      learned.push_back(
          absl::StrFormat("%s %.4g (median of %d groups)", name, dst->value, n));
    }
    std::vector<double> pred(ids.size(), std::nan(""));
    if (num_learned > 0) {
      ASSIGN_OR_RETURN(pred, predictor.PredictValues(q));
    }
    std::vector<std::tuple<std::string, std::string, double>> all;
    for (size_t i = 0; i < ids.size(); ++i) {
      ValidatedPoint& v = points[i];
      if (!v.excluded.empty() || !BlockGraded(v.metric) || v.measured_infeasible ||
          !(v.measured > 0)) {
        continue;
      }
      v.block_held_out[kLeaveOneDeviceOut] = pred[i];
      v.block_of[kLeaveOneDeviceOut] = device;
      all.emplace_back(v.id, v.metric, Pct(pred[i], v.measured));
    }
    bp.applicable = !all.empty() && num_learned > 0;
    bp.note = absl::StrCat("datasheet priors; learned from the other devices: ",
                           absl::StrJoin(learned, ", "));
    if (num_learned == 0) {
      bp.note =
          "not applicable: no other device's fit has any of these efficiencies free";
      all.clear();
      for (size_t i = 0; i < ids.size(); ++i) {
        points[i].block_held_out.erase(kLeaveOneDeviceOut);
        points[i].block_of.erase(kLeaveOneDeviceOut);
      }
    }
    bp.overall = ErrorsByMetric(all);
    if (bp.applicable) bp.blocks.push_back(BlockResult{device, bp.overall});
  }
  return bp;
}

// The acceptance targets of the fit config (shipped data only): each
// block target on the block passes' errors, each point-set target on its
// device's fitted, feasible points.
void GradeTargets(const FitConfig& fit_config, ValidationReport& report) {
  auto add = [&report](AggregateCheck a) {
    a.pass = a.value <= a.limit;
    ++report.num_checked;
    if (!a.pass) ++report.num_failed;
    report.aggregates.push_back(std::move(a));
  };
  for (const BlockPass& bp : report.blocks) {
    if (!bp.applicable) continue;
    for (const MetricError& me : bp.overall) {
      const servesim::proto::BlockTarget* target = nullptr;
      for (const servesim::proto::BlockTarget& t : fit_config.block_targets()) {
        const bool pass =
            std::find(t.passes().begin(), t.passes().end(), bp.pass) != t.passes().end();
        const bool metric =
            t.metrics().empty() || std::find(t.metrics().begin(), t.metrics().end(),
                                             me.metric) != t.metrics().end();
        if (pass && metric) {
          target = &t;
          break;
        }
      }
      if (target == nullptr) continue;
      for (const auto& limit : target->limits()) {
        const std::string& what = limit.statistic();
        AggregateCheck a;
        a.name =
            absl::StrFormat("%s / %s %s %s (%d points) %s", bp.device, bp.software_build,
                            bp.pass, me.metric, me.num_points, what);
        a.rule = absl::StrFormat("%s: %s %s %s <= %g%%", target->origin(), bp.pass,
                                 me.metric, what, limit.limit_pct());
        a.value = what == "MAPE" ? me.mape : std::abs(me.worst_error_pct);
        a.limit = limit.limit_pct();
        a.device = bp.device;
        a.software_build = bp.software_build;
        a.pass_name = bp.pass;
        a.metric = me.metric;
        a.id = a.name;
        add(std::move(a));
      }
    }
  }
  for (const servesim::proto::PointSetTarget& t : fit_config.point_set_targets()) {
    std::vector<double> errors;
    for (const ValidatedPoint& v : report.points) {
      if (v.device == t.device() && v.metric == t.metric() && !v.measured_infeasible &&
          v.fitted) {
        errors.push_back(v.held_out_error_pct);
      }
    }
    if (errors.empty()) continue;
    AggregateCheck a;
    a.name = absl::StrFormat("%s (%d cells): held-out MAE", t.name(), errors.size());
    a.rule = t.rule();
    a.value = MeanMaxAbs(errors).first;
    a.limit = t.limit_pct();
    a.device = t.device();
    a.metric = t.metric();
    a.id = t.name();
    add(std::move(a));
  }
}

}  // namespace

namespace {

// What a gap can match: a check's device, build, pass ("" for a point
// check or a point-set target), metric and id (point id, target name).
struct CheckKey {
  const std::string &device, &build, &pass, &metric, &id;
};

bool ListHas(const google::protobuf::RepeatedPtrField<std::string>& list,
             const std::string& v) {
  return std::find(list.begin(), list.end(), v) != list.end();
}

// The rule of proto/calibration.proto KnownGap: a block check matches the
// gap's passes (none listed: any pass, when it lists metrics) and metrics
// (none: any); a point check or point-set target matches the gap's points
// by id, or, when it lists no points and no passes, its metrics.
bool GapMatches(const servesim::proto::KnownGap& g, const CheckKey& c) {
  if (g.device() != c.device) return false;
  if (!g.software_build().empty() && g.software_build() != c.build) return false;
  const bool metric_ok = g.metrics().empty() || ListHas(g.metrics(), c.metric);
  if (c.pass.empty()) {
    if (!g.points().empty()) return ListHas(g.points(), c.id);
    return g.passes().empty() && !g.metrics().empty() && metric_ok;
  }
  const bool pass_ok =
      g.passes().empty() ? !g.metrics().empty() : ListHas(g.passes(), c.pass);
  return pass_ok && metric_ok;
}

// Every graded check of the report: point checks, then aggregate checks.
template <typename F>
void ForEachCheck(const ValidationReport& report, F&& f) {
  static const std::string kNoPass;
  for (const ValidatedPoint& v : report.points) {
    if (v.checked)
      f(CheckKey{v.device, v.software_build, kNoPass, v.metric, v.id}, v.pass, v.id);
  }
  for (const AggregateCheck& a : report.aggregates) {
    f(CheckKey{a.device, a.software_build, a.pass_name, a.metric, a.id}, a.pass, a.name);
  }
}

}  // namespace

void DiagnoseMisses(const FitConfig& fit_config, ValidationReport& report) {
  report.diagnoses.clear();
  report.undiagnosed.clear();
  report.stale_gaps.clear();
  report.diagnosed = true;
  const auto& gaps = fit_config.known_gaps();
  std::map<int, Diagnosis> by_gap;
  std::vector<bool> graded(gaps.size(), false);  // matches some graded check
  std::set<std::pair<int, std::string>> listed_point_missed;
  ForEachCheck(report, [&](const CheckKey& key, bool pass, const std::string& name) {
    int first = -1;
    for (int i = 0; i < gaps.size(); ++i) {
      if (!GapMatches(gaps[i], key)) continue;
      graded[i] = true;
      if (first < 0) first = i;
    }
    if (pass) return;
    if (first < 0) {
      report.undiagnosed.push_back(name);
      return;
    }
    Diagnosis& d = by_gap[first];
    if (d.misses.empty()) {
      d.gap_index = first;
      d.device = gaps[first].device();
      d.software_build = gaps[first].software_build();
      d.missing = gaps[first].missing();
      d.settle_with = gaps[first].settle_with();
    }
    d.misses.push_back(name);
    if (key.pass.empty()) listed_point_missed.insert({first, key.id});
  });
  for (auto& [gap, d] : by_gap) report.diagnoses.push_back(std::move(d));
  // Stale: a gap whose checks were graded and none missed, or a point it
  // lists that was graded and passed. Only a held-out run grades what the
  // gaps describe (with --no-held-out every check is in-sample).
  if (!report.held_out) return;
  std::set<std::string> graded_points;
  for (const ValidatedPoint& v : report.points) {
    if (v.checked) graded_points.insert(v.id);
  }
  for (int i = 0; i < gaps.size(); ++i) {
    const servesim::proto::KnownGap& g = gaps[i];
    const std::string who =
        absl::StrFormat("known_gaps[%d] %s%s%s", i, g.device(),
                        g.software_build().empty() ? "" : " / ", g.software_build());
    if (graded[i] && !by_gap.count(i)) {
      std::vector<std::string> what(g.passes().begin(), g.passes().end());
      what.insert(what.end(), g.metrics().begin(), g.metrics().end());
      what.insert(what.end(), g.points().begin(), g.points().end());
      report.stale_gaps.push_back(
          absl::StrCat(who, ": no miss left (", absl::StrJoin(what, ", "), ")"));
      continue;
    }
    for (const std::string& id : g.points()) {
      if (graded_points.count(id) && !listed_point_missed.count({i, id})) {
        report.stale_gaps.push_back(
            absl::StrCat(who, ": point ", id, " no longer misses"));
      }
    }
  }
}

std::vector<std::string> KnownGapNotes(const FitConfig& fit_config,
                                       const std::string& device,
                                       const std::string& build) {
  std::vector<std::string> out;
  for (int i = 0; i < fit_config.known_gaps_size(); ++i) {
    const servesim::proto::KnownGap& g = fit_config.known_gaps(i);
    if (g.device() != device) continue;
    if (!g.software_build().empty() && g.software_build() != build) continue;
    std::vector<std::string> what;
    if (!g.passes().empty()) what.push_back(absl::StrJoin(g.passes(), ", "));
    if (!g.metrics().empty()) what.push_back(absl::StrJoin(g.metrics(), ", "));
    if (!g.points().empty()) what.push_back(absl::StrJoin(g.points(), ", "));
    out.push_back(absl::StrFormat(
        "known gap of the shipped %s profile (fit config known_gaps[%d]; `servesim "
        "validate` misses %s): %s Would settle it: %s",
        device, i, absl::StrJoin(what, "; "), g.missing(), g.settle_with()));
  }
  return out;
}

std::vector<std::string> ShippedKnownGapNotes(const std::string& device,
                                              const std::string& build) {
  static const absl::StatusOr<FitConfig> shipped = LoadNamedFitConfig(kDefaultFitConfig);
  if (!shipped.ok()) {
    return {absl::StrCat("known gaps unavailable: ", shipped.status().message())};
  }
  return KnownGapNotes(*shipped, device, build);
}

absl::StatusOr<ValidationReport> RunValidation(const MeasurementDb& db,
                                               const FitConfig& fit_config,
                                               const ValidateOptions& options) {
  ASSIGN_OR_RETURN(auto groups, GroupMeasurements(db, options));
  ASSIGN_OR_RETURN(const auto joint_of, CompleteJointFits(fit_config, groups));
  // Which groups to fit: reported ones and their joint partners.
  std::set<int> joints_needed;
  for (const auto& [key, g] : groups) {
    if (g.reported && joint_of.count(key)) joints_needed.insert(joint_of.at(key));
  }
  for (auto& [key, g] : groups) {
    const bool needed =
        g.reported || (joint_of.count(key) && joints_needed.count(joint_of.at(key)));
    if (needed) RETURN_IF_ERROR(PrepareGroup(db, fit_config, options, g));
  }
  ASSIGN_OR_RETURN(const auto fits,
                   FitGroups(groups, joints_needed, fit_config, options));

  ValidationReport report;
  std::vector<double> all_fit_err, all_loo_err;
  for (const auto& [key, gd] : groups) {
    if (!gd.reported) continue;
    std::vector<double> fit_err, loo_err;
    ASSIGN_OR_RETURN(GroupReport g, ReportGroupPoints(db, gd, fits.at(key), options,
                                                      report, fit_err, loo_err));
    const size_t first_point = report.points.size() - gd.ids.size();
    ReportBlockPasses(gd, options, &report.points[first_point], report);
    ASSIGN_OR_RETURN(BlockPass device_out,
                     DeviceOutPass(gd, groups, fits, joint_of, fit_config, options,
                                   &report.points[first_point]));
    report.blocks.push_back(std::move(device_out));
    g.num_fit_points = static_cast<int>(fit_err.size());
    std::tie(g.fit_mape, g.fit_max_ape) = MeanMaxAbs(fit_err);
    std::tie(g.loo_mape, g.loo_max_ape) = MeanMaxAbs(loo_err);
    all_fit_err.insert(all_fit_err.end(), fit_err.begin(), fit_err.end());
    all_loo_err.insert(all_loo_err.end(), loo_err.begin(), loo_err.end());
    report.groups.push_back(std::move(g));
  }
  report.overall_fit_mape = MeanMaxAbs(all_fit_err).first;
  report.overall_loo_mape = MeanMaxAbs(all_loo_err).first;
  if (options.shipped_data_checks) GradeTargets(fit_config, report);
  if (options.device.empty() && options.shipped_data_checks) {
    report.consistency = CheckPublishedConsistency(db);
  }
  report.all_pass = report.num_failed == 0;
  // Known gaps describe the shipped data; a user's calibration has none.
  report.held_out = !options.skip_loo;
  if (options.shipped_data_checks) DiagnoseMisses(fit_config, report);
  return report;
}

namespace {

// The run's settings as the deployment resolved them (what `simulate`
// compares with its own resolved deployment): the device's dtype for
// "auto", the checkpoint's format (an mxfp4 config.json) and canonical
// spellings ("bfloat16" -> "bf16", "W4A16" -> "w4a16"); the run's own
// strings when it does not build.
servesim::proto::FittedServer FittedServerOf(const servesim::proto::ServerRun& run) {
  servesim::proto::FittedServer s;
  s.set_run(run.id());
  s.set_vllm_version(run.vllm_version());
  s.set_model(run.model());
  s.set_dtype(run.dtype().empty() ? "auto" : run.dtype());
  s.set_quantization(run.quantization().empty() ? "none" : run.quantization());
  s.set_kv_cache_dtype(run.kv_cache_dtype().empty() ? "auto" : run.kv_cache_dtype());
  s.set_tensor_parallel_size(std::max(1, run.tensor_parallel_size()));
  s.set_async_scheduling(run.async_scheduling());
  s.set_enable_prefix_caching(run.enable_prefix_caching());
  s.set_max_num_seqs(run.max_num_seqs());
  s.set_max_num_batched_tokens(run.max_num_batched_tokens());
  s.set_max_model_len(run.max_model_len());
  s.set_gpu_memory_utilization(run.gpu_memory_utilization());
  if (absl::StatusOr<Deployment> d = BuildDeployment(MeasurementDb::SpecOf(run));
      d.ok()) {
    s.set_dtype(d->dtype);
    s.set_quantization(d->format.id);
    s.set_kv_cache_dtype(d->kv_cache_dtype == d->dtype ? "auto" : d->kv_cache_dtype);
    s.set_tensor_parallel_size(d->tensor_parallel_size);
  }
  return s;
}

}  // namespace

servesim::proto::CalibrationProfile MakeProfile(const GroupReport& group,
                                                const std::vector<ValidatedPoint>& points,
                                                const MeasurementDb& db) {
  servesim::proto::CalibrationProfile p;
  p.set_device(group.device);
  p.set_software_build(group.software_build);
  std::set<std::string> runs, models;
  for (const ValidatedPoint& v : points) {
    if (v.device != group.device || v.software_build != group.software_build || !v.fitted)
      continue;
    p.add_fitted_from(v.id);
    runs.insert(v.run);
    // The workloads the fit saw.
    servesim::proto::FittedRange& r = *p.mutable_fitted_range();
    if (v.max_input_tokens > 0) {
      if (r.min_input_tokens() == 0 || v.min_input_tokens < r.min_input_tokens()) {
        r.set_min_input_tokens(v.min_input_tokens);
      }
      r.set_max_input_tokens(std::max(r.max_input_tokens(), v.max_input_tokens));
    }
    if (v.concurrency > 0) {
      if (r.min_concurrency() == 0 || v.concurrency < r.min_concurrency()) {
        r.set_min_concurrency(v.concurrency);
      }
      r.set_max_concurrency(std::max(r.max_concurrency(), v.concurrency));
    }
    if (!v.model.empty()) models.insert(v.model);
  }
  for (const std::string& model : models) p.mutable_fitted_range()->add_models(model);
  // The settings each fitted run was served with (runs in id order).
  for (const std::string& id : runs) {
    if (const servesim::proto::ServerRun* run = db.FindRun(id); run != nullptr) {
      *p.add_fitted_servers() = FittedServerOf(*run);
    }
  }
  for (const std::string& name : group.free_parameters) {
    const Parameter* q = group.fitted.Find(name);
    if (q == nullptr) continue;
    auto* pp = p.add_parameters();
    pp->set_name(q->name);
    pp->set_value(q->value);
    pp->set_std_error(q->std_error);
    pp->set_source(absl::StrFormat(
        "fitted (robust LM, Huber on log error, prior %g +- %g, bounds [%g, %g]) to %d "
        "points",
        q->prior, q->prior_sigma, q->lower, q->upper, group.num_fit_points));
    if (!group.joint_with.empty()) {
      const bool shared =
          std::find(group.shared_parameters.begin(), group.shared_parameters.end(),
                    name) != group.shared_parameters.end();
      pp->set_source(absl::StrCat(
          pp->source(), shared ? ", one value shared with " : ", jointly with ",
          absl::StrJoin(group.joint_with, ", "),
          shared ? absl::StrCat(" (", group.joint_fit_points, " points in all)")
                 : " (sharing only the joint parameters)"));
    }
  }
  if (!group.covariance_names.empty()) {
    auto* cov = p.mutable_covariance();
    for (const std::string& name : group.covariance_names) cov->add_names(name);
    for (double c : group.covariance) cov->add_values(c);
    cov->set_estimate(
        "Gauss-Newton s2 (J^T J)^+ at the fit: J the Jacobian (central differences) "
        "of the Huber-weighted log residuals and prior rows in parameter units, "
        "s2 = max(1, chi2 / (n - p)); when n <= p, max(1, (chi2 + prior chi2) / (n + "
        "n_prior - p)), 1 when that leaves no rows; diagonal = std_error^2");
  }
  // Block-held-out errors per pass and metric family (and the pooled refit
  // passes per metric), with their quantiles: calibration/coverage.h.
  for (auto& se : StructuralErrors(points, group.device, group.software_build)) {
    *p.add_structural_errors() = std::move(se);
  }
  auto* e = p.mutable_errors();
  e->set_num_points(group.num_fit_points);
  e->set_fit_mape(group.fit_mape);
  e->set_fit_max_ape(group.fit_max_ape);
  e->set_loo_mape(group.loo_mape);
  e->set_loo_max_ape(group.loo_max_ape);
  e->set_notes(
      absl::StrFormat("held out: leave-one-cell-out refits; worst %s", group.worst_id));
  p.set_notes(
      absl::StrFormat("runs: %s. Written by `servesim validate --refit` from "
                      "calibration/data; parameters not listed keep their priors.",
                      absl::StrJoin(runs, ", ")));
  return p;
}

absl::Status WriteProfile(const servesim::proto::CalibrationProfile& profile,
                          const std::string& path) {
  return SaveCalibrationProfile(profile, path);
}

std::string ProfilePath(const std::string& dir, const GroupReport& group,
                        bool main_build) {
  if (main_build) return absl::StrFormat("%s/%s.textproto", dir, group.device);
  return absl::StrFormat("%s/%s@%s.textproto", dir, group.device, group.software_build);
}

std::string FormatReportText(const ValidationReport& r) {
  std::string s;
  absl::StrAppend(
      &s,
      "servesim validate: every measured point predicted the way it was measured\n"
      "(in-sample = fit on all fitted points of the device/build; held-out = refit "
      "without the point's benchmark cell;\n pass/fail uses the held-out error)\n");
  for (const GroupReport& g : r.groups) {
    absl::StrAppend(&s, "\n== ", g.device, " / ", g.software_build, "\n");
    if (g.free_parameters.empty()) {
      absl::StrAppend(&s, "fit: no free parameters (priors only)\n");
    } else {
      std::vector<std::string> parts;
      for (const std::string& name : g.free_parameters) {
        const Parameter* p = g.fitted.Find(name);
        if (p == nullptr) continue;
        const std::string_view bound = AtBound(*p);
        parts.push_back(
            bound.empty()
                ? absl::StrFormat("%s = %.4g +- %.2g %s (prior %.4g)", p->name, p->value,
                                  p->std_error, p->unit, p->prior)
                : absl::StrFormat("%s = %.4g %s (prior %.4g), AT ITS %s BOUND: std error "
                                  "not estimated (not drawn by --interval)",
                                  p->name, p->value, p->unit, p->prior,
                                  bound == "upper" ? "UPPER" : "LOWER"));
      }
      absl::StrAppend(&s, "fit: ", absl::StrJoin(parts, "; "), "\n");
    }
    if (!g.joint_with.empty()) {
      absl::StrAppend(&s, "fitted jointly with ", absl::StrJoin(g.joint_with, ", "),
                      " (one value of ", absl::StrJoin(g.shared_parameters, ", "),
                      " for all, ", g.joint_fit_points,
                      " points; held-out refits the joint problem without each cell)",
                      g.joint_reason.empty() ? "" : absl::StrCat(": ", g.joint_reason),
                      "\n");
    }
    absl::StrAppend(
        &s, absl::StrFormat("%-46s %10s %10s %7s %10s %7s %5s  %s\n", "point", "measured",
                            "predicted", "err%", "held-out", "err%", "tol%", "result"));
    for (const ValidatedPoint& v : r.points) {
      if (v.device != g.device || v.software_build != g.software_build) continue;
      std::string result = v.checked ? (v.pass ? "ok" : "MISS") : "-";
      if (!v.excluded.empty()) result = "EXCLUDED";
      std::string meas = Num(v.measured), pred = Num(v.predicted), held = Num(v.held_out);
      if (v.measured_infeasible) meas = "infeasible";
      if (!v.predicted_feasible) pred = held = "infeasible";
      if (v.metric == "fits_in_memory") {
        meas = v.measured > 0 ? "fits" : "fails";
        pred = held = v.predicted > 0 ? "fits" : "fails";
      }
      const bool kv =
          v.metric == "kv_capacity_tokens" || v.metric == "kv_max_concurrency";
      absl::StrAppend(
          &s,
          absl::StrFormat("%-46s %10s %10s %7s %10s %7s %5s  %s%s\n", v.id, meas, pred,
                          PctStr(v.error_pct), held, PctStr(v.held_out_error_pct),
                          v.tolerance_pct > 0 ? Num(v.tolerance_pct) : "-", result,
                          v.fitted ? "" : (kv ? " (planner)" : " (not fitted)")));
      if (kv) {
        absl::StrAppend(
            &s, absl::StrFormat("%-46s %10s %10s %7s\n", "    estimated overheads", "",
                                Num(v.estimated), PctStr(Pct(v.estimated, v.measured))));
      }
      if (!v.predicted_feasible || v.metric == "fits_in_memory") {
        absl::StrAppend(&s, "    ", v.note, "\n");
      }
    }
    bool header = false;
    for (const BlockPass& bp : r.blocks) {
      if (bp.device != g.device || bp.software_build != g.software_build) continue;
      if (!header) {
        absl::StrAppend(
            &s,
            "block-held-out (each block's points predicted by a refit without "
            "the whole block; per metric: points, MAPE, worst):\n");
        header = true;
      }
      if (!bp.applicable) {
        absl::StrAppend(&s, absl::StrFormat("  %-27s %s\n", bp.pass, bp.note));
        continue;
      }
      if (bp.pass == kLeaveOneDeviceOut) {
        absl::StrAppend(&s, absl::StrFormat("  %-27s %s\n", bp.pass, bp.note));
      }
      auto line = [&](const std::string& key, const MetricError& me) {
        absl::StrAppend(
            &s, absl::StrFormat("  %-27s %-12s %-18s %3d %6.1f%% %8s  %s\n", bp.pass, key,
                                me.metric, me.num_points, me.mape,
                                PctStr(me.worst_error_pct), me.worst_id));
      };
      if (bp.pass != kLeaveOneDeviceOut) {
        for (const BlockResult& b : bp.blocks) {
          for (const MetricError& me : b.metrics) line(b.key, me);
        }
      }
      for (const MetricError& me : bp.overall) line("all blocks", me);
    }
    absl::StrAppend(
        &s, absl::StrFormat(
                "%d fitted points: in-sample MAPE %.1f%% (max %.1f%%), held-out MAPE "
                "%.1f%% (max %.1f%%, %s)\n",
                g.num_fit_points, g.fit_mape, g.fit_max_ape, g.loo_mape, g.loo_max_ape,
                g.worst_id.empty() ? "-" : g.worst_id));
  }
  if (!r.excluded.empty()) {
    absl::StrAppend(
        &s, "\n== excluded by the physics and warm-up rules (in no fit, no grade)\n");
    for (const std::string& e : r.excluded) absl::StrAppend(&s, e, "\n");
  }
  if (!r.aggregates.empty()) {
    absl::StrAppend(&s, "\n== aggregate checks\n");
    for (const AggregateCheck& a : r.aggregates) {
      absl::StrAppend(&s, absl::StrFormat("%-88s %6.1f%% (limit %.0f%%)  %s\n", a.name,
                                          a.value, a.limit, a.pass ? "ok" : "MISS"));
    }
  }
  if (!r.diagnoses.empty() || !r.undiagnosed.empty() || !r.stale_gaps.empty()) {
    absl::StrAppend(&s,
                    "\n== misses: what the model lacks and what would settle it "
                    "(known_gaps of the fit config)\n");
    for (const Diagnosis& d : r.diagnoses) {
      absl::StrAppend(
          &s,
          absl::StrFormat("known_gaps[%d] %s%s%s, %d miss%s:\n", d.gap_index, d.device,
                          d.software_build.empty() ? "" : " / ", d.software_build,
                          d.misses.size(), d.misses.size() == 1 ? "" : "es"));
      for (const std::string& m : d.misses) absl::StrAppend(&s, "  ", m, "\n");
      absl::StrAppend(&s, "  missing:\n", WrapIndented(d.missing, 4, 100));
      absl::StrAppend(&s, "  would settle it:\n", WrapIndented(d.settle_with, 4, 100));
    }
    if (!r.undiagnosed.empty()) {
      absl::StrAppend(&s, absl::StrFormat("no diagnosis recorded (%d miss%s):\n",
                                          r.undiagnosed.size(),
                                          r.undiagnosed.size() == 1 ? "" : "es"));
      for (const std::string& m : r.undiagnosed) absl::StrAppend(&s, "  ", m, "\n");
    }
    if (!r.stale_gaps.empty()) {
      absl::StrAppend(&s,
                      "stale known gaps (what they list no longer misses: remove or "
                      "rewrite them):\n");
      for (const std::string& g : r.stale_gaps) absl::StrAppend(&s, "  ", g, "\n");
    }
  }
  if (!r.consistency.empty()) {
    absl::StrAppend(&s, "\n== consistency of the published tables (no model involved)\n");
    for (const ConsistencyFinding& c : r.consistency) {
      absl::StrAppend(
          &s, absl::StrFormat("%-40s published %8s recomputed %8s  %s  %s\n", c.id,
                              Num(c.published), Num(c.recomputed),
                              c.consistent ? "adds up" : "DOES NOT ADD UP", c.formula));
      if (!c.consistent) absl::StrAppend(&s, "    ", c.statement, "; ", c.note, "\n");
    }
  }
  absl::StrAppend(
      &s,
      absl::StrFormat(
          "\n== summary\nfitted points: in-sample MAPE %.1f%%, held-out MAPE "
          "%.1f%%; worst checked point %s (%.1f%% held out)\n"
          "%d checks, %d missed: %s\n",
          r.overall_fit_mape, r.overall_loo_mape, r.worst_id.empty() ? "-" : r.worst_id,
          r.worst_held_out_error_pct, r.num_checked, r.num_failed,
          r.all_pass ? "all within tolerance" : "SOME POINTS MISS THEIR TOLERANCE"));
  return s;
}

std::string FormatReportJson(const ValidationReport& r) {
  JsonWriter w(1);
  w.BeginObject();
  w.Key("points").BeginArray();
  for (const ValidatedPoint& v : r.points) {
    w.BeginObject();
    w.KV("id", v.id).KV("device", v.device).KV("software_build", v.software_build);
    w.KV("run", v.run).KV("metric", v.metric).KV("unit", v.unit);
    // "predicted" is the held-out prediction where a refit without the
    // point's cell was possible ("held_out": true), else the in-sample one.
    w.KV("measured", v.measured).KV("predicted", v.held_out);
    w.KV("error_pct", v.held_out_error_pct).KV("held_out", v.refit_without_cell);
    w.KV("in_sample_predicted", v.predicted).KV("in_sample_error_pct", v.error_pct);
    w.KV("fitted", v.fitted);
    w.KV("measured_infeasible", v.measured_infeasible);
    w.KV("predicted_feasible", v.predicted_feasible);
    if (v.metric == "kv_capacity_tokens" || v.metric == "kv_max_concurrency") {
      w.KV("predicted_estimated_overheads", v.estimated);
    }
    w.KV("tolerance_pct", v.tolerance_pct).KV("tolerance_rule", v.tolerance_rule);
    w.KV("checked", v.checked).KV("pass", v.pass);
    w.KV("provenance", v.cell).KV("note", v.note);
    w.KV("excluded", !v.excluded.empty()).KV("excluded_reason", v.excluded);
    w.Key("block_held_out").BeginObject();
    for (const auto& [pass, pred] : v.block_held_out) {
      w.Key(pass).BeginObject();
      w.KV("predicted", pred).KV("error_pct", Pct(pred, v.measured));
      w.EndObject();
    }
    w.EndObject();
    w.EndObject();
  }
  w.EndArray();
  w.Key("groups").BeginArray();
  for (const GroupReport& g : r.groups) {
    w.BeginObject();
    w.KV("device", g.device).KV("software_build", g.software_build);
    w.Key("parameters").BeginArray();
    for (const std::string& name : g.free_parameters) {
      const Parameter* p = g.fitted.Find(name);
      if (p == nullptr) continue;
      w.BeginObject();
      w.KV("name", p->name).KV("value", p->value).KV("std_error", p->std_error);
      w.KV("prior", p->prior).KV("prior_sigma", p->prior_sigma).KV("unit", p->unit);
      w.KV("at_bound", AtBound(*p));
      w.EndObject();
    }
    w.EndArray();
    w.KV("num_fit_points", static_cast<int64_t>(g.num_fit_points));
    w.KV("fit_mape", g.fit_mape).KV("fit_max_ape", g.fit_max_ape);
    w.KV("held_out_mape", g.loo_mape).KV("held_out_max_ape", g.loo_max_ape);
    w.KV("worst", g.worst_id).KV("converged", g.converged);
    w.Key("joint_with").BeginArray();
    for (const std::string& j : g.joint_with) w.String(j);
    w.EndArray();
    w.Key("shared_parameters").BeginArray();
    for (const std::string& j : g.shared_parameters) w.String(j);
    w.EndArray();
    w.KV("joint_reason", g.joint_reason);
    w.KV("joint_fit_points", static_cast<int64_t>(g.joint_fit_points));
    auto metric_errors = [&w](const std::vector<MetricError>& v) {
      w.BeginArray();
      for (const MetricError& me : v) {
        w.BeginObject();
        w.KV("metric", me.metric).KV("num_points", static_cast<int64_t>(me.num_points));
        w.KV("mape", me.mape).KV("worst_error_pct", me.worst_error_pct);
        w.KV("worst", me.worst_id);
        w.EndObject();
      }
      w.EndArray();
    };
    for (const BlockPass& bp : r.blocks) {
      if (bp.device != g.device || bp.software_build != g.software_build) continue;
      w.Key(bp.pass).BeginObject();
      w.KV("applicable", bp.applicable).KV("note", bp.note);
      w.Key("blocks").BeginArray();
      for (const BlockResult& b : bp.blocks) {
        w.BeginObject();
        w.KV("block", b.key);
        w.Key("metrics");
        metric_errors(b.metrics);
        w.EndObject();
      }
      w.EndArray();
      w.Key("overall");
      metric_errors(bp.overall);
      w.EndObject();
    }
    w.EndObject();
  }
  w.EndArray();
  w.Key("aggregates").BeginArray();
  for (const AggregateCheck& a : r.aggregates) {
    w.BeginObject();
    w.KV("name", a.name).KV("rule", a.rule).KV("value", a.value).KV("limit", a.limit);
    w.KV("pass", a.pass);
    w.EndObject();
  }
  w.EndArray();
  if (r.diagnosed) {
    w.Key("diagnoses").BeginArray();
    for (const Diagnosis& d : r.diagnoses) {
      w.BeginObject();
      w.KV("known_gap", d.gap_index).KV("device", d.device);
      w.KV("software_build", d.software_build);
      w.Key("misses").BeginArray();
      for (const std::string& m : d.misses) w.String(m);
      w.EndArray();
      w.KV("missing", d.missing).KV("settle_with", d.settle_with);
      w.EndObject();
    }
    w.EndArray();
    w.Key("undiagnosed").BeginArray();
    for (const std::string& m : r.undiagnosed) w.String(m);
    w.EndArray();
    w.Key("stale_known_gaps").BeginArray();
    for (const std::string& g : r.stale_gaps) w.String(g);
    w.EndArray();
  }
  w.Key("excluded").BeginArray();
  for (const std::string& e : r.excluded) w.String(e);
  w.EndArray();
  w.Key("consistency").BeginArray();
  for (const ConsistencyFinding& c : r.consistency) {
    w.BeginObject();
    w.KV("id", c.id).KV("statement", c.statement).KV("formula", c.formula);
    w.KV("published", c.published)
        .KV("recomputed", c.recomputed)
        .KV("rounding", c.rounding);
    w.KV("consistent", c.consistent).KV("note", c.note);
    w.EndObject();
  }
  w.EndArray();
  w.Key("summary").BeginObject();
  w.KV("fit_mape", r.overall_fit_mape).KV("held_out_mape", r.overall_loo_mape);
  w.KV("worst", r.worst_id).KV("worst_held_out_error_pct", r.worst_held_out_error_pct);
  w.KV("num_checked", static_cast<int64_t>(r.num_checked));
  w.KV("num_failed", static_cast<int64_t>(r.num_failed));
  w.KV("all_pass", r.all_pass);
  w.EndObject();
  w.EndObject();
  std::string out = w.Take();
  out += "\n";
  return out;
}

}  // namespace servesim
