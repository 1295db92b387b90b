// Bounded, robust, prior-regularised Levenberg-Marquardt for the few
// calibration knobs of a hardware model (Ceres is not available).
//
// Each measured point i contributes the residual
//   e_i = log(pred_i / meas_i) / rel_sigma_i
// through a Huber loss (so one bad point cannot drag the fit), each free
// parameter with prior_sigma > 0 contributes (value - prior) / prior_sigma
// (a Gaussian prior from the datasheet/physics, so devices with a handful of
// points stay physical). Bounds are enforced by fitting z with
// value = lower + (upper - lower) * sigmoid(z). The Jacobian is numeric
// (central differences in z). Std errors come from (J^T J)^-1 in parameter
// space scaled by the residual variance max(1, chi2 / (n - p)) (when
// n <= p: max(1, (chi2 + prior chi2) / (n + n_prior - p)), the prior rows
// being residuals too; 1 when that leaves none: the residuals are in units
// of the points' noise).
//
// Deterministic: no threads, no randomness; same inputs give bit-identical
// results. Cost: (2p + 1) model evaluations per iteration.
#ifndef SERVESIM_CALIBRATION_FITTER_H_
#define SERVESIM_CALIBRATION_FITTER_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "hwmodels/params.h"

namespace servesim {

// Predicts every point for a parameter set (also the unused ones; the
// fitter only reads those with `use`). Called many times: keep it pure
// (and safe to call from several threads at once: see FitOptions::jobs).
using PredictFn = std::function<absl::StatusOr<std::vector<double>>(const ParameterSet&)>;

struct FitPoint {
  double measured = 0;      // > 0
  double rel_sigma = 0.05;  // relative noise (fraction) weighting the point
  bool use = true;          // false: not seen by the fit (held out / not fitted)
};

struct FitOptions {
  // Names of the parameters the fit may move; the rest stay as given.
  std::vector<std::string> free_parameters;
  double huber_delta = 1.0;  // in units of rel_sigma
  int max_iterations = 60;
  double derivative_step = 1e-3;  // in the transformed (z) space
  // Threads for LeaveOneGroupOut's refits (the results do not depend on
  // it); with more than one, `predict` is called concurrently.
  int jobs = 1;
};

struct FitResult {
  // The input set with free parameters' value and std_error replaced.
  ParameterSet params;
  std::vector<double> predicted;  // every point, at the fitted values
  double cost = 0;                // sum of Huber losses + prior terms / 2
  double chi2 = 0;                // sum of e_i^2 over used points
  int num_used = 0;
  int iterations = 0;
  bool converged = false;
  // Joint covariance of the free parameters in parameter units, row-major
  // over covariance_names (FitOptions::free_parameters order): the
  // Gauss-Newton estimate s2 (J^T J)^+ with J the Jacobian of the robust
  // residuals (data rows and prior rows) with respect to the parameters at
  // the solution, s2 = max(1, chi2 / (n - p)) (when n <= p: max(1, (chi2 +
  // prior chi2) / (n + n_prior - p)), 1 when that is not positive); its
  // diagonal's square roots are the std_error values. Empty with no free
  // parameter.
  std::vector<std::string> covariance_names;
  std::vector<double> covariance;
  double variance_scale = 1;  // s2 above
};

// REQUIRES: every free parameter exists with lower < upper, and every used
// point has measured > 0 and rel_sigma > 0. Returns InvalidArgument
// otherwise, or the predictor's error.
absl::StatusOr<FitResult> FitParameters(const ParameterSet& start,
                                        const std::vector<FitPoint>& points,
                                        const PredictFn& predict,
                                        const FitOptions& options);

// Leave-one-group-out cross-validation. `group[i]` names the group of point
// i (points measured in the same cell share a group); for each group that
// holds a used point, refits without that group's points (starting from
// `start`) and predicts them. The refits run on options.jobs threads. Returns, for every
// point, the prediction of the fit that did not see its group; points whose group holds
// no used point get the prediction of the fit on all used points. A point
// whose group name is empty is never held out: it is in every refit (block
// passes label only the points a block may hold, e.g. bench cells but not
// memory-log rows).
absl::StatusOr<std::vector<double>> LeaveOneGroupOut(
    const ParameterSet& start, const std::vector<FitPoint>& points,
    const std::vector<std::string>& group, const PredictFn& predict,
    const FitOptions& options);

// LeaveOneGroupOut for several labelings of the same points at once (one
// per block pass: cells, input lengths, concurrencies, ...): the fit on
// all used points and every refit of every labeling run as one pool of
// tasks on options.jobs threads, so no pass waits for the slowest refit of
// the one before. `held_out[l]` is what LeaveOneGroupOut(start, points,
// labelings[l], predict, options) returns; `all` is FitParameters(start,
// points, predict, options). Same errors as those.
struct GroupsLeftOut {
  FitResult all;
  std::vector<std::vector<double>> held_out;
};
absl::StatusOr<GroupsLeftOut> LeaveGroupsOut(
    const ParameterSet& start, const std::vector<FitPoint>& points,
    const std::vector<std::vector<std::string>>& labelings, const PredictFn& predict,
    const FitOptions& options);

// A PredictFn that remembers every answer of `predict` by the exact values
// (bit for bit) of the parameter set it was asked for. The refits of one
// problem all start from the same values, so each refit's first residuals
// and Jacobian are the all-points fit's, and a fit repeated with the same
// points costs only lookups. `predict` must be pure (the same values give
// the same answer): then the results are exactly those without the memo.
// Thread-safe; a caller asking for values another thread is computing waits
// for that answer rather than computing it twice. Memory: one prediction
// vector per distinct parameter set asked for, for the memo's lifetime.
PredictFn MemoizePredict(PredictFn predict);

}  // namespace servesim

#endif  // SERVESIM_CALIBRATION_FITTER_H_
