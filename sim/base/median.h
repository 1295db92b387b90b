// The one median of the project (the middle value; the mean of the two
// middle ones for an even count): calibration's coverage report, the
// leave-one-device-out priors of `validate` and the catalog's priors by
// rule for an uncalibrated device (which must agree, so that the error
// validate measures is the error of the rule the catalog applies).
#ifndef SERVESIM_SIM_BASE_MEDIAN_H_
#define SERVESIM_SIM_BASE_MEDIAN_H_

#include <algorithm>
#include <vector>

namespace servesim {

// 0 for no values.
inline double Median(std::vector<double> x) {
  if (x.empty()) return 0;
  std::sort(x.begin(), x.end());
  const size_t n = x.size();
  return n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}

}  // namespace servesim

#endif  // SERVESIM_SIM_BASE_MEDIAN_H_
