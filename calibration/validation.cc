#include "calibration/validation.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "calibration/predictor.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/text_format.h"
#include "proto/text_format.h"
#include "sim/json_writer.h"
#include "sim/status_macros.h"

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
  return absl::StrFormat("%s|%s|c%d|n%d|in%d|out%d|%d-%d", m.run(),
                         ClientMethod::Kind_Name(c.kind()), c.max_concurrency(),
                         c.num_prompts(), c.input_tokens(), c.output_tokens(),
                         c.short_output_tokens(), c.long_output_tokens());
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

}  // namespace

absl::StatusOr<FitConfig> LoadFitConfig(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrFormat("%s: cannot open", path));
  std::stringstream buf;
  buf << in.rdbuf();
  FitConfig config;
  RETURN_IF_ERROR(ParseTextProto(buf.str(), path, &config));
  return config;
}

absl::StatusOr<ValidationReport> RunValidation(const MeasurementDb& db,
                                               const FitConfig& fit_config,
                                               const ValidateOptions& options) {
  // Groups by (device, software build), in name order.
  std::map<std::pair<std::string, std::string>, std::vector<std::string>> groups;
  for (const Measurement& m : db.measurements()) {
    const auto* run = db.FindRun(m.run());
    if (!options.device.empty() && run->device() != options.device) continue;
    groups[{run->device(), run->software_build()}].push_back(m.id());
  }
  if (groups.empty()) {
    return absl::NotFoundError(
        absl::StrFormat("validate: no measurements for device '%s'", options.device));
  }

  ValidationReport report;
  std::vector<double> all_fit_err, all_loo_err;
  for (const auto& [key, ids] : groups) {
    const auto& [device, build] = key;
    ASSIGN_OR_RETURN(Predictor predictor, Predictor::Create(db, ids));
    std::vector<FitPoint> pts;
    std::vector<std::string> cells;
    for (const std::string& id : ids) {
      const Measurement& m = *db.FindMeasurement(id);
      FitPoint p;
      p.measured = m.value();
      p.rel_sigma = m.rel_sigma() > 0 ? m.rel_sigma() : 0.05;
      p.use = m.fit() && !m.infeasible() && m.value() > 0;
      pts.push_back(p);
      cells.push_back(CellKeyOf(m));
    }
    FitOptions fo;
    const FitSpec* spec = FindSpec(fit_config, device, build);
    if (spec != nullptr) {
      fo.free_parameters.assign(spec->free_parameters().begin(),
                                spec->free_parameters().end());
      if (spec->huber_delta() > 0) fo.huber_delta = spec->huber_delta();
    }
    const PredictFn fn = [&predictor](const ParameterSet& p) {
      return predictor.PredictValues(p);
    };
    const ParameterSet& start = predictor.prior_params();
    ASSIGN_OR_RETURN(FitResult fit, FitParameters(start, pts, fn, fo));
    ASSIGN_OR_RETURN(std::vector<PointPrediction> in_sample,
                     predictor.Predict(fit.params));
    std::vector<double> held_out;
    if (options.skip_loo) {
      held_out = fit.predicted;
    } else {
      ASSIGN_OR_RETURN(held_out, LeaveOneGroupOut(start, pts, cells, fn, fo));
    }

    GroupReport g;
    g.device = device;
    g.software_build = build;
    g.free_parameters = fo.free_parameters;
    g.fitted = fit.params;
    g.converged = fit.converged;
    g.iterations = fit.iterations;
    std::vector<double> fit_err, loo_err;
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
      v.metric = MetricName(m.metric());
      v.unit = m.unit();
      v.cell = absl::StrCat(m.provenance().writeup(), ": ", m.provenance().section(),
                            ", ", m.provenance().cell());
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
      if (m.infeasible()) {
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
    g.num_fit_points = static_cast<int>(fit_err.size());
    std::tie(g.fit_mape, g.fit_max_ape) = MeanMaxAbs(fit_err);
    std::tie(g.loo_mape, g.loo_max_ape) = MeanMaxAbs(loo_err);
    all_fit_err.insert(all_fit_err.end(), fit_err.begin(), fit_err.end());
    all_loo_err.insert(all_loo_err.end(), loo_err.begin(), loo_err.end());
    report.groups.push_back(std::move(g));
  }
  report.overall_fit_mape = MeanMaxAbs(all_fit_err).first;
  report.overall_loo_mape = MeanMaxAbs(all_loo_err).first;

  // The MI300X grid: held-out MAE over the 12 feasible cells <= 10%.
  std::vector<double> grid;
  for (const ValidatedPoint& v : report.points) {
    if (v.device == "mi300x" && v.metric == "output_throughput" &&
        !v.measured_infeasible && v.fitted) {
      grid.push_back(v.held_out_error_pct);
    }
  }
  if (!grid.empty() && options.shipped_data_checks) {
    AggregateCheck a;
    a.name = absl::StrFormat("mi300x output throughput grid (%d cells): held-out MAE",
                             grid.size());
    a.rule = "MI300X output throughput: 12 cells held-out MAE <= 10%";
    a.value = MeanMaxAbs(grid).first;
    a.limit = 10;
    a.pass = a.value <= a.limit;
    report.aggregates.push_back(a);
    ++report.num_checked;
    if (!a.pass) ++report.num_failed;
  }
  if (options.device.empty() && options.shipped_data_checks) {
    report.consistency = CheckPublishedConsistency(db);
  }
  report.all_pass = report.num_failed == 0;
  return report;
}

servesim::proto::CalibrationProfile MakeProfile(
    const GroupReport& group, const std::vector<ValidatedPoint>& points) {
  servesim::proto::CalibrationProfile p;
  p.set_device(group.device);
  p.set_software_build(group.software_build);
  std::set<std::string> runs;
  for (const ValidatedPoint& v : points) {
    if (v.device != group.device || v.software_build != group.software_build || !v.fitted)
      continue;
    p.add_fitted_from(v.id);
    runs.insert(v.run);
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
  std::string text;
  google::protobuf::TextFormat::Printer printer;
  if (!printer.PrintToString(profile, &text)) {
    return absl::InternalError("profile: cannot print text format");
  }
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return absl::PermissionDeniedError(absl::StrFormat("%s: cannot write", path));
  out << "# proto-file: proto/hwmodels.proto\n# proto-message: "
         "servesim.proto.CalibrationProfile\n"
      << text;
  out.close();
  if (!out) return absl::DataLossError(absl::StrFormat("%s: write failed", path));
  return absl::OkStatus();
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
        parts.push_back(absl::StrFormat("%s = %.4g +- %.2g %s (prior %.4g)", p->name,
                                        p->value, p->std_error, p->unit, p->prior));
      }
      absl::StrAppend(&s, "fit: ", absl::StrJoin(parts, "; "), "\n");
    }
    absl::StrAppend(
        &s, absl::StrFormat("%-46s %10s %10s %7s %10s %7s %5s  %s\n", "point", "measured",
                            "predicted", "err%", "held-out", "err%", "tol%", "result"));
    for (const ValidatedPoint& v : r.points) {
      if (v.device != g.device || v.software_build != g.software_build) continue;
      std::string result = v.checked ? (v.pass ? "ok" : "MISS") : "-";
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
    absl::StrAppend(
        &s, absl::StrFormat(
                "%d fitted points: in-sample MAPE %.1f%% (max %.1f%%), held-out MAPE "
                "%.1f%% (max %.1f%%, %s)\n",
                g.num_fit_points, g.fit_mape, g.fit_max_ape, g.loo_mape, g.loo_max_ape,
                g.worst_id.empty() ? "-" : g.worst_id));
  }
  if (!r.aggregates.empty()) {
    absl::StrAppend(&s, "\n== aggregate checks\n");
    for (const AggregateCheck& a : r.aggregates) {
      absl::StrAppend(&s, absl::StrFormat("%-60s %6.1f%% (limit %.0f%%)  %s\n", a.name,
                                          a.value, a.limit, a.pass ? "ok" : "MISS"));
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
      w.EndObject();
    }
    w.EndArray();
    w.KV("num_fit_points", static_cast<int64_t>(g.num_fit_points));
    w.KV("fit_mape", g.fit_mape).KV("fit_max_ape", g.fit_max_ape);
    w.KV("held_out_mape", g.loo_mape).KV("held_out_max_ape", g.loo_max_ape);
    w.KV("worst", g.worst_id).KV("converged", g.converged);
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
