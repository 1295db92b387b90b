// The project's one 64-bit mixer, shared by every user that needs a hash or
// a derived seed: the prefix-cache keys (sim/kv_cache.cc), the KV-aware
// router's chain keys (sim/router_aware.cc), the per-purpose RNG streams
// (sim/base/random.cc) and the trace prefix hashes (traces/prefix_hash.h).
// Changing any constant here changes every simulated result.
#ifndef SERVESIM_SIM_BASE_HASH_H_
#define SERVESIM_SIM_BASE_HASH_H_

#include <cstdint>

namespace servesim {

// SplitMix64's increment (2^64 / golden ratio).
inline constexpr uint64_t kGoldenGamma = 0x9e3779b97f4a7c15ULL;

// SplitMix64's output function: a bijective 64-bit finaliser.
constexpr uint64_t SplitMix64Finalize(uint64_t x) {
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// One SplitMix64 step from state `x`: the finaliser of x + kGoldenGamma.
// Mix64(0) is SplitMix64's first output for seed 0, 0xe220a8397b1dcdaf.
constexpr uint64_t Mix64(uint64_t x) { return SplitMix64Finalize(x + kGoldenGamma); }

// Order-dependent combine of `v` into the running hash `h` (Boost's
// hash_combine spread, then the SplitMix64 finaliser).
constexpr uint64_t HashCombine(uint64_t h, uint64_t v) {
  return SplitMix64Finalize(h ^ (v + kGoldenGamma + (h << 6) + (h >> 2)));
}

}  // namespace servesim

#endif  // SERVESIM_SIM_BASE_HASH_H_
