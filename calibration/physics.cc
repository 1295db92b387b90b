#include "calibration/physics.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_format.h"
#include "hwmodels/step_model.h"

namespace servesim {

double FreshPrefillFloorS(const Deployment& d, int32_t input_tokens) {
  const CompiledStepGraph& g = *d.graph;
  const PrefillChunk chunk{input_tokens, 0};
  StepBatch batch;
  batch.prefills = std::span<const PrefillChunk>(&chunk, 1);
  const BatchAggregates a =
      ComputeAggregates(batch, g.window(), g.num_experts(), g.top_k());
  const double peak = std::max(g.peak_flops_16(), g.peak_flops_quant());
  return g.TotalFlops(a) / peak;
}

double MeanTtftFloorMs(const Deployment& d, int32_t max_concurrency, int32_t num_prompts,
                       int32_t input_tokens) {
  const double t = FreshPrefillFloorS(d, input_tokens);
  const double n = std::max(1, num_prompts);
  const double k = max_concurrency > 0 ? std::min<double>(max_concurrency, n) : n;
  return 1e3 * t * (k * (k + 1) / 2 + (n - k)) / n;
}

std::string ImpossibleTtftReason(const Deployment& d, int32_t max_concurrency,
                                 int32_t num_prompts, int32_t input_tokens,
                                 double measured_mean_ttft_ms) {
  const double floor_ms = MeanTtftFloorMs(d, max_concurrency, num_prompts, input_tokens);
  if (!(measured_mean_ttft_ms < floor_ms)) return "";
  const CompiledStepGraph& g = *d.graph;
  return absl::StrFormat(
      "physically impossible for fresh prompts: mean TTFT %.1f ms < %.1f ms, the least "
      "%d x %d-token prompts (%d sent at once) can average at 100%% of %s's %.0f TFLOP/s "
      "(%.1f ms of prefill each); likely prefix-cache hits from a reused prompt seed; "
      "excluded from fits and grades",
      measured_mean_ttft_ms, floor_ms, num_prompts, input_tokens,
      std::min(std::max(1, max_concurrency), num_prompts), d.device.name(),
      std::max(g.peak_flops_16(), g.peak_flops_quant()) / 1e12,
      1e3 * FreshPrefillFloorS(d, input_tokens));
}

std::string WarmupOutlierReason(int32_t num_prompts, double mean_ttft_ms,
                                double median_ttft_ms, double p99_ttft_ms) {
  if (num_prompts <= 0 || !(median_ttft_ms > 0) ||
      !(mean_ttft_ms > 1.25 * median_ttft_ms) || !(p99_ttft_ms > median_ttft_ms)) {
    return "";
  }
  const double excess = (mean_ttft_ms - median_ttft_ms) * num_prompts;
  const double two_tail = 2 * (p99_ttft_ms - median_ttft_ms);
  if (excess > two_tail) return "";
  return absl::StrFormat(
      "warm-up rule: mean TTFT %.1f ms is %.2fx the median %.1f ms and the excess over "
      "%d requests (%.0f ms) is at most two requests at the p99 %.1f ms (%.0f ms): one "
      "or two requests paid a one-off start cost the simulator does not model; mean and "
      "p99 TTFT of this cell are in no fit and no grade",
      mean_ttft_ms, mean_ttft_ms / median_ttft_ms, median_ttft_ms, num_prompts, excess,
      p99_ttft_ms, two_tail);
}

}  // namespace servesim
