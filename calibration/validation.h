// Reading guide to calibration/ (-> hwmodels, traces, sim). Start here.
// Then measurements.h (the measured data and its provenance), predictor.h
// and bench_sim.h (each measurement re-simulated as it was measured),
// fitter.h (the parameter fit), bench_import.h (user bench files for
// `servesim calibrate`), consistency.h (checks of the published tables).
//
// `servesim validate`: fits each (device, software build) group of the
// measured data, predicts every measured point the way it was measured,
// with leave-one-cell-out cross-validation beside the in-sample fit, checks
// each point against its measurement's tolerance_pct, and checks the published
// tables for internal consistency. Also the building block of
// `servesim calibrate` (FitGroup on a user's own measurements).
// Deterministic: same data give byte-identical reports and profiles.
#ifndef SERVESIM_CALIBRATION_VALIDATION_H_
#define SERVESIM_CALIBRATION_VALIDATION_H_

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "calibration/consistency.h"
#include "calibration/fitter.h"
#include "calibration/measurements.h"
#include "proto/calibration.pb.h"
#include "proto/hwmodels.pb.h"

namespace servesim {

struct ValidatedPoint {
  std::string id, device, software_build, run, metric, unit, cell;
  // The workload of the point's cell (the profile's FittedRange): the run's
  // model, the prompt lengths (shortest, longest; 0 when the client sent
  // none, e.g. a server-log row) and the concurrent requests (0: none
  // fixed, e.g. an uncapped open loop).
  std::string model;
  int32_t min_input_tokens = 0, max_input_tokens = 0;
  int32_t concurrency = 0;
  double measured = 0;
  double predicted = 0;           // in-sample (fit on every fitted point of the group)
  double held_out = 0;            // the fit that did not see this point's cell
  double error_pct = 0;           // 100 (predicted / measured - 1)
  double held_out_error_pct = 0;  // 100 (held_out / measured - 1)
  bool fitted = false;            // used by the in-sample fit
  // held_out comes from a refit without this point's cell (false: the
  // point's cell has no fitted point, so held_out == predicted).
  bool refit_without_cell = false;
  bool measured_infeasible = false;
  bool predicted_feasible = true;
  double estimated = 0;      // KV rows: planner with estimated overheads
  double tolerance_pct = 0;  // 0: reported only
  std::string tolerance_rule;
  bool checked = false;  // has a tolerance
  bool pass = true;      // checked against the held-out prediction
  std::string note;
  // Non-empty: the cell breaks the physics rule (calibration/physics.h);
  // the point is in no fit and no grade, and this says why.
  std::string excluded;
  // Block-held-out predictions by pass name (kBlockPasses): the refit that
  // saw no point of this point's block (absent: the point is in no block).
  std::map<std::string, double> block_held_out;
  // The point's block in each of those passes ("in1024", "c16", a model,
  // the device).
  std::map<std::string, std::string> block_of;
};

// The block-held-out passes, in report order (also the JSON keys).
inline constexpr const char* kLeaveOneInputLengthOut = "leave_one_input_length_out";
inline constexpr const char* kLeaveOneConcurrencyOut = "leave_one_concurrency_out";
inline constexpr const char* kLeaveOneModelOut = "leave_one_model_out";
inline constexpr const char* kLeaveOneDeviceOut = "leave_one_device_out";

// The metric family of a graded metric ("throughput": output_throughput,
// total_throughput, decode_rate; "ttft": mean/median/p99_ttft_ms; "tpot":
// median_tpot_ms, median/p99_itl_ms); "" for a metric the block passes do
// not grade. The profiles' structural_errors are kept per family.
std::string ValidateMetricFamily(const std::string& metric);

// Held-out errors of one metric over some points.
struct MetricError {
  std::string metric;
  int num_points = 0;
  double mape = 0;             // mean |error| %
  double worst_error_pct = 0;  // signed, largest |error|
  std::string worst_id;
};

// One block: its key ("in1024", "c16", "gemma-4-12b", "tpu-v5e") and the
// held-out errors of its points per metric.
struct BlockResult {
  std::string key;
  std::vector<MetricError> metrics;
};

// One block pass over one (device, build) group. The refit passes fit the
// group without every point of a block and predict them; the
// leave-one-device-out pass fits nothing on the device: its free
// efficiencies (unit "fraction") take the median of the values fitted on the
// other devices' groups (not fitted jointly with it); times and counts (a
// serving stack's or a kernel's) and the rest keep the device file's priors.
struct BlockPass {
  std::string pass;  // kLeaveOne...
  std::string device, software_build;
  bool applicable = false;  // false: one block only (nothing to hold out)
  std::string note;         // why not applicable, or how the priors were made
  std::vector<BlockResult> blocks;
  std::vector<MetricError> overall;  // per metric over every block
};

struct GroupReport {
  std::string device, software_build;
  std::vector<std::string> free_parameters;
  ParameterSet fitted;  // values and std errors (free ones fitted)
  int num_fit_points = 0;
  double fit_mape = 0, fit_max_ape = 0;  // over fitted points, in-sample
  double loo_mape = 0, loo_max_ape = 0;  // same points, held out
  std::string worst_id;                  // largest held-out error
  bool converged = true;
  int iterations = 0;
  // Fitted jointly with other groups (empty: alone): "device / build" of
  // the partners, and the parameters whose one value they share.
  std::vector<std::string> joint_with;
  std::vector<std::string> shared_parameters;
  std::string joint_reason;
  int joint_fit_points = 0;  // fitted points of the whole joint problem
  // Joint covariance of free_parameters (FitResult::covariance; for a joint
  // fit, this group's block of the joint problem's matrix), row-major.
  std::vector<std::string> covariance_names;
  std::vector<double> covariance;
};

// One acceptance target of the fit config, graded (FitConfig.block_targets
// and point_set_targets, proto/calibration.proto).
struct AggregateCheck {
  std::string name, rule;
  double value = 0, limit = 0;
  bool pass = true;
  // What the check is on, for matching known gaps: a block target's device,
  // build, pass and metric; a point-set target's device and metric (pass
  // empty).
  std::string device, software_build, pass_name, metric;
  std::string id;  // what a known gap's `points` names: the check's name, or
                   // the point-set target's name
};

// The misses one known gap (FitConfig.known_gaps) explains.
struct Diagnosis {
  int gap_index = 0;  // in FitConfig.known_gaps
  std::string device, software_build;
  std::vector<std::string> misses;  // aggregate check names and point ids
  std::string missing, settle_with;
};

struct ValidationReport {
  std::vector<ValidatedPoint> points;
  std::vector<GroupReport> groups;
  std::vector<AggregateCheck> aggregates;
  std::vector<ConsistencyFinding> consistency;
  std::vector<BlockPass> blocks;  // by group, then pass
  // Every missed check, diagnosed or not (DiagnoseMisses).
  std::vector<Diagnosis> diagnoses;      // by gap, in config order
  std::vector<std::string> undiagnosed;  // misses no known gap matches
  std::vector<std::string> stale_gaps;   // what known gaps list that no longer misses
  bool diagnosed = false;                // DiagnoseMisses ran (the shipped-data checks)
  bool held_out = true;  // the held-out and block passes ran (not --no-held-out)
  // Cells excluded by the physics rule: "point id: reason".
  std::vector<std::string> excluded;
  double overall_fit_mape = 0, overall_loo_mape = 0;
  std::string worst_id;
  double worst_held_out_error_pct = 0;
  int num_checked = 0, num_failed = 0;
  bool all_pass = true;
};

struct ValidateOptions {
  std::string device;     // empty: every device
  bool skip_loo = false;  // also skips the block passes
  // Checks that only make sense on the shipped data (calibration/data):
  // the fit config's acceptance targets (block_targets, point_set_targets
  // in calibration/fit_config.textproto) and the published tables'
  // consistency.
  bool shipped_data_checks = true;
  // Threads for the leave-one-cell-out refits; the report does not depend
  // on it.
  int jobs = 1;
  // Progress (optional): called from the calling thread before each
  // (device, build) fit starts, `done` of `total` fits finished and `label`
  // the one starting ("l4 / v0.11.0"), and once with done == total at the
  // end. The report does not depend on it.
  std::function<void(int done, int total, const std::string& label)> on_fit;
};

// Free parameters per (device, build): calibration/fit_config.textproto.
absl::StatusOr<servesim::proto::FitConfig> LoadFitConfig(const std::string& path);
// `path` == kDefaultFitConfig: the shipped fit configuration embedded in the
// binary (never a file of that name in the current directory); anything
// else: LoadFitConfig(path).
absl::StatusOr<servesim::proto::FitConfig> LoadNamedFitConfig(const std::string& path);
// Joint fits: >= 2 members, each with a `fits` entry, none listed twice,
// at least one shared parameter, free in every member. Messages name
// `path` and the entry.
absl::Status CheckJointFits(const servesim::proto::FitConfig& config,
                            const std::string& path);
// Fits and targets: each fits entry names a device the catalog knows (or
// a device file it loads), once per (device, software_build); its free
// parameters are parameter names; huber_delta is 0 (default 1) or in
// [1e-3, 1e3]. Block targets name block passes, metric names and
// statistics (MAPE, worst) with a limit in (0, 1e4]; point-set targets a
// device, a metric and such a limit. Messages name `path`, the entry and
// what is allowed (a misspelt name used to drop its checks, or fit a
// device on its priors, without a word).
absl::Status CheckFitSpecs(const servesim::proto::FitConfig& config,
                           const std::string& path);
inline constexpr char kDefaultFitConfig[] = "calibration/fit_config.textproto";

// Known gaps: device set; passes, metrics or points set; passes among the
// block passes; missing and settle_with written. Messages name `path` and
// the entry. (A misspelt metric, build or point matches nothing; the golden
// test checks that every shipped gap files a miss.)
absl::Status CheckKnownGaps(const servesim::proto::FitConfig& config,
                            const std::string& path);

// Files every missed check of `report` (point checks, aggregate checks)
// under the first known gap that matches it (report.diagnoses), the rest
// under report.undiagnosed; with report.held_out, lists under
// report.stale_gaps the gaps whose graded checks all pass and the points a
// gap lists that were graded and pass. RunValidation calls it last, with
// ValidateOptions::shipped_data_checks.
void DiagnoseMisses(const servesim::proto::FitConfig& fit_config,
                    ValidationReport& report);

// One line per known gap of `device` / `build` (gaps without a build
// included): which checks `servesim validate` misses, what the model lacks
// and what would settle it. For a prediction's provenance.
std::vector<std::string> KnownGapNotes(const servesim::proto::FitConfig& fit_config,
                                       const std::string& device,
                                       const std::string& build);

// KnownGapNotes of the shipped fit config (embedded, loaded once; thread
// safe): for a prediction made with the device's shipped profile of
// `build`. If the embedded config does not load, one line saying so.
std::vector<std::string> ShippedKnownGapNotes(const std::string& device,
                                              const std::string& build);

absl::StatusOr<ValidationReport> RunValidation(
    const MeasurementDb& db, const servesim::proto::FitConfig& fit_config,
    const ValidateOptions& options);

// The calibration profile of one fitted group (values, std errors, the
// points it came from, fit and held-out errors, and the server settings of
// the runs of `db` those points were measured on).
servesim::proto::CalibrationProfile MakeProfile(const GroupReport& group,
                                                const std::vector<ValidatedPoint>& points,
                                                const MeasurementDb& db);
// Text format, deterministic bytes.
absl::Status WriteProfile(const servesim::proto::CalibrationProfile& profile,
                          const std::string& path);
// calibration/profiles/<device>.textproto for the device's main build (the
// group with the most fitted throughput cells), <device>@<build>.textproto
// otherwise.
std::string ProfilePath(const std::string& dir, const GroupReport& group,
                        bool main_build);

// Renderings. Both deterministic.
std::string FormatReportText(const ValidationReport& report);
std::string FormatReportJson(const ValidationReport& report);

}  // namespace servesim

#endif  // SERVESIM_CALIBRATION_VALIDATION_H_
