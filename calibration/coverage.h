// Structural error bands from the block-held-out errors of `validate`, and
// their coverage on data the fit never saw.
//
// The band (simulate --interval's structural source, experiments/
// capacity/intervals.h) at level L is held_out x exp(-+ q_L), q_L the split-conformal
// quantile (ConformalQuantile) of the |log(held-out / measured)| errors of
// the device's block-held-out predictions: for a calibrated device, the
// three refit passes pooled (one input length / concurrency / model out),
// of the metric itself when it has at least kMinMetricErrors errors, else
// of its family; for a device without a profile (predicted from priors,
// as the leave_one_device_out pass predicts a device), the largest
// leave_one_device_out q_L of the family over the shipped devices; that
// band is no narrower than a calibrated device's for most metrics, but a
// device whose own refit errors are larger (MI300X ITL) keeps
// its own wider band. Quantiles, not an rms
// scaled by a normal z: the errors are heavy-tailed (a few misses of 2x
// and more), and an rms-sized 50% band covered 67.5%.
//
// Coverage: over every block-held-out prediction (the refit passes, and
// leave_one_device_out: the device as if it had no profile), the fraction
// of measured values inside the 50% and 90% bands, per metric. The band of
// a prediction is sized without the point's block: a refit-pass
// prediction's q_L comes from the errors, in every refit pass, of the
// group's points that lie outside the point's block in that pass (the
// point itself, and every point that shares its input length, concurrency
// or model in the pass where that is the block, are left out); a
// leave_one_device_out prediction's q_L from the other devices'
// leave_one_device_out entries only. The parameter and workload sources are not added
// here (the held-out errors already carry the refits' parameter error and the benchmarks'
// run-to-run noise). Deterministic.
#ifndef SERVESIM_CALIBRATION_COVERAGE_H_
#define SERVESIM_CALIBRATION_COVERAGE_H_

#include <string>
#include <vector>

#include "calibration/validation.h"
#include "proto/hwmodels.pb.h"

namespace servesim {

// The levels a profile stores quantiles at (ascending).
inline constexpr double kStructuralLevels[] = {0.5, 0.8, 0.9, 0.95};
// The StructuralError.pass of the pooled refit passes.
inline constexpr char kPooledRefitPasses[] = "refit_passes";
// A metric's own band needs this many errors; fewer: its family's.
inline constexpr int kMinMetricErrors = 5;

// The ceil((n + 1) level)-th smallest of the n values (the largest when
// that exceeds n): under exchangeability a new error falls at or below it
// with probability >= level. 0 when `values` is empty. REQUIRES: 0 < level < 1.
double ConformalQuantile(std::vector<double> values, double level);

// The structural errors of one (device, software build) over `points`, in
// this order: per block pass (kLeaveOneInputLengthOut ...
// kLeaveOneDeviceOut) and family; kPooledRefitPasses per family; then
// kPooledRefitPasses per metric (metric name order, those with at least
// kMinMetricErrors errors). Each with its quantiles at kStructuralLevels.
std::vector<servesim::proto::StructuralError> StructuralErrors(
    const std::vector<ValidatedPoint>& points, const std::string& device,
    const std::string& software_build);

// The quantile of `e` at `level` (kStructuralLevels), or -1 when absent.
double StructuralQuantileAt(const servesim::proto::StructuralError& e, double level);

struct MetricCoverage {
  std::string metric;
  int num_predictions = 0;  // held-out predictions with a band
  double coverage_50 = 0;   // fraction inside the 50% interval
  double coverage_90 = 0;
  double median_half_50 = 0;  // the 50% bands' q (log scale), median
  double median_half_90 = 0;
};

struct CoverageReport {
  std::vector<MetricCoverage> metrics;  // metric name order
  MetricCoverage overall;               // metric "all"
};

CoverageReport ComputeCoverage(const ValidationReport& report);

// "coverage" section of the text report, and the JSON object
// {"<metric>": {"num_predictions", "coverage_50", "coverage_90", ...}}.
std::string FormatCoverageText(const CoverageReport& c);
std::string FormatCoverageJson(const CoverageReport& c);

}  // namespace servesim

#endif  // SERVESIM_CALIBRATION_COVERAGE_H_
