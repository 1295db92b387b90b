#include "calibration/fitter.h"

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <exception>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "Eigen/Dense"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
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
    // With no more points than parameters the points alone leave no
    // degrees of freedom, but the prior rows are residuals too: the misfit
    // the priors and bounds force (a point 17 sigma off with 6 parameters
    // for 3 points) then scales the covariance up over the n + n_prior - p
    // rows left; 1 when even those leave none.
    double s2 = 1.0;
    if (dof > 0) {
      s2 = std::max(1.0, chi2 / dof);
    } else {
      double prior_chi2 = 0;
      int num_prior = 0;
      for (const auto& b : problem.free()) {
        if (b.param->prior_sigma <= 0) continue;
        const double e = (b.param->value - b.param->prior) / b.param->prior_sigma;
        prior_chi2 += e * e;
        ++num_prior;
      }
      const int dof_with_priors = result.num_used + num_prior - p;
      if (dof_with_priors > 0) s2 = std::max(1.0, (chi2 + prior_chi2) / dof_with_priors);
    }
    result.variance_scale = s2;
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

absl::StatusOr<GroupsLeftOut> LeaveGroupsOut(
    const ParameterSet& start, const std::vector<FitPoint>& points,
    const std::vector<std::vector<std::string>>& labelings, const PredictFn& predict,
    const FitOptions& options) {
  // One labeling's folds: the indices of each held-out group.
  struct Fold {
    size_t labeling;
    const std::vector<size_t>* members;
  };
  // Ordered maps: the folds in a fixed order, whatever the thread count.
  std::vector<std::map<std::string, std::vector<size_t>>> members(labelings.size());
  std::vector<Fold> folds;
  for (size_t l = 0; l < labelings.size(); ++l) {
    const std::vector<std::string>& group = labelings[l];
    if (group.size() != points.size()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "loo: %d group names for %d points", group.size(), points.size()));
    }
    for (size_t i = 0; i < points.size(); ++i) members[l][group[i]].push_back(i);
    for (const auto& [name, idx] : members[l]) {
      if (name.empty()) continue;  // never held out
      bool any_used = false;
      for (size_t i : idx) any_used |= points[i].use;
      if (any_used) folds.push_back({l, &idx});
    }
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
      for (size_t i : *folds[t - 1].members) train[i].use = false;
      fits[t] = FitParameters(start, train, predict, options);
    } catch (const std::exception& e) {  // e.g. bad_alloc: an error, not a crash
      fits[t] = absl::InternalError(
          absl::StrFormat("fit %d of %d: %s", t, num_tasks, e.what()));
    }
  });

  for (const absl::StatusOr<FitResult>& f : fits) RETURN_IF_ERROR(f.status());
  GroupsLeftOut out;
  out.all = *std::move(fits[0]);
  out.held_out.assign(labelings.size(), out.all.predicted);
  for (size_t f = 0; f < folds.size(); ++f) {
    for (size_t i : *folds[f].members) {
      out.held_out[folds[f].labeling][i] = fits[f + 1]->predicted[i];
    }
  }
  return out;
}

absl::StatusOr<std::vector<double>> LeaveOneGroupOut(
    const ParameterSet& start, const std::vector<FitPoint>& points,
    const std::vector<std::string>& group, const PredictFn& predict,
    const FitOptions& options) {
  ASSIGN_OR_RETURN(GroupsLeftOut r,
                   LeaveGroupsOut(start, points, {group}, predict, options));
  return std::move(r.held_out[0]);
}

namespace {

// MemoizePredict's shared state: one entry per parameter set asked for.
class PredictMemo {
 public:
  explicit PredictMemo(PredictFn predict) : predict_(std::move(predict)) {}

  absl::StatusOr<std::vector<double>> Get(const ParameterSet& params) {
    std::string key;
    key.reserve(params.size() * sizeof(double));
    for (const Parameter& p : params.params()) {
      key.append(reinterpret_cast<const char*>(&p.value), sizeof(double));
    }
    std::shared_ptr<Entry> entry;
    bool compute = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      std::shared_ptr<Entry>& slot = entries_[key];
      if (slot == nullptr) {
        slot = std::make_shared<Entry>();
        compute = true;
      }
      entry = slot;
    }
    if (compute) {
      absl::StatusOr<std::vector<double>> value;
      try {
        value = predict_(params);
      } catch (const std::exception& e) {  // waiters get an error, not a hang
        value = absl::InternalError(absl::StrCat("predict: ", e.what()));
      }
      {
        std::lock_guard<std::mutex> lock(entry->mu);
        entry->value = std::move(value);
        entry->done = true;
      }
      entry->cv.notify_all();
    }
    std::unique_lock<std::mutex> lock(entry->mu);
    entry->cv.wait(lock, [&entry] { return entry->done; });
    return entry->value;
  }

 private:
  struct Entry {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    absl::StatusOr<std::vector<double>> value;
  };
  const PredictFn predict_;
  std::mutex mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<Entry>> entries_;
};

}  // namespace

PredictFn MemoizePredict(PredictFn predict) {
  auto memo = std::make_shared<PredictMemo>(std::move(predict));
  return [memo](const ParameterSet& params) { return memo->Get(params); };
}

}  // namespace servesim
