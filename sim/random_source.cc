#include "sim/random_source.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_format.h"

namespace servesim {

absl::StatusOr<std::unique_ptr<RandomSource>> RandomSource::Create(
    const RandomDatasetConfig& config) {
  if (config.num_prompts < 1) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--num-prompts: %d is out of range [1, 2^63)", config.num_prompts));
  }
  if (config.input_len < 1) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--random-input-len: %d is out of range [1, 2^31)", config.input_len));
  }
  if (config.output_len < 1) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--random-output-len: %d is out of range [1, 2^31)", config.output_len));
  }
  if (!(config.range_ratio >= 0 && config.range_ratio < 1)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--random-range-ratio: %g is out of range [0, 1)", config.range_ratio));
  }
  return std::unique_ptr<RandomSource>(new RandomSource(config));
}

LengthBounds VllmRandomLengthBounds(int64_t len, double range_ratio) {
  LengthBounds b;
  const double l = static_cast<double>(len);
  b.lo = std::max<int64_t>(1, static_cast<int64_t>(std::floor(l * (1 - range_ratio))));
  b.hi = std::max<int64_t>(b.lo, static_cast<int64_t>(std::ceil(l * (1 + range_ratio))));
  return b;
}

RandomSource::RandomSource(const RandomDatasetConfig& config)
    : config_(config), rng_(StreamSeed(config.seed, RngStream::kDatasetLengths)) {
  const LengthBounds in = VllmRandomLengthBounds(config.input_len, config.range_ratio);
  const LengthBounds out = VllmRandomLengthBounds(config.output_len, config.range_ratio);
  in_lo_ = in.lo;
  in_hi_ = in.hi;
  out_lo_ = out.lo;
  out_hi_ = out.hi;
}

absl::StatusOr<bool> RandomSource::Next(RequestSpec& out) {
  if (next_id_ >= config_.num_prompts) return false;
  out.id = next_id_++;
  out.arrival_ns = 0;
  out.input_tokens = static_cast<int32_t>(rng_.UniformInt(in_lo_, in_hi_));
  out.output_tokens = static_cast<int32_t>(rng_.UniformInt(out_lo_, out_hi_));
  out.prefix_hashes.clear();
  out.hash_block_tokens = 0;
  out.session_id = -1;
  out.hashed_output_tokens = 0;
  return true;
}

std::string RandomSource::Describe() const {
  return absl::StrFormat(
      "random dataset: num_prompts=%d input_len=%d output_len=%d range_ratio=%g seed=%d "
      "(inputs in [%d, %d], outputs in [%d, %d], unique prompts)",
      config_.num_prompts, config_.input_len, config_.output_len, config_.range_ratio,
      config_.seed, in_lo_, in_hi_, out_lo_, out_hi_);
}

}  // namespace servesim
