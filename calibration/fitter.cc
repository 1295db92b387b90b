#include "calibration/fitter.h"

#include <algorithm>
#include <cmath>
#include <exception>
#include <limits>
#include <map>

#include "Eigen/Dense"
#include "absl/strings/str_format.h"
#include "sim/base/parallel.h"
#include "sim/base/status_macros.h"

namespace servesim {
namespace {

struct Bound {
  Parameter* param;
  double lower, upper;
};

double Sigmoid(double z) { return 1.0 / (1.0 + std::exp(-z)); }

// Keeps z finite when a start value sits on (or outside) a bound.
double ToZ(double value, double lower, double upper) {
  double s = (value - lower) / (upper - lower);
  s = std::clamp(s, 1e-6, 1.0 - 1e-6);
  return std::log(s / (1.0 - s));
}

double FromZ(double z, double lower, double upper) {
  return lower + (upper - lower) * Sigmoid(z);
}

// Huber loss as a signed residual r with r^2 / 2 = rho(e).
double RobustResidual(double e, double delta) {
  const double a = std::abs(e);
  if (a <= delta) return e;
  const double r = std::sqrt(2.0 * delta * (a - 0.5 * delta));
  return e < 0 ? -r : r;
}

class Problem {
 public:
  Problem(const ParameterSet& start, const std::vector<FitPoint>& points,
          const PredictFn& predict, const FitOptions& options)
      : params_(start), points_(points), predict_(predict), options_(options) {}

  absl::Status Init() {
    for (const std::string& name : options_.free_parameters) {
      Parameter* p = params_.FindMutable(name);
      if (p == nullptr) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "fit: free parameter '%s' is not in the model's parameter set", name));
      }
      if (!(p->lower < p->upper)) {
        return absl::InvalidArgumentError(
            absl::StrFormat("fit: parameter '%s' needs lower < upper (got [%g, %g])",
                            name, p->lower, p->upper));
      }
      if (p->prior_sigma < 0) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "fit: parameter '%s' prior_sigma %g must be >= 0", name, p->prior_sigma));
      }
      free_.push_back({p, p->lower, p->upper});
    }
    for (size_t i = 0; i < points_.size(); ++i) {
      const FitPoint& pt = points_[i];
      if (!pt.use) continue;
      if (!(pt.measured > 0) || !(pt.rel_sigma > 0)) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "fit: point %d needs measured > 0 and rel_sigma > 0 (got %g, %g)", i,
            pt.measured, pt.rel_sigma));
      }
      ++num_used_;
    }
    for (const Bound& b : free_) {
      if (b.param->prior_sigma > 0) ++num_prior_;
    }
    return absl::OkStatus();
  }

  int num_free() const { return static_cast<int>(free_.size()); }
  int num_used() const { return num_used_; }
  int num_rows() const { return num_used_ + num_prior_; }

  Eigen::VectorXd StartZ() const {
    Eigen::VectorXd z(num_free());
    for (int k = 0; k < num_free(); ++k) {
      z[k] = ToZ(free_[k].param->value, free_[k].lower, free_[k].upper);
    }
    return z;
  }

  void SetZ(const Eigen::VectorXd& z) {
    for (int k = 0; k < num_free(); ++k) {
      free_[k].param->value = FromZ(z[k], free_[k].lower, free_[k].upper);
    }
  }

  // Residual vector at z; also the full prediction vector when asked.
  absl::StatusOr<Eigen::VectorXd> Residuals(const Eigen::VectorXd& z,
                                            std::vector<double>* predicted = nullptr,
                                            double* chi2 = nullptr) {
    SetZ(z);
    ASSIGN_OR_RETURN(std::vector<double> pred, predict_(params_));
    if (pred.size() != points_.size()) {
      return absl::InternalError(
          absl::StrFormat("fit: predictor returned %d values for %d points", pred.size(),
                          points_.size()));
    }
    Eigen::VectorXd r(num_rows());
    int row = 0;
    double c2 = 0;
    for (size_t i = 0; i < points_.size(); ++i) {
      const FitPoint& pt = points_[i];
      if (!pt.use) continue;
      // A non-positive prediction is a model failure at these values: make
      // it very expensive but finite so the LM step is rejected.
      const double p = pred[i] > 0 ? pred[i] : pt.measured * 1e-6;
      const double e = std::log(p / pt.measured) / pt.rel_sigma;
      c2 += e * e;
      r[row++] = RobustResidual(e, options_.huber_delta);
    }
    for (const Bound& b : free_) {
      if (b.param->prior_sigma > 0) {
        r[row++] = (b.param->value - b.param->prior) / b.param->prior_sigma;
      }
    }
    if (predicted != nullptr) *predicted = std::move(pred);
    if (chi2 != nullptr) *chi2 = c2;
    return r;
  }

  absl::StatusOr<Eigen::MatrixXd> Jacobian(const Eigen::VectorXd& z) {
    const double h = options_.derivative_step;
    Eigen::MatrixXd jac(num_rows(), num_free());
    for (int k = 0; k < num_free(); ++k) {
      Eigen::VectorXd zp = z, zm = z;
      zp[k] += h;
      zm[k] -= h;
      ASSIGN_OR_RETURN(Eigen::VectorXd rp, Residuals(zp));
      ASSIGN_OR_RETURN(Eigen::VectorXd rm, Residuals(zm));
      jac.col(k) = (rp - rm) / (2 * h);
    }
    SetZ(z);
    return jac;
  }

  ParameterSet& params() { return params_; }
  const std::vector<Bound>& free() const { return free_; }

 private:
  ParameterSet params_;
  const std::vector<FitPoint>& points_;
  const PredictFn& predict_;
  const FitOptions& options_;
  std::vector<Bound> free_;
  int num_used_ = 0;
  int num_prior_ = 0;
};

}  // namespace

