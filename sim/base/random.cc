#include "sim/base/random.h"

#include <cmath>

#include "sim/base/hash.h"
#include "sim/base/status_macros.h"

namespace servesim {

uint64_t StreamSeed(uint64_t seed, RngStream stream) {
  return Mix64(seed + kGoldenGamma * static_cast<uint64_t>(stream));
}

int64_t Rng::UniformInt(int64_t lo, int64_t hi) {
  SERVESIM_CHECK(lo <= hi);
  const uint64_t range = static_cast<uint64_t>(hi) - static_cast<uint64_t>(lo);
  if (range == ~uint64_t{0}) return static_cast<int64_t>(gen_());
  const uint64_t n = range + 1;
  const uint64_t limit = ~uint64_t{0} - (~uint64_t{0} % n);  // multiple of n
  uint64_t x;
  do {
    x = gen_();
  } while (x >= limit);
  return lo + static_cast<int64_t>(x % n);
}

double Rng::Exponential(double rate) {
  SERVESIM_CHECK(rate > 0);
  return -std::log1p(-Uniform01()) / rate;
}

double Rng::Normal() {
  if (has_spare_normal_) {
    has_spare_normal_ = false;
    return spare_normal_;
  }
  double u, v, s;
  do {
    u = 2 * Uniform01() - 1;
    v = 2 * Uniform01() - 1;
    s = u * u + v * v;
  } while (s >= 1 || s == 0);
  const double f = std::sqrt(-2 * std::log(s) / s);
  spare_normal_ = v * f;
  has_spare_normal_ = true;
  return u * f;
}

double Rng::Weibull(double k, double lambda) {
  SERVESIM_CHECK(k > 0 && lambda > 0);
  return lambda * std::pow(-std::log1p(-Uniform01()), 1.0 / k);
}

double Rng::Gamma(double shape, double scale) {
  SERVESIM_CHECK(shape > 0 && scale > 0);
  if (shape < 1) {
    const double u = Uniform01();
    return Gamma(shape + 1, scale) * std::pow(1 - u, 1 / shape);
  }
  const double d = shape - 1.0 / 3.0;
  const double c = 1 / std::sqrt(9 * d);
  while (true) {
    double x, v;
    do {
      x = Normal();
      v = 1 + c * x;
    } while (v <= 0);
    v = v * v * v;
    const double u = Uniform01();
    if (u < 1 - 0.0331 * x * x * x * x) return d * v * scale;
    if (std::log(u) < 0.5 * x * x + d * (1 - v + std::log(v))) return d * v * scale;
  }
}

}  // namespace servesim
