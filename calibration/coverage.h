// Structural error bands from the block-held-out errors of `validate`, and
// their coverage on data the fit never saw.
//
// The band (simulate --interval's structural source, experiments/
// capacity/intervals.h) at level L is held_out x exp(-+ q_L), q_L the
// split-conformal quantile (ConformalQuantile) of the |log(held-out /
// measured)| errors of block-held-out predictions: for a calibrated device,
// the three refit passes pooled (one input length / concurrency / model
// out), of the metric itself when the device has at least kMinMetricErrors
// errors of it; else of the metric with the same metric's refit errors on
// the other devices added (the same kind of prediction: decode_rate's band
// came from its family, output throughput under load, and covered 94% at
// 50%) when that makes kMinMetricErrors; else of its family. For a device
// without a profile (predicted from priors, as the leave_one_device_out
// pass predicts a device): the largest over the shipped devices of their
// leave_one_device_out q_L of the family and of their own band of the
// metric, so that it is no narrower than any calibrated device's band.
// Quantiles, not an rms scaled by a normal z: the errors are heavy-tailed
// (a few misses of 2x and more), and an rms-sized 50% band covered 67.5%.
//
// Coverage: over every block-held-out prediction (the refit passes, and
// leave_one_device_out: the device as if it had no profile), the fraction
// of measured values inside the 50% and 90% bands, per metric, per family
// and overall; a row is judged against the targets (kTarget50, kTarget90)
// from kMinJudgedPredictions predictions on. The band of a prediction is
// sized without the point's block: a refit-pass prediction's q_L comes
// from the errors, in every refit pass, of the group's points that lie
// outside the point's block in that pass (the point itself, and every
// point that shares its input length, concurrency or model in the pass
// where that is the block, are left out), with the other groups' errors of
// the metric as above (their fits never saw the point); a
// leave_one_device_out prediction's q_L from the other devices' entries
// only (their own bands sized without any error of this device). The
// parameter and workload sources are not added here (the held-out errors
// already carry the refits' parameter error and the benchmarks'
// run-to-run noise). Deterministic.
#ifndef SERVESIM_CALIBRATION_COVERAGE_H_
#define SERVESIM_CALIBRATION_COVERAGE_H_

#include <string>
#include <utility>
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

// A coverage target: an interval at `level` should cover a fraction in
// [lo, hi] of the held-out predictions.
struct CoverageTarget {
  double level, lo, hi;
};
inline constexpr CoverageTarget kTarget50 = {0.5, 0.4, 0.6};
inline constexpr CoverageTarget kTarget90 = {0.9, 0.8, 0.97};
// A row (metric, family or "all") is judged against the targets only from
// this many predictions on: the smallest n from which on (checked to
// n = 1000) an exactly calibrated interval, k ~ Binomial(n, level) inside,
// lands in both targets with probability >= 0.9. Below it the targets
// cannot tell a calibrated band from a wrong one (n = 18: 0.52 at 50%);
// such a row is printed with its 95% Wilson intervals, "too few to judge",
// and counts in its family's row, which is judged.
inline constexpr int kMinJudgedPredictions = 74;

// P(k / n in [t.lo, t.hi]) for k ~ Binomial(n, t.level).
double CalibratedInTargetProbability(int n, const CoverageTarget& t);
bool InTarget(double coverage, const CoverageTarget& t);
// The 95% Wilson score interval of a proportion k / n ({0, 1} when n = 0).
std::pair<double, double> WilsonInterval(int k, int n);

// The ceil((n + 1) level)-th smallest of the n values (the largest when
// that exceeds n): under exchangeability a new error falls at or below it
// with probability >= level. 0 when `values` is empty. REQUIRES: 0 < level < 1.
double ConformalQuantile(std::vector<double> values, double level);

// The structural errors of one (device, software build) over `points`, in
// this order: per block pass (kLeaveOneInputLengthOut ...
// kLeaveOneDeviceOut) and family; kPooledRefitPasses per family; then
// kPooledRefitPasses per metric (metric name order, those with at least
// kMinMetricErrors errors, the other groups' errors of the metric added
// when its own are fewer). Each with its quantiles at kStructuralLevels.
std::vector<servesim::proto::StructuralError> StructuralErrors(
    const std::vector<ValidatedPoint>& points, const std::string& device,
    const std::string& software_build);

// The leave_one_device_out |log errors| of `family` held by `entries`
// (their abs_log_errors), pooled: the band of a device without a profile
// is their ConformalQuantile, because a device nobody measured is
// exchangeable with the devices each predicted from the others only.
std::vector<double> PooledDeviceOutErrors(
    const std::vector<const servesim::proto::StructuralError*>& entries,
    const std::string& family);

// The quantile of `e` at `level` (kStructuralLevels), or -1 when absent.
double StructuralQuantileAt(const servesim::proto::StructuralError& e, double level);

struct MetricCoverage {
  std::string metric;
  int num_predictions = 0;  // held-out predictions with a band
  double coverage_50 = 0;   // fraction inside the 50% interval
  double coverage_90 = 0;
  double median_half_50 = 0;  // the 50% bands' q (log scale), median
  double median_half_90 = 0;
  bool judged = false;     // num_predictions >= kMinJudgedPredictions
  bool in_target = false;  // judged, and both coverages inside their targets
  std::pair<double, double> wilson_50{0, 1}, wilson_90{0, 1};  // 95%
};

struct CoverageReport {
  std::vector<MetricCoverage> metrics;   // metric name order
  std::vector<MetricCoverage> families;  // throughput, ttft, tpot (those present)
  MetricCoverage overall;                // metric "all"
};

CoverageReport ComputeCoverage(const ValidationReport& report);

// "coverage" section of the text report, and the JSON object
// {"<metric>": {"num_predictions", "coverage_50", "coverage_90", ...}}.
std::string FormatCoverageText(const CoverageReport& c);
std::string FormatCoverageJson(const CoverageReport& c);

}  // namespace servesim

#endif  // SERVESIM_CALIBRATION_COVERAGE_H_
