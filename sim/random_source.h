// vLLM's `random` benchmark dataset as a RequestSource
// (`vllm bench serve --dataset-name random`): input and output lengths
// drawn uniformly from the integers [floor(L(1-r)), ceil(L(1+r))]
// (outputs at least 1), every prompt unique (no prefix hits), arrival_ns 0
// (the client decides when to send). Lengths come from our own sampler on
// StreamSeed(seed, kDatasetLengths), so they are deterministic but not the
// same numbers numpy would draw.
#ifndef SERVESIM_SIM_RANDOM_SOURCE_H_
#define SERVESIM_SIM_RANDOM_SOURCE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "sim/base/random.h"
#include "sim/request_source.h"

namespace servesim {

// The initialisers are `vllm bench serve`'s defaults and the one home of
// an experiment config's (ApplyDefaults, experiments/runner/config.h).
struct RandomDatasetConfig {
  int64_t num_prompts = 1000;
  int32_t input_len = 1024;
  int32_t output_len = 128;
  double range_ratio = 0;
  uint64_t seed = 0;
};

// vLLM's random-dataset length range for a length `len` and range ratio
// `r`: [max(1, floor(len (1 - r))), max(lo, ceil(len (1 + r)))], inclusive.
// The one home of the rule: RandomSource and traces/synthetic's uniform
// lengths both draw from it.
struct LengthBounds {
  int64_t lo = 1, hi = 1;
};
LengthBounds VllmRandomLengthBounds(int64_t len, double range_ratio);

class RandomSource : public RequestSource {
 public:
  // Errors name the flag and its allowed range.
  static absl::StatusOr<std::unique_ptr<RandomSource>> Create(
      const RandomDatasetConfig& config);
  absl::StatusOr<bool> Next(RequestSpec& out) override;
  std::string Describe() const override;

 private:
  explicit RandomSource(const RandomDatasetConfig& config);
  RandomDatasetConfig config_;
  Rng rng_;
  int64_t next_id_ = 0;
  int64_t in_lo_, in_hi_, out_lo_, out_hi_;
};

}  // namespace servesim

#endif  // SERVESIM_SIM_RANDOM_SOURCE_H_
