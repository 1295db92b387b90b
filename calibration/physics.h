// Physical plausibility of a measured benchmark cell: a lower bound on the
// mean TTFT a closed loop of fresh (never cached) prompts can have on the
// device, from the prefill FLOPs of the model's operator graph at the
// device's peak FLOP/s. A measured mean below it cannot be a fresh-prompt
// measurement (the likeliest cause is prefix-cache hits from a reused prompt
// seed); `servesim validate` excludes such cells from every fit and grade
// and says why. Pure functions; thread-safe.
#ifndef SERVESIM_CALIBRATION_PHYSICS_H_
#define SERVESIM_CALIBRATION_PHYSICS_H_

#include <cstdint>
#include <string>

#include "hwmodels/deployment.h"

namespace servesim {

// Seconds one fresh prompt of `input_tokens` needs at 100% of the device's
// largest peak FLOP/s (every operator of the step graph, attention
// included, one prefill chunk). REQUIRES: d.graph set, input_tokens >= 1.
double FreshPrefillFloorS(const Deployment& d, int32_t input_tokens);

// Lower bound on the mean TTFT (ms) of a closed loop: `num_prompts`
// requests of `input_tokens`, the first min(c, n) sent at once. The device
// is one server of rate 1 / T (T = FreshPrefillFloorS); the least mean
// completion time of k identical jobs sent together is T (k + 1) / 2
// (served one after another; batching cannot beat the peak), and each
// later request needs at least T: bound = T (k (k + 1) / 2 + (n - k)) / n.
double MeanTtftFloorMs(const Deployment& d, int32_t max_concurrency, int32_t num_prompts,
                       int32_t input_tokens);

// Empty when the measured mean TTFT is at or above the floor; otherwise
// the reason, with the numbers ("mean TTFT 97.7 ms < 297.0 ms floor ...").
std::string ImpossibleTtftReason(const Deployment& d, int32_t max_concurrency,
                                 int32_t num_prompts, int32_t input_tokens,
                                 double measured_mean_ttft_ms);

// The warm-up rule. Empty unless one or two requests carry a closed-loop
// cell's mean TTFT: the mean exceeds the median by more than 25% and the
// excess summed over the cell's `num_prompts` requests, (mean - median) x n,
// is at most what two requests at the p99 carry, 2 (p99 - median). Such a
// cell measured a one-off cost of its first request(s) (a new batch shape
// compiling: XLA on TPU, an uncaptured size on the CUDA build), which the
// simulator does not model; its mean and p99 TTFT then measure that
// one-off, not the serving, while the median does not. The reason gives
// the numbers. Queueing spreads a cell's TTFTs over many requests, so a
// skew from queueing fails the second test (TPU v6e 32 streams: excess
// 1,907 ms over 64 requests against 318 ms for two at the p99).
std::string WarmupOutlierReason(int32_t num_prompts, double mean_ttft_ms,
                                double median_ttft_ms, double p99_ttft_ms);

}  // namespace servesim

#endif  // SERVESIM_CALIBRATION_PHYSICS_H_
