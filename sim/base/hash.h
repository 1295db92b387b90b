// The project's one 64-bit mixer, shared by every user that needs a hash or
// a derived seed: the prefix-cache keys (sim/kv_cache.cc), the KV-aware
// router's chain keys (sim/router_aware.cc), the per-purpose RNG streams
// (sim/base/random.cc) and the trace prefix hashes (traces/prefix_hash.h).
// Changing any constant here changes every simulated result.
// The one fingerprint of bytes, FNV-1a 64, is here too: device files'
// content hashes (hwmodels/catalog.h ContentHash, stored in profiles), the
// sweep's config hash (experiments/capacity/sweep.cc) and the per-request
// fingerprint of a measured cell (calibration/validation.cc).
#ifndef SERVESIM_SIM_BASE_HASH_H_
#define SERVESIM_SIM_BASE_HASH_H_

#include <cstdint>
#include <string_view>

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

// FNV-1a, 64 bit, fed byte by byte: a fingerprint, not a mixer (it does
// not spread small inputs; never use it for a seed or a cache key).
class Fnv1a64 {
 public:
  static constexpr uint64_t kOffsetBasis = 14695981039346656037ULL;
  static constexpr uint64_t kPrime = 1099511628211ULL;
  constexpr void AddByte(unsigned char b) {
    h_ ^= b;
    h_ *= kPrime;
  }
  constexpr void Add(std::string_view bytes) {
    for (const char c : bytes) AddByte(static_cast<unsigned char>(c));
  }
  // The 8 bytes of `x`, least significant first.
  constexpr void AddU64(uint64_t x) {
    for (int b = 0; b < 8; ++b)
      AddByte(static_cast<unsigned char>((x >> (8 * b)) & 0xff));
  }
  constexpr uint64_t value() const { return h_; }

 private:
  uint64_t h_ = kOffsetBasis;
};

constexpr uint64_t Fnv1a64Hash(std::string_view bytes) {
  Fnv1a64 h;
  h.Add(bytes);
  return h.value();
}

}  // namespace servesim

#endif  // SERVESIM_SIM_BASE_HASH_H_
