// vLLM V1 scheduler of one replica (FCFS policy), one step at a time.
//
// Schedule() builds one step exactly as vllm/v1/core/sched/scheduler.py:
//  1. token budget = max_num_batched_tokens;
//  2. running requests first, in admission order, each asking for
//     min(tokens not yet computed, budget) (a decode asks for 1; a partial
//     prefill asks for the rest of its prompt, chunked); when its KV blocks
//     do not fit, the most recently admitted running request is preempted
//     (all blocks freed, computed tokens reset to 0, put at the front of the
//     waiting queue: recompute) and the allocation retried; if the victim
//     is the request itself, the running pass stops;
//  3. only if nothing was preempted in this step, waiting requests strictly
//     in order: stop at max_num_seqs running or at the first request whose
//     blocks do not fit (head-of-line blocking); a request with no computed
//     tokens first takes its prefix-cache hit; with reserve_full_isl (vLLM's
//     scheduler_reserve_full_isl, on by default) its whole current sequence,
//     not just the first chunk, must fit the free blocks
//     (KvCache::FullSequenceFits), or admission stops there.
// Complete() ends the step: a request whose computed tokens reach its
// sequence length (prompt + generated) emits one token (the first one at the
// end of the step completing its prefill; a partial chunk emits nothing);
// finished requests free their blocks. With async scheduling vLLM builds
// step n + 1 before it processes step n's outputs, so a request that
// finished in step n still holds its blocks and its max_num_seqs place
// while step n + 1 is scheduled: it stays in the running list, is not
// scheduled, and is the preemption victim when it is the most recently
// admitted one (its blocks go; nothing to recompute). Finished requests
// are freed at the end of the next Schedule(), or at once when nothing is
// left to schedule; when that Schedule() would build an empty batch they
// are freed and the whole step is scheduled again, as vLLM does once the
// step's outputs are in. For the same reason a request's tokens of step n
// are in flight while n + 1 is built, and its sliding-window blocks are
// released on the tokens before them (KvCache::Allocate, num_in_flight).
// Pipeline parallelism (vLLM's batch queue, sim/engine.h): Launch() puts
// the batch Schedule() built in flight instead of completing it; later
// Schedule() calls skip a request of an in-flight batch (vLLM V1's
// scheduler skips a request already scheduled in an in-flight batch, so a
// request is in at most one), and CompleteOldest() applies the oldest
// in-flight batch exactly as Complete() would, in launch order. A request
// preempted while in flight (its blocks freed, recomputed from 0) has that
// batch's work for it discarded when the batch returns. vLLM advances
// computed tokens at schedule time; here they advance when the batch
// returns, which is the same because an in-flight request is never
// scheduled again before then. Not modelled: a newer vLLM scheduling the
// next prefill chunk of a request whose previous chunk is still in flight.
// Requests that can never run are never queued: CheckFits names the reason
// (prompt + output > max_model_len, more blocks than the whole pool, or,
// chunked prefill off, a prefill longer than the token budget) and the
// engine records them as rejected; Add aborts on such a request.
//
// Thread-compatible. Requests live in flat slots reused after they finish;
// no heap allocation per step in steady state.
#ifndef SERVESIM_SIM_SCHEDULER_H_
#define SERVESIM_SIM_SCHEDULER_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "sim/kv_cache.h"
#include "sim/request.h"
#include "sim/server_config.h"
#include "sim/step_time_model.h"

