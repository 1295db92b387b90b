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

// The project's one list of stream ids, one per purpose that draws random
// numbers. A value is part of every result drawn from it: never renumber
// one, and never give two purposes the same value (3 is retired).
enum class RngStream : uint64_t {
  // The vLLM-style client (sim/client.h, sim/random_source.h).
  kDatasetLengths = 1,
  kArrivals = 2,
  // simulate --interval: parameter draws and workload seeds.
  kIntervalParameters = 4,
  kIntervalWorkload = 5,
  // Trace workloads (traces/synthetic.h, traces/transforms.h).
  kTraceArrivals = 6,
  kSyntheticLengths = 7,
  kSyntheticSessions = 8,
  kSyntheticThinkTime = 9,
  kTraceSampling = 10,
  kEmpiricalLengths = 11,
};

// The one seed derivation: the user's seed and a stream id mixed into the
// seed of that purpose's Rng (SplitMix64 at state seed + (stream + 1) x
// its increment), so changing one knob does not reshuffle the others.
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