absl::StatusOr<FitResult> FitParameters(const ParameterSet& start,
                                        const std::vector<FitPoint>& points,
                                        const PredictFn& predict,
                                        const FitOptions& options) {
  Problem problem(start, points, predict, options);
  RETURN_IF_ERROR(problem.Init());
  FitResult result;
  result.num_used = problem.num_used();
  const int p = problem.num_free();

  Eigen::VectorXd z = problem.StartZ();
  ASSIGN_OR_RETURN(Eigen::VectorXd r, problem.Residuals(z));
  double cost = 0.5 * r.squaredNorm();
  double lambda = 1e-3;
  int iter = 0;
  bool converged = p == 0;
  for (; iter < options.max_iterations && !converged; ++iter) {
    ASSIGN_OR_RETURN(Eigen::MatrixXd jac, problem.Jacobian(z));
    const Eigen::MatrixXd jtj = jac.transpose() * jac;
    const Eigen::VectorXd g = jac.transpose() * r;
    if (g.lpNorm<Eigen::Infinity>() < 1e-10) {
      converged = true;
      break;
    }
    bool accepted = false;
    for (int tries = 0; tries < 12 && !accepted; ++tries) {
      Eigen::MatrixXd a = jtj;
      for (int k = 0; k < p; ++k) a(k, k) += lambda * std::max(jtj(k, k), 1e-12);
      const Eigen::VectorXd dz = a.ldlt().solve(-g);
      const Eigen::VectorXd z_new = z + dz;
      ASSIGN_OR_RETURN(Eigen::VectorXd r_new, problem.Residuals(z_new));
      const double cost_new = 0.5 * r_new.squaredNorm();
      if (std::isfinite(cost_new) && cost_new < cost) {
        const double gain = cost - cost_new;
        z = z_new;
        r = r_new;
        accepted = true;
        lambda = std::max(lambda / 3.0, 1e-9);
        if (gain < 1e-10 * (1.0 + cost) || dz.lpNorm<Eigen::Infinity>() < 1e-8) {
          converged = true;
        }
        cost = cost_new;
      } else {
        lambda *= 4.0;
      }
    }
    if (!accepted) converged = true;  // no descent direction left: a minimum
  }

  double chi2 = 0;
  ASSIGN_OR_RETURN(r, problem.Residuals(z, &result.predicted, &chi2));
  result.cost = 0.5 * r.squaredNorm();
  result.chi2 = chi2;
  result.iterations = iter;
  result.converged = converged;

  // Uncertainty in parameter space: J_theta = J_z / (dtheta/dz).
  if (p > 0) {
    ASSIGN_OR_RETURN(Eigen::MatrixXd jac, problem.Jacobian(z));
    for (int k = 0; k < p; ++k) {
      const auto& b = problem.free()[k];
      const double s = Sigmoid(z[k]);
      const double dtheta = (b.upper - b.lower) * s * (1 - s);
      jac.col(k) /= std::max(dtheta, 1e-300);
    }
    const int dof = result.num_used - p;
    // The residuals are already in units of each point's measurement noise
    // (rel_sigma), so s2 = 1 is the covariance under that noise; a fit worse
    // than the noise (model error) scales it up, but one that looks better
    // does not scale it down: with few degrees of freedom that is luck (four
    // cells and three parameters leave one), and it made a 4-cell fit report
    // smaller errors than a 12-cell one of the same device.
    const double s2 = dof > 0 ? std::max(1.0, chi2 / dof) : 1.0;
    const Eigen::MatrixXd info = jac.transpose() * jac;
    Eigen::MatrixXd cov = info.completeOrthogonalDecomposition().pseudoInverse() * s2;
    result.covariance_names.reserve(p);
    result.covariance.reserve(static_cast<size_t>(p) * p);
    for (int k = 0; k < p; ++k) {
      result.covariance_names.push_back(problem.free()[k].param->name);
      for (int l = 0; l < p; ++l) {
        const double c = cov(k, l);
        result.covariance.push_back(std::isfinite(c) ? c : 0.0);
      }
    }
    for (int k = 0; k < p; ++k) {
      const double var = cov(k, k);
      problem.free()[k].param->std_error =
          std::isfinite(var) && var > 0 ? std::sqrt(var) : 0.0;
    }
  }
  result.params = problem.params();
  return result;
}

