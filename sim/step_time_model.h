// How long one engine step takes: the interface between the scheduler and
// the hardware models (hwmodels/ implements it; sim/ has an analytic
// stand-in for tests).
#ifndef SERVESIM_SIM_STEP_TIME_MODEL_H_
#define SERVESIM_SIM_STEP_TIME_MODEL_H_

#include <cstdint>
#include <span>
#include <string>

#include "sim/request.h"

namespace servesim {

// One prefill chunk scheduled in a step.
struct PrefillChunk {
  // Prompt tokens computed in this step (the chunk).
  int32_t num_tokens = 0;
  // Tokens of this request already in the KV cache before this step
  // (prefix-cache hit plus earlier chunks): the chunk attends to them.
  int32_t num_computed_before = 0;
};

// The exact composition of one step's batch. Spans are valid only during
// the call.
struct StepBatch {
  std::span<const PrefillChunk> prefills;
  // For each decoding request: tokens already in its KV cache before this
  // step (prompt + generated so far); its one new token attends to them.
  std::span<const int32_t> decode_context_lens;
};

// A step's cost split by where it is spent. With synchronous scheduling a
// step takes host_ns + device_ns; with async scheduling (two batches in
// flight) the host work of the next step overlaps this step's device work,
// so a step takes max(host_ns, device_ns).
struct StepCost {
  TimeNs host_ns = 0;
  TimeNs device_ns = 0;
};

// Thread-safe for concurrent const calls; immutable after creation.
class StepTimeModel {
 public:
  virtual ~StepTimeModel() = default;

  // REQUIRES: the batch is non-empty. Must be cheap (called once per
  // simulated step): no allocation, O(batch size).
  virtual StepCost Cost(const StepBatch& batch) const = 0;

  // Which formula and parameters this model uses, for provenance.
  virtual std::string Describe() const = 0;

  // Pipeline parallelism: the number of stages a batch passes through, or
  // 1 for a model that is not pipelined (the engine then runs one batch at
  // a time and uses Cost alone). With P > 1 the engine keeps up to P
  // batches in flight (sim/engine.h) and asks PipelineStageCosts for each.
  virtual int32_t num_pipeline_stages() const { return 1; }
  // REQUIRES: num_pipeline_stages() > 1, stage_device_ns.size() equal to
  // it, a non-empty batch. Writes each stage's device time of `batch` and
  // returns the host time (the scheduler's, once per batch) and the time of
  // one transfer between consecutive stages. Same cost rules as Cost.
  struct PipelineCost {
    TimeNs host_ns = 0;
    TimeNs transfer_ns = 0;
  };
  virtual PipelineCost PipelineStageCosts(const StepBatch& /*batch*/,
                                          std::span<TimeNs> /*stage_device_ns*/) const {
    return {};
  }
};

}  // namespace servesim

#endif  // SERVESIM_SIM_STEP_TIME_MODEL_H_
