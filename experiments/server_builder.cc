#include "experiments/server_builder.h"

#include <algorithm>
#include <array>
#include <string_view>

#include "absl/strings/str_format.h"
#include "sim/analytic_step_model.h"

namespace servesim::cli {
namespace {

constexpr std::array<std::string_view, 5> kDevices = {"t4", "l4", "mi300x", "tpu-v5e",
                                                      "tpu-v6e"};
constexpr std::array<std::string_view, 5> kModels = {"gemma-4-e2b", "gemma-4-e4b", "gemma-4-12b",
                                                     "gemma-4-26b-a4b", "gemma-4-31b"};

template <size_t N>
bool Contains(const std::array<std::string_view, N>& a, const std::string& v) {
  return std::find(a.begin(), a.end(), v) != a.end();
}

}  // namespace

absl::StatusOr<ServerBuild> BuildServer(const ServerSpec& spec) {
  if (!Contains(kDevices, spec.device)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--device: \"%s\" is not one of t4, l4, mi300x, tpu-v5e, tpu-v6e", spec.device));
  }
  if (!Contains(kModels, spec.model)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--model: \"%s\" is not one of gemma-4-e2b, gemma-4-e4b, gemma-4-12b, "
        "gemma-4-26b-a4b, gemma-4-31b",
        spec.model));
  }
  ServerBuild b;
  const bool big = spec.device == "mi300x";  // >= 70 GiB: vLLM's larger defaults
  b.scheduler.max_num_seqs = spec.max_num_seqs > 0 ? spec.max_num_seqs : (big ? 1024 : 256);
  b.scheduler.max_num_batched_tokens =
      spec.max_num_batched_tokens > 0 ? spec.max_num_batched_tokens : (big ? 8192 : 2048);
  b.scheduler.max_model_len = spec.max_model_len > 0 ? spec.max_model_len : 32768;
  b.scheduler.enable_chunked_prefill = true;
  b.scheduler.enable_prefix_caching = spec.enable_prefix_caching;
  b.scheduler.async_scheduling = spec.async_scheduling;
  b.kv_cache.num_blocks = 400'000;
  b.kv_cache.groups.push_back(KvGroupSpec{spec.block_size, 0, 3});
  for (int i = 0; i < 4; ++i) {
    b.kv_cache.groups.push_back(KvGroupSpec{2 * spec.block_size, 512, 3});
  }
  AnalyticStepParams p;
  p.host_base_ns = 2'000'000;
  p.host_per_seq_ns = 10'000;
  p.device_base_ns = 8'000'000;
  p.device_per_token_ns = 30'000;
  p.device_per_context_token_ns = 5;
  auto model = std::make_shared<AnalyticStepModel>(p);
  b.provenance = absl::StrFormat(
      "TEMPORARY server builder (not a prediction): device=%s model=%s; fixed KV spec of %d "
      "blocks; %s",
      spec.device, spec.model, b.kv_cache.num_blocks, model->Describe());
  b.step_model = std::move(model);
  return b;
}

}  // namespace servesim::cli
