// Prediction intervals for every metric `simulate` reports:
// how sure a prediction is, from the sources below, each computed and
// reported apart and then combined.
//  (a) parameters: K parameter vectors drawn from the calibration
//      profile's fitted joint normal (ParameterCovariance; the diagonal of
//      std_error when a profile has no covariance), in the log of each
//      rate (efficiencies, bandwidths: a step time is inversely
//      proportional to them, so a normal draw reached near-zero rates and
//      steps 30x slower; the covariance carried there by the delta
//      method), truncated to the
//      parameters' fit bounds by rejection, each re-simulated with common
//      random numbers (the point run's workload seed) on step models
//      rebuilt over the compiled graph (RebuildStepModel: no graph work).
//  (a') prior parameters: a datasheet-only deployment (no profile: priors
//      by rule) draws K vectors of its step parameters from their priors,
//      independent normals (log space for rates, as in (a)) of median the
//      prior and sigma the prior sigma of
//      StepParameterTable (hwmodels/step_model.h), or the largest std error
//      fitted for the parameter on the calibrated devices its prior by rule
//      averages (same vendor, else all) when that is larger (a device
//      without data knows a parameter no better than they know their
//      fitted values), truncated to the bounds the same way, with the same
//      common random numbers. Its own source
//      ("prior_parameters"), with its own K runs; a fleet mixing both kinds
//      draws fitted and prior parameters together in the K runs of (a)
//      (reported as "parameters"), so it too runs 2K + 1 simulations.
//  (b) workload: K more runs with other seeds of the arrival and length
//      draws (at the point's parameters). A trace replays fixed times and
//      lengths: no workload randomness, the band is the point.
//  (c) structural: the device's block-held-out errors of `validate`
//      (CalibrationProfile.structural_errors, calibration/coverage.h) as a
//      log-normal band whose sigma at the level L is q_L / z_L: q_L the
//      split-conformal quantile of |log(held-out / measured)| at L
//      (interpolated linearly in L between the stored levels 0.5, 0.8, 0.9,
//      0.95, the end values outside), so the band alone is exp(-+ q_L). The
//      entry: the three refit passes pooled, of the metric validate grades
//      that the interval metric is (p99_ttft_ms, output_throughput, ...)
//      when the profile has one, else of the metric's family; with neither,
//      the profile's leave-one-device-out entry of the family. A device with
//      no profile (or a family its profile has no error for) takes the
//      conformal quantile at L of the shipped profiles' leave-one-device-out
//      errors of the family, pooled (a device predicted from priors, as that
//      pass predicts one), and kFallbackStructuralSigma when no profile has
//      one. A datasheet-only device whose id has a shipped profile (a copy
//      of a shipped device file) pools the other devices' errors (as
//      validate bands that device's device-out predictions) and takes at
//      least its own profile's leave-one-device-out band (its measured
//      error when predicted from priors).
// Each source is summarised on the log scale: for the K samples x_k of a
// metric with point value x0 and l_k = log(x_k / x0), m = mean(l_k) and
// s = their sample standard deviation are reported. The band is a split
// normal around c = median(l_k), one side from the draws below it, the
// other from those above: s_lo = sqrt(2 sum_{l_k<c} (l_k - c)^2 / (K - 1)),
// s_hi likewise (both ~ s for a symmetric source, = s for K = 2; the
// structural source: c = 0, s_lo = s_hi = sigma), the band of a source
// [x0 exp(c - z s_lo), x0 exp(c + z s_hi)], z the normal quantile of
// (1 + level) / 2. A symmetric band around the mean mirrored what a draw
// that saturates the server does to one side onto the other: throughput
// above the offered rate, a TPOT below what the weights take to stream.
// Combined (the sources taken as independent log-normal factors): centres
// add and variances add side by side, [x0 exp(C - z S_lo), x0 exp(C + z
// S_hi)], C = sum c (the workload's c is left out: the point run is one
// draw of the same workload, not a biased one), S_lo = sqrt(sum s_lo^2).
//
// Deterministic: parameter draws come from StreamSeed(seed,
// kIntervalParameters), workload seeds from StreamSeed(seed,
// kIntervalWorkload); every run writes its own slot, so the report is
// byte-identical whatever `jobs`.
// Cost: 2K simulations beside the point run (K = 4 by default: 9 runs),
// a fleet mixing calibrated and datasheet-only deployments included.
#ifndef SERVESIM_EXPERIMENTS_CAPACITY_INTERVALS_H_
#define SERVESIM_EXPERIMENTS_CAPACITY_INTERVALS_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "experiments/capacity/sweep.h"
#include "experiments/runner/run_experiment.h"
#include "proto/experiment.pb.h"
#include "sim/base/json_writer.h"
#include "sim/report.h"

