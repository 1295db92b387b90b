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

}  // namespace servesim

#endif  // SERVESIM_CALIBRATION_PHYSICS_H_
