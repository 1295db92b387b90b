// Model-based check of Scheduler over KvCache: a reference scheduler that
// follows the step rules in sim/scheduler.h literally (requests in a plain
// list, running and waiting queues of request ids), over ReferenceKvCache
// (sim/kv_cache_model.h), driven with the real Scheduler by the same
// random arrivals and steps and compared after every step: the scheduled
// requests and their token counts, the step's batch, preemptions, emitted
// tokens, finished requests, queue lengths and KV counts.
//
// Test support only: not linked into the simulator. Thread-compatible.
#ifndef SERVESIM_SIM_SCHEDULER_MODEL_H_
#define SERVESIM_SIM_SCHEDULER_MODEL_H_

#include <cstdint>

#include "absl/status/status.h"
#include "sim/kv_cache_model.h"

namespace servesim {

struct SchedulerModelStats {
  int64_t steps = 0, added = 0, rejected = 0, preemptions = 0, finished = 0;
  int64_t prefix_hit_tokens = 0;
  // First admissions of a follow-up prompt whose hit reaches into an
  // earlier request's hashed answer.
  int64_t answer_hits = 0;
  // Admissions stopped by the whole-sequence gate (reserve_full_isl).
  int64_t full_isl_gate_stops = 0;
  // Steps scheduled while finished requests still held their blocks
  // (async scheduling).
  int64_t steps_with_finishing = 0;
  // Running requests scheduled while their last step's tokens were in
  // flight (async scheduling: the sliding window waits for them).
  int64_t in_flight_steps = 0;
};

// Decodes a scheduler config, a KV spec and up to `max_ops` operations
// (add a request, run a step) from `src`; returns the first difference
// between the two schedulers as an error naming the step and both values.
absl::Status RunSchedulerModel(ChoiceSource& src, int64_t max_ops,
                               SchedulerModelStats* stats = nullptr);

}  // namespace servesim

#endif  // SERVESIM_SIM_SCHEDULER_MODEL_H_