namespace servesim {

enum class RejectReason : int8_t {
  kNone = 0,
  kInvalidLengths,      // input_tokens < 1 or output_tokens < 1
  kExceedsMaxModelLen,  // input + output > max_model_len
  kExceedsKvCache,      // needs more KV blocks than the whole pool
  kExceedsBatchTokens,  // chunked prefill off and prefill > max_num_batched_tokens
};
constexpr int kNumRejectReasons = 5;
// Stable lower-case name, e.g. "exceeds_max_model_len".
std::string_view RejectReasonName(RejectReason r);

// One in-flight request inside a scheduler. The fields every step reads
// (and spec's lengths right after them) share the first cache line.
struct alignas(64) SchedRequest {
  int64_t cookie = 0;  // caller's handle (e.g. the client's record)
  TimeNs last_token_ns = -1;
  TimeNs first_token_ns = -1;
  int32_t num_computed = 0;  // tokens whose KV is cached
  int32_t num_output = 0;    // tokens generated so far
  bool active = false;
  bool in_flight = false;  // in a launched batch (pipeline parallelism)
  // Finished, its outputs not yet processed (async scheduling): kept in
  // the running list, not scheduled, a preemption victim like any other.
  bool finishing = false;
  RequestSpec spec;
  TimeNs arrival_ns = 0;  // reached this replica
  TimeNs first_scheduled_ns = -1;
  int32_t prefix_hit_tokens = 0;  // hit at first admission
  int32_t num_preemptions = 0;
  int64_t admit_seq = -1;
  // The first step (count of steps started) whose batch may admit it:
  // under async scheduling a request that arrives while a step runs
  // missed the next batch, built when that step was launched.
  int64_t visible_from_step = 0;
  // The step (count of steps started before it) that last scheduled it,
  // and its tokens there: under async scheduling, still in flight when
  // the next step is built (vLLM's num_in_flight_tokens).
  int64_t last_step = -1;
  int32_t last_step_tokens = 0;
  int32_t num_tokens() const { return spec.input_tokens + num_output; }
};

// Called by Complete() for each emitted token and each finished request.
class StepListener {
 public:
  virtual ~StepListener() = default;
  // After r.num_output was incremented; r.last_token_ns is still the time
  // of the previous token (-1 for the first).
  virtual void OnToken(const SchedRequest& r, TimeNs now_ns) = 0;
  // The request generated its last token; its slot is released after.
  virtual void OnFinish(const SchedRequest& r, TimeNs now_ns) = 0;
};

class Scheduler {
 public:
  // Errors: bad config values or KV spec (messages name the field).
  static absl::StatusOr<std::unique_ptr<Scheduler>> Create(const SchedulerConfig& config,
                                                           const KvCacheSpec& kv_spec);
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // kNone when the request can run on this replica.
  RejectReason CheckFits(const RequestSpec& spec) const;
  // Queues the request at the back of the waiting queue and returns its
  // slot. Under async scheduling a request added between Schedule() and
  // Complete() (while a step runs) is left out of the next Schedule()
  // unless that batch would otherwise be empty. REQUIRES:
  // CheckFits(spec) == kNone.
  int32_t Add(RequestSpec spec, TimeNs now_ns, int64_t cookie);

  // Before the first Add: passes each request of `requests`, in order,
  // through the KV cache as if it had run alone and finished before time 0
  // (its prompt computed in chunks of max_num_batched_tokens, then its
  // output tokens, then freed), so the prefix cache holds what an earlier
  // benchmark on the same server left in it, in LRU order. A request whose
  // blocks do not fit the pool is skipped. No-op without prefix caching.
  // REQUIRES: no request was added yet.
  void WarmPrefixCache(std::span<const RequestSpec> requests);

  // Before the first Add: replaces this scheduler's KV cache with a copy of
  // `state` (e.g. another scheduler's kv() after WarmPrefixCache, built
  // once and shared by many runs). Errors: `state` has another spec or
  // prefix-caching setting, or holds blocks for a request.
  absl::Status StartFromKvCache(const KvCache& state);

  // Builds the next step's batch; false (and nothing scheduled) when no
  // request can run.
  bool Schedule(TimeNs now_ns);
  // The batch Schedule() built. Valid until the next Schedule().
  StepBatch batch() const { return StepBatch{prefills_, decode_ctx_}; }
  int32_t batch_num_seqs() const { return static_cast<int32_t>(sched_slots_.size()); }
  int32_t batch_num_tokens() const { return batch_tokens_; }
  int32_t batch_num_prefills() const { return static_cast<int32_t>(prefills_.size()); }
  int32_t step_preemptions() const { return step_preemptions_; }
  // Ends the step built by Schedule() at `now_ns`. REQUIRES: no batch in
  // flight.
  void Complete(TimeNs now_ns, StepListener& listener);
  // Pipeline parallelism: puts the batch Schedule() built in flight (its
  // requests are skipped by Schedule() until it returns). REQUIRES: the
  // last Schedule() returned true and its batch was not launched yet.
  void Launch();
  // Applies the oldest in-flight batch at `now_ns` (tokens, finishes), as
  // Complete() does. REQUIRES: num_in_flight_batches() > 0.
  void CompleteOldest(TimeNs now_ns, StepListener& listener);
  int32_t num_in_flight_batches() const {
    return static_cast<int32_t>(in_flight_.size());
  }
  // The slots of each in-flight batch, oldest first, with the preemption
  // count each had at launch (a slot whose count differs was preempted in
  // flight: its entry is discarded on return).
  struct InFlightBatch {
    std::vector<int32_t> slots;
    std::vector<int32_t> tokens;
    std::vector<int32_t> epochs;
  };
  const std::deque<InFlightBatch>& in_flight_batches() const { return in_flight_; }

