// Named, bounded calibration parameters: the few interpretable knobs of a
// hardware model that calibration fits (achieved fraction of bandwidth,
// per-step host overhead, ...). Kept apart from the theory (the roofline).
#ifndef SERVESIM_HWMODELS_PARAMS_H_
#define SERVESIM_HWMODELS_PARAMS_H_

#include <string>
#include <vector>

namespace servesim {

struct Parameter {
  std::string name;  // e.g. "bw_eff_weights"
  double value = 0;  // current value
  double lower = 0;  // hard bounds for the fitter
  double upper = 0;
  double prior = 0;        // datasheet / physics prior (used where data are thin)
  double prior_sigma = 0;  // absolute std-dev of the prior; 0 = no prior
  double std_error = 0;    // fitted uncertainty (0 = not fitted)
  std::string unit;        // "fraction", "us", ...
  std::string meaning;     // one line: what the knob does
  std::string source;      // where the current value came from
};

// "upper" / "lower" when a fitted value sits on that hard bound (within
// 1e-6 of the range): the data push it past what the bound allows (a term
// the model lacks, or too few points), and its std error, from a Jacobian
// that vanishes there, says nothing. "" otherwise.
inline const char* AtBound(const Parameter& p) {
  const double tol = 1e-6 * (p.upper - p.lower);
  if (!(p.upper > p.lower)) return "";
  if (p.value >= p.upper - tol) return "upper";
  if (p.value <= p.lower + tol) return "lower";
  return "";
}

// An ordered list of parameters, looked up by name. Value type.
class ParameterSet {
 public:
  ParameterSet() = default;
  explicit ParameterSet(std::vector<Parameter> params) : params_(std::move(params)) {}

  const std::vector<Parameter>& params() const { return params_; }
  std::vector<Parameter>& mutable_params() { return params_; }
  size_t size() const { return params_.size(); }

  // nullptr when absent.
  const Parameter* Find(const std::string& name) const {
    for (const auto& p : params_)
      if (p.name == name) return &p;
    return nullptr;
  }
  Parameter* FindMutable(const std::string& name) {
    for (auto& p : params_)
      if (p.name == name) return &p;
    return nullptr;
  }
  // REQUIRES: the parameter exists.
  double Get(const std::string& name) const { return Find(name)->value; }

 private:
  std::vector<Parameter> params_;
};

}  // namespace servesim

#endif  // SERVESIM_HWMODELS_PARAMS_H_
