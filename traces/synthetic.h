// Synthetic workloads as RequestSources: arrival processes, length
// distributions and multi-turn sessions that reuse their prefix.
//
// Determinism: every random draw comes from std::mt19937_64 through the
// samplers below (never std::*_distribution); each purpose (arrivals,
// lengths, sessions, think times) has its own stream,
// StreamSeed(seed, RngStream::k...) of sim/base/random.h, so changing one
// knob does not reshuffle the others.
#ifndef SERVESIM_TRACES_SYNTHETIC_H_
#define SERVESIM_TRACES_SYNTHETIC_H_

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "sim/base/random.h"
#include "sim/request.h"
#include "sim/request_source.h"

namespace servesim {

// ------------------------------------------------------------ arrivals

struct RatePhase {
  double duration_s = 0;
  double rate_per_s = 0;  // 0: a quiet phase
};

struct ArrivalSpec {
  enum class Kind {
    kAllAtOnce,  // every request at t = 0 (vLLM's request_rate inf)
    kConstant,   // exactly 1/rate apart
    kPoisson,    // exponential gaps
    kGamma,      // Gamma gaps with shape = burstiness (vLLM's --burstiness)
    kWeibull,    // Weibull gaps with shape k (k < 1 burstier than Poisson)
    kSchedule,   // Poisson with a piecewise-constant rate, repeated (diurnal)
    kSpikes,     // Poisson at rate_per_s with periodic spikes
  };
  Kind kind = Kind::kPoisson;
  double rate_per_s = 1.0;  // mean rate (Constant, Poisson, Gamma, Weibull, Spikes base)
  double shape = 1.0;       // Gamma burstiness / Weibull k
  std::vector<RatePhase> schedule;  // kSchedule
  double spike_period_s = 60;       // kSpikes: one spike per period...
  double spike_duration_s = 5;      // ...lasting this long...
  double spike_multiplier = 10;     // ...at rate_per_s times this
};

// Checks ranges; messages name the field and the allowed range.
absl::Status ValidateArrivalSpec(const ArrivalSpec& spec);

// Absolute arrival times, nondecreasing. The first arrival is at t = 0 (as
// vLLM's client sends its first request at once), except for kSchedule and
// kSpikes, whose first arrival is drawn. Thread-compatible.
class ArrivalProcess {
 public:
  static absl::StatusOr<std::unique_ptr<ArrivalProcess>> Create(const ArrivalSpec& spec,
                                                                uint64_t seed);
  TimeNs Next();
  std::string Describe() const;

 private:
  ArrivalProcess(ArrivalSpec spec, uint64_t seed)
      : spec_(std::move(spec)), sampler_(seed) {}
  TimeNs NextScheduled();

  ArrivalSpec spec_;
  Rng sampler_;
  TimeNs now_ns_ = 0;
  bool first_ = true;
  // kSchedule / kSpikes: phases (spikes are turned into a schedule).
  std::vector<RatePhase> phases_;
  double cycle_s_ = 0;
};

// ------------------------------------------------------------ lengths

struct LengthSpec {
  enum class Kind {
    kFixed,      // input_len / output_len exactly
    kUniform,    // vLLM random dataset: VllmRandomLengthBounds (sim/random_source.h)
    kEmpirical,  // (input, output) pairs drawn jointly, with replacement
  };
  Kind kind = Kind::kFixed;
  int32_t input_len = 1024;
  int32_t output_len = 128;
  double range_ratio = 0;  // kUniform, in [0, 1)
  std::vector<std::pair<int32_t, int32_t>> empirical;
};

absl::Status ValidateLengthSpec(const LengthSpec& spec);

// Reads up to all of `source` and keeps a uniform sample of at most
// `max_samples` (input, output) pairs (reservoir sampling: memory bounded
// whatever the trace size), in source order.
absl::StatusOr<std::vector<std::pair<int32_t, int32_t>>> SampleEmpiricalLengths(
    RequestSource& source, int64_t max_samples, uint64_t seed);

// ------------------------------------------------------------ sessions

struct SessionSpec {
  // Turns per session, uniform in [min_turns, max_turns]; 1/1 means
  // independent single-turn requests (session_id -1).
  int32_t min_turns = 1;
  int32_t max_turns = 1;
  // Mean of the exponential time between a turn's arrival and the next
  // turn's (the answer's latency plus the user's think time). The engine
  // holds a turn whose previous answer has not ended (sim/engine.h).
  double think_time_s = 10;
  // Tokens at the start of every prompt shared by all requests (a system
  // prompt); hashed so the prefix cache can hit.
  int32_t shared_prefix_tokens = 0;
  // A session ends early when its next prompt would exceed this (0: no
  // limit).
  int32_t max_input_tokens = 0;
};

absl::Status ValidateSessionSpec(const SessionSpec& spec);

struct SyntheticOptions {
  ArrivalSpec arrival;  // of single requests, or of session starts
  LengthSpec lengths;   // of single prompts, or of each turn's new user text
  SessionSpec sessions;
  int64_t num_requests = 1000;  // 1..2^31-1
  uint64_t seed = 0;
  int32_t hash_block_tokens = 16;  // vLLM's default block size
};

// A synthetic request stream. Multi-turn: turn k's prompt is turn k-1's
// prompt + its answer + new user text, so its leading full blocks carry
// the same prefix_hashes as the previous turn's prompt and answer. Turns
// of different sessions interleave in arrival order ((time, seq) order).
// A request that would arrive past kMaxTraceArrivalNs (a very low rate
// with many requests) is an error, never a saturated time.
// Memory: O(active sessions).
absl::StatusOr<std::unique_ptr<RequestSource>> MakeSyntheticSource(
    const SyntheticOptions& opts);

// ------------------------------------------------ vLLM random-dataset prompts

// The prefix hashes of prompt `index` of `vllm bench serve`'s random
// dataset drawn with seed `seed` and `input_tokens` tokens: one per whole
// `block_tokens` tokens (the partial last block is left unique). vLLM
// (benchmarks/datasets.py, RandomDataset) makes token j of prompt i
// (offset_i + i + j) mod vocab, with the offsets drawn in order from one
// generator seeded by --seed (default 0) and, at --random-range-ratio 0,
// nothing else drawn before them; so every run with the same seed sends the
// same prompt i whatever its num_prompts, and prompt i of a shorter length
// is a prefix of prompt i of a longer one. Block b's content id is (seed,
// i, b), chained (traces/prefix_hash.h). REQUIRES: block_tokens >= 1,
// input_tokens >= 0, index >= 0.
std::vector<uint64_t> VllmRandomPromptHashes(uint64_t seed, int64_t index,
                                             int32_t input_tokens, int32_t block_tokens);

}  // namespace servesim

#endif  // SERVESIM_TRACES_SYNTHETIC_H_
