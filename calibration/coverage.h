// Coverage of the prediction intervals on data the fit never saw: over
// every block-held-out prediction `validate` makes (one input length, one
// concurrency, one model or the whole device held out), the fraction of
// measured values inside the 50% and 90% intervals, per metric.
//
// The interval of a held-out prediction is the structural band simulate
// --interval puts on it (experiments/capacity/intervals.h), sized without the
// point's own blocks: for the refit passes, sigma = the largest over the
// refit passes of the rms log error of the group's points of the metric's
// family that lie outside the point's block in that pass; for
// leave_one_device_out (a device as if it had no profile), the largest
// leave-one-device-out rms log error of the family on the other devices.
// The interval is held_out x exp(-+ z sigma). The parameter and workload
// sources are not added here (the held-out errors already carry the
// refits' parameter error and the benchmarks' run-to-run noise).
// Deterministic.
#ifndef SERVESIM_CALIBRATION_COVERAGE_H_
#define SERVESIM_CALIBRATION_COVERAGE_H_

#include <string>
#include <vector>

#include "calibration/validation.h"

namespace servesim {

struct MetricCoverage {
  std::string metric;
  int num_predictions = 0;  // held-out predictions with a band
  double coverage_50 = 0;   // fraction inside the 50% interval
  double coverage_90 = 0;
  double median_sigma = 0;  // the bands' log sigma, median
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