  bool HasWork() const { return !running_.empty() || !waiting_.empty(); }
  // Finished requests still holding blocks (async scheduling).
  int32_t num_finishing() const { return static_cast<int32_t>(finishing_.size()); }
  int32_t num_running() const { return static_cast<int32_t>(running_.size()); }
  int32_t num_waiting() const { return static_cast<int32_t>(waiting_.size()); }
  int64_t num_outstanding() const { return num_active_; }
  int64_t total_preemptions() const { return total_preemptions_; }
  const SchedRequest& request(int32_t slot) const { return slots_[slot]; }
  const KvCache& kv() const { return *kv_; }
  const SchedulerConfig& config() const { return config_; }
  // The slots scheduled in the current step and their token counts.
  const std::vector<int32_t>& scheduled_slots() const { return sched_slots_; }
  const std::vector<int32_t>& scheduled_tokens() const { return sched_tokens_; }

 private:
  Scheduler(const SchedulerConfig& config, std::unique_ptr<KvCache> kv);
  // Inline: built for every running request each step, and unused on the
  // KV cache's fast path.
  KvRequestView View(const SchedRequest& r) const { return KvViewOf(r.spec); }
  void Preempt(int32_t slot);
  void Schedule(int32_t slot, int32_t tokens, TimeNs now_ns);
  // vLLM's max_in_flight_tokens: the token budget x the batches in flight
  // (two with async scheduling).
  int64_t InFlightTokens() const {
    return int64_t{config_.async_scheduling ? 2 : 1} * config_.max_num_batched_tokens;
  }
  // One scheduling pass into the step scratch (Schedule() may run two).
  // `outputs_pending`: the last step's outputs are not yet processed
  // (async scheduling), so its tokens are in flight.
  void BuildStep(TimeNs now_ns, bool respect_visibility, bool outputs_pending);
  // Admits waiting requests into the step; with `respect_visibility`,
  // stops at the first one the async scheduler could not yet see.
  void ScheduleWaiting(int32_t& budget, TimeNs now_ns, bool respect_visibility);
  // Applies `tokens[k]` computed tokens to each `slots[k]`; `epochs`, when
  // non-null, skips a slot preempted since launch. `defer`: a finished
  // request keeps its blocks and its max_num_seqs place until the next
  // Schedule() (async scheduling, top of file).
  void Apply(const std::vector<int32_t>& slots, const std::vector<int32_t>& tokens,
             const std::vector<int32_t>* epochs, TimeNs now_ns, StepListener& listener,
             bool defer);
  // Frees a finished request's blocks and slot.
  void Release(int32_t slot);
  // Releases every request in finishing_.
  void ReleaseFinishing();

  SchedulerConfig config_;
  std::unique_ptr<KvCache> kv_;
  std::vector<SchedRequest> slots_;
  std::vector<int32_t> free_slots_;
  std::vector<int32_t> running_;  // admission order
  std::deque<int32_t> waiting_;
  // Async scheduling: requests that finished in the last step, whose
  // blocks and max_num_seqs places vLLM frees only after it has scheduled
  // the next step (ReleaseFinishing at the end of Schedule); they stay in
  // running_ (SchedRequest::finishing) until then.
  std::vector<int32_t> finishing_;
  int64_t num_active_ = 0;
  int64_t next_admit_seq_ = 0;
  int64_t total_preemptions_ = 0;

  // The current step (scratch, reused).
  std::vector<int32_t> sched_slots_;
  std::vector<int32_t> sched_tokens_;
  std::vector<PrefillChunk> prefills_;
  std::vector<int32_t> decode_ctx_;
  int32_t batch_tokens_ = 0;
  int32_t step_preemptions_ = 0;
  int64_t num_steps_started_ = 0;
  bool step_in_flight_ = false;
  bool launched_ = false;  // the current batch was launched

  // Pipeline parallelism: launched batches, oldest first, and returned
  // ones kept for reuse (no allocation per step in steady state).
  std::deque<InFlightBatch> in_flight_;
  std::vector<InFlightBatch> spare_batches_;
};

}  // namespace servesim

#endif  // SERVESIM_SIM_SCHEDULER_H_
