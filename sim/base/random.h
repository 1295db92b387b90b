// Deterministic random numbers: std::mt19937_64 plus our own samplers (the
// C++ standard does not fix the algorithms of std::*_distribution, so
// results would differ between standard libraries). One Rng per purpose,
// seeded with StreamSeed(config seed, stream id).
// Thread-compatible. Cheap to copy (but copying duplicates the stream).
#ifndef SERVESIM_SIM_BASE_RANDOM_H_
#define SERVESIM_SIM_BASE_RANDOM_H_

#include <cstdint>
#include <random>

namespace servesim {

// Stream ids for the purposes that draw random numbers.
enum class RngStream : uint64_t {
  kDatasetLengths = 1,
  kArrivals = 2,
  kDatasetContent = 3,
  // simulate --interval: parameter draws and workload seeds.
  kIntervalParameters = 4,
  kIntervalWorkload = 5,
};

// Mixes the user's seed with a stream id (splitmix64).
uint64_t StreamSeed(uint64_t seed, RngStream stream);

class Rng {
 public:
  explicit Rng(uint64_t seed) : gen_(seed) {}
  uint64_t NextU64() { return gen_(); }
  // Uniform in [0, 1) with 53 random bits.
  double Uniform01() { return static_cast<double>(gen_() >> 11) * 0x1.0p-53; }
  // Uniform integer in [lo, hi] (inclusive), unbiased (rejection).
  // REQUIRES: lo <= hi.
  int64_t UniformInt(int64_t lo, int64_t hi);
  // Exponential with the given rate (mean 1 / rate). REQUIRES: rate > 0.
  double Exponential(double rate);
  // Standard normal (Marsaglia polar method).
  double Normal();
  // Gamma(shape, scale) by Marsaglia-Tsang (shape < 1 via the boost
  // U^(1/shape)). REQUIRES: shape > 0, scale > 0.
  double Gamma(double shape, double scale);
  // Weibull(k, lambda) by inversion. REQUIRES: k > 0, lambda > 0.
  double Weibull(double k, double lambda);

 private:
  std::mt19937_64 gen_;
  bool has_spare_normal_ = false;
  double spare_normal_ = 0;
};

}  // namespace servesim

#endif  // SERVESIM_SIM_BASE_RANDOM_H_
