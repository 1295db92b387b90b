// What would fit when a deployment does not: the largest max_model_len the
// memory planner (hwmodels/deployment.h BuildDeployment) accepts with every
// other setting kept, the weight formats that fit at the given length, and
// the fewest chips (tensor parallel size) that fit.
// Both ask the planner itself, so hybrid sliding-window layouts (whose KV
// need is not linear in the length) get the exact answer. Thread-safe.
#ifndef SERVESIM_EXPERIMENTS_CAPACITY_MEMORY_FIT_H_
#define SERVESIM_EXPERIMENTS_CAPACITY_MEMORY_FIT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "hwmodels/server_spec.h"

namespace servesim {

// The largest max_model_len in [1, `upper`] with which `spec` fits, or 0
// when none does (the weights alone do not load, or the activation peak
// leaves no KV cache memory). Binary search over the planner, O(log upper)
// deployments; fitting is monotone in the length (blocks per request never
// shrink as it grows). Errors: those of BuildDeployment (bad names).
absl::StatusOr<int32_t> LargestFittingMaxModelLen(const ServerSpec& spec, int32_t upper);

// The quantizations (AllowedQuantizationNames order) with which `spec`
// fits, its own excluded.
std::vector<std::string> QuantizationsThatFit(const ServerSpec& spec);

// The smallest --tensor-parallel-size above `spec`'s with which `spec` fits,
// every other setting kept, or 0 when none does: each size up to
// kMaxParallelSize is planned in turn, those the model and device refuse
// (hwmodels/parallelism.h CheckParallelism: head and FFN widths divisible,
// at most the chips of one node) skipped. At most kMaxParallelSize
// deployments.
int32_t SmallestFittingTensorParallelSize(const ServerSpec& spec);

}  // namespace servesim

#endif  // SERVESIM_EXPERIMENTS_CAPACITY_MEMORY_FIT_H_