namespace servesim {

// Log sigma of the structural band when no shipped profile holds a
// leave-one-device-out error (a factor e^0.5 = 1.65 at one sigma).
inline constexpr double kFallbackStructuralSigma = 0.5;
inline constexpr int kDefaultIntervalSamples = 4;

struct IntervalOptions {
  double level = 0.9;                         // (0, 1)
  int num_samples = kDefaultIntervalSamples;  // K, per sampled source; >= 2
  int jobs = 1;                               // threads; the report does not depend on it
};

// One source's band on the log scale around the point (see the file
// comment). applicable == false: the source has nothing to draw (lo == hi
// == the point).
struct SourceBand {
  double lo = 0, hi = 0;
  double mean_log = 0, sd_log = 0;
  double center_log = 0, sd_log_lo = 0, sd_log_hi = 0;  // the split band (above)
  bool applicable = true;
};

struct MetricInterval {
  std::string name;    // vLLM's key: "p99_ttft_ms", "output_throughput", ...
  std::string label;   // for the text summary: "p99 TTFT"
  std::string unit;    // "ms", "tok/s", ...
  std::string family;  // throughput | ttft | tpot (the structural band's)
  double point = 0;
  double lo = 0, hi = 0;
  SourceBand parameters, prior_parameters, workload, structural;
};

struct IntervalReport {
  double level = 0;
  int num_parameter_samples = 0;  // 0: no profile covariance to draw from
  int num_prior_samples = 0;      // 0: no datasheet-only deployment
  int num_workload_seeds = 0;     // 0: a replayed trace
  std::vector<MetricInterval> metrics;
  // Re-simulations that fell behind the offered rate (a queue growing for
  // the whole run, experiments/capacity/saturation.h), per source; their
  // latencies depend on the run's length, not on a steady state. The least
  // request throughput one of them served (0 when none fell behind).
  int saturated_parameter_samples = 0;
  int saturated_prior_samples = 0;
  int saturated_workload_seeds = 0;
  double least_served_request_rate = 0;
  // How each source was sized, one line each.
  std::vector<std::string> notes;
};

// The normal quantile function (Acklam's rational approximation refined by
// one Halley step; |error| < 1e-12). REQUIRES: 0 < p < 1.
double NormalQuantile(double p);

// Summarises samples of one metric against its point value (file comment):
// non-finite or non-positive samples are skipped; fewer than two left, or a
// non-positive point: applicable == false.
SourceBand SampleBand(double point, const std::vector<double>& samples, double z);
// A band of mean 0 and the given log sigma.
SourceBand LogNormalBand(double point, double sd_log, double z);
// Fills m->lo / m->hi from its three sources (file comment).
void CombineSources(double z, MetricInterval* m);

// The metrics an interval covers, in report order, with their values in
// `result` (and $/Mtok per price tier of `costs`, named
// "usd_per_m_output_tokens_<tier>").
std::vector<MetricInterval> IntervalMetrics(
    const RunResult& result, const std::vector<ReportContext::Cost>& costs);

// The structural log sigma at `level` of the interval metric `metric`
// (an IntervalMetrics name) of `family` for a device: from its profile when
// `profile` is non-null, else the pooled shipped device-out band (see the
// file comment), at least the leave-one-device-out band of the shipped
// profile of `datasheet_device` when that id has one; `why` names the
// entry.
double StructuralSigma(const servesim::proto::CalibrationProfile* profile,
                       const std::string& family, const std::string& metric, double level,
                       std::string* why, const std::string& datasheet_device = "");

// Checks --interval / --interval-samples; errors name the flag.
absl::Status ValidateIntervalOptions(const IntervalOptions& options);

// The intervals of `point`, the finished run of `config` (as simulate ran
// it), whose report context is `ctx` (for the prices).
absl::StatusOr<IntervalReport> ComputeIntervals(const proto::ExperimentConfig& config,
                                                const ExperimentRun& point,
                                                const ReportContext& ctx,
                                                const IntervalOptions& options,
                                                uint64_t seed);

// One SLO term as SloProbability reads it: `metric` (an IntervalMetrics
// name) must stay at or below (upper) / at or above (!upper) `threshold`.
struct SloBound {
  std::string metric;
  bool upper = true;
  double threshold = 0;
};

// The probability that the fleet of `config` meets every term: the mean
// over K parameter draws (as ComputeIntervals draws them, common random
// numbers; fitted and prior draws in the same K runs) of the product over
// the terms of P(value x exp(e) meets the term), e ~ N(0, sigma^2) with the
// metric's structural sigma at level 2C - 1, C = options.level (one term
// alone is then met with probability >= C exactly when its threshold lies
// outside the one-sided C band; the terms' structural errors are taken as
// independent). Deterministic; runs K + 1 simulations on options.jobs
// threads. Errors: a term naming a metric without an interval.
absl::StatusOr<double> SloProbability(const proto::ExperimentConfig& config,
                                      const std::vector<SloBound>& terms,
                                      const IntervalOptions& options, uint64_t seed);

// sweep --interval: `base` plus, for every metric of `base` with an
// interval, "<metric>_lo" and "<metric>_hi" columns (ComputeIntervals at
// options.level with the point's client seed, one thread per point: the
// sweep runs points in parallel), and "interval_saturated_runs": the
// re-simulations that fell behind the offered rate (IntervalReport's
// saturated counts, summed). Costs 2K + 1 more simulations per point.
PointRunner WithIntervals(PointRunner base, const IntervalOptions& options);

// "servesim.intervals": {<metric>: {lo, hi, level, point, sources: {...}}},
// and "interval_method" beside it (K, notes).
void WriteIntervalsJson(const IntervalReport& report, JsonWriter& w);
// The text section under the summary: "p99 TTFT 412 ms [371, 466]" lines.
std::string IntervalsText(const IntervalReport& report);

}  // namespace servesim

#endif  // SERVESIM_EXPERIMENTS_CAPACITY_INTERVALS_H_
