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

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "experiments/runner/point_runner.h"
#include "hwmodels/server_spec.h"
#include "proto/experiment.pb.h"

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

// What would fit when `spec` does not, each with every other setting kept.
struct FitHint {
  int32_t largest_max_model_len = 0;       // below the resolved one; 0: no length fits
  std::vector<std::string> quantizations;  // that fit at the resolved length
  int32_t tensor_parallel_size = 0;        // the fewest chips that fit; 0: none
};

// The three answers above for `spec`, whose max_model_len the planner
// resolved to `resolved_max_model_len` (the model's own when unset).
// O(log length + kMaxParallelSize + formats) deployments. Errors: those of
// BuildDeployment.
absl::StatusOr<FitHint> WhatFits(const ServerSpec& spec, int32_t resolved_max_model_len);

// One line for an error message, e.g. "what fits, all else kept: fits on 4
// chips: --tensor-parallel-size 4 (the fewest); --max-model-len 1150 (the
// largest); --quantization w4a16 | fp8"; says so when nothing does.
std::string FitHintText(const FitHint& hint);

// `status` (RunExperiment's ResourceExhausted for `config`: a replica does
// not fit its device) with FitHintText appended for each distinct server of
// `config` that does not fit, so a fleet replica, a plan candidate or a
// sweep point says what would. Any other status is returned unchanged.
absl::Status WithFitHint(const absl::Status& status,
                         const proto::ExperimentConfig& config);

// `runner` whose errors go through WithFitHint (plan's and sweep's points).
PointRunner WithFitHints(PointRunner runner);

}  // namespace servesim

#endif  // SERVESIM_EXPERIMENTS_CAPACITY_MEMORY_FIT_H_