absl::StatusOr<std::vector<double>> LeaveOneGroupOut(
    const ParameterSet& start, const std::vector<FitPoint>& points,
    const std::vector<std::string>& group, const PredictFn& predict,
    const FitOptions& options) {
  if (group.size() != points.size()) {
    return absl::InvalidArgumentError(absl::StrFormat("loo: %d group names for %d points",
                                                      group.size(), points.size()));
  }
  // Ordered map: the folds in a fixed order, whatever the thread count.
  std::map<std::string, std::vector<size_t>> members;
  for (size_t i = 0; i < points.size(); ++i) members[group[i]].push_back(i);
  std::vector<const std::vector<size_t>*> folds;
  for (const auto& [name, idx] : members) {
    if (name.empty()) continue;  // never held out
    bool any_used = false;
    for (size_t i : idx) any_used |= points[i].use;
    if (any_used) folds.push_back(&idx);
  }
  // Task 0 fits every used point; task t > 0 refits without fold t - 1.
  // Each task writes only its own slot, so the results are the same on any
  // number of threads.
  const int num_tasks = static_cast<int>(folds.size()) + 1;
  std::vector<absl::StatusOr<FitResult>> fits(num_tasks);
  ParallelFor(num_tasks, options.jobs, [&](int t) {
    try {
      if (t == 0) {
        fits[0] = FitParameters(start, points, predict, options);
        return;
      }
      std::vector<FitPoint> train = points;
      for (size_t i : *folds[t - 1]) train[i].use = false;
      fits[t] = FitParameters(start, train, predict, options);
    } catch (const std::exception& e) {  // e.g. bad_alloc: an error, not a crash
      fits[t] = absl::InternalError(
          absl::StrFormat("fit %d of %d: %s", t, num_tasks, e.what()));
    }
  });

  for (const absl::StatusOr<FitResult>& f : fits) RETURN_IF_ERROR(f.status());
  std::vector<double> held_out = fits[0]->predicted;
  for (size_t f = 0; f < folds.size(); ++f) {
    for (size_t i : *folds[f]) held_out[i] = fits[f + 1]->predicted[i];
  }
  return held_out;
}

}  // namespace servesim
