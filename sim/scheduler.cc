#include "sim/scheduler.h"

#include <algorithm>

#include "absl/strings/str_format.h"
#include "sim/base/status_macros.h"

namespace servesim {

std::string_view RejectReasonName(RejectReason r) {
  switch (r) {
    case RejectReason::kNone:
      return "none";
    case RejectReason::kInvalidLengths:
      return "invalid_lengths";
    case RejectReason::kExceedsMaxModelLen:
      return "exceeds_max_model_len";
    case RejectReason::kExceedsKvCache:
      return "exceeds_kv_cache";
    case RejectReason::kExceedsBatchTokens:
      return "exceeds_max_num_batched_tokens";
  }
  return "unknown";
}

absl::StatusOr<std::unique_ptr<Scheduler>> Scheduler::Create(
    const SchedulerConfig& config, const KvCacheSpec& kv_spec) {
  if (config.max_num_seqs < 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("SchedulerConfig.max_num_seqs: %d is out of range [1, 2^31)",
                        config.max_num_seqs));
  }
  if (config.max_num_batched_tokens < 1) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "SchedulerConfig.max_num_batched_tokens: %d is out of range [1, 2^31)",
        config.max_num_batched_tokens));
  }
  if (config.max_model_len < 2) {
    return absl::InvalidArgumentError(
        absl::StrFormat("SchedulerConfig.max_model_len: %d is out of range [2, 2^31)",
                        config.max_model_len));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<KvCache> kv,
                   KvCache::Create(kv_spec, config.enable_prefix_caching));
  return std::unique_ptr<Scheduler>(new Scheduler(config, std::move(kv)));
}

Scheduler::Scheduler(const SchedulerConfig& config, std::unique_ptr<KvCache> kv)
    : config_(config), kv_(std::move(kv)) {
  const size_t n = static_cast<size_t>(std::min(config_.max_num_seqs, 1 << 16));
  running_.reserve(n);
  sched_slots_.reserve(n);
  sched_tokens_.reserve(n);
  prefills_.reserve(n);
  decode_ctx_.reserve(n);
}

RejectReason Scheduler::CheckFits(const RequestSpec& spec) const {
  if (spec.input_tokens < 1 || spec.output_tokens < 1)
    return RejectReason::kInvalidLengths;
  const int64_t total = static_cast<int64_t>(spec.input_tokens) + spec.output_tokens;
  if (total > config_.max_model_len) return RejectReason::kExceedsMaxModelLen;
  // The KV of the last generated token is never written. A sliding group
  // holds its window and the batches in flight (two under async: the
  // window slides on processed tokens), which is also how the admission
  // gate counts it, so whatever is queued can be admitted into an empty
  // pool.
  if (kv_->MaxBlocksHeld(total - 1, InFlightTokens()) > kv_->num_blocks()) {
    return RejectReason::kExceedsKvCache;
  }
  // Without chunking a prefill (after a preemption: prompt + generated)
  // must fit one step's token budget.
  if (!config_.enable_chunked_prefill && total - 1 > config_.max_num_batched_tokens) {
    return RejectReason::kExceedsBatchTokens;
  }
  return RejectReason::kNone;
}

int32_t Scheduler::Add(RequestSpec spec, TimeNs now_ns, int64_t cookie) {
  SERVESIM_CHECK(CheckFits(spec) == RejectReason::kNone);
  int32_t slot;
  if (!free_slots_.empty()) {
    slot = free_slots_.back();
    free_slots_.pop_back();
  } else {
    slot = static_cast<int32_t>(slots_.size());
    slots_.emplace_back();
  }
  SchedRequest& r = slots_[slot];
  r = SchedRequest{};
  r.spec = std::move(spec);
  r.cookie = cookie;
  r.arrival_ns = now_ns;
  // vLLM's engine core schedules step n + 1 right after launching step n
  // (batch queue of two), so an arrival during step n first joins n + 2.
  // A pipeline-parallel replica (batches launched) reads its arrivals
  // before every launch: the engine's batch queue times it, not this rule.
  r.visible_from_step = config_.async_scheduling && step_in_flight_ && in_flight_.empty()
                            ? num_steps_started_ + 1
                            : num_steps_started_;
  r.active = true;
  waiting_.push_back(slot);
  ++num_active_;
  return slot;
}

void Scheduler::WarmPrefixCache(std::span<const RequestSpec> requests) {
  SERVESIM_CHECK(num_active_ == 0);
  if (!kv_->prefix_caching()) return;
  // Slot 0 is free before the first Add; each request leaves it empty.
  constexpr int32_t kSlot = 0;
  for (const RequestSpec& spec : requests) {
    const KvRequestView view = KvViewOf(spec);
    // KV at the last step: the prompt and every output token but the last.
    const int32_t total = spec.input_tokens + std::max(0, spec.output_tokens - 1);
    int32_t done =
        kv_->FindPrefixHit(view, spec.input_tokens, /*may_have_unique_hits=*/false);
    bool first = true;
    while (done < total) {
      const int32_t n = std::min(total - done, config_.max_num_batched_tokens);
      if (!kv_->Allocate(kSlot, view, done, n, /*use_hit=*/first)) break;
      first = false;
      done += n;
    }
    kv_->Free(kSlot, view, first ? 0 : done, /*preempted=*/false);
  }
}

absl::Status Scheduler::StartFromKvCache(const KvCache& state) {
  SERVESIM_CHECK(num_active_ == 0);
  if (!(state.spec() == kv_->spec()) || state.prefix_caching() != kv_->prefix_caching()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("initial KV cache state: %d blocks, prefix caching %s; the "
                        "replica has %d blocks, "
                        "prefix caching %s (spec and setting must match)",
                        state.num_blocks(), state.prefix_caching() ? "on" : "off",
                        kv_->num_blocks(), kv_->prefix_caching() ? "on" : "off"));
  }
  if (state.num_used_blocks() != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "initial KV cache state: %d blocks still held by requests (must be 0)",
        state.num_used_blocks()));
  }
  kv_ = state.Clone();
  return absl::OkStatus();
}

void Scheduler::Preempt(int32_t slot) {
  SchedRequest& r = slots_[slot];
  kv_->Free(slot, View(r), r.num_computed, /*preempted=*/true);
  r.num_computed = 0;
  r.in_flight = false;  // its in-flight work, if any, is discarded
  ++r.num_preemptions;
  ++total_preemptions_;
  ++step_preemptions_;
  waiting_.push_front(slot);
}

void Scheduler::Schedule(int32_t slot, int32_t tokens, TimeNs now_ns) {
  SchedRequest& r = slots_[slot];
  if (r.first_scheduled_ns < 0) r.first_scheduled_ns = now_ns;
  r.last_step = num_steps_started_;
  r.last_step_tokens = tokens;
  sched_slots_.push_back(slot);
  sched_tokens_.push_back(tokens);
  batch_tokens_ += tokens;
  if (r.num_output > 0 && tokens == 1 && r.num_computed + 1 == r.num_tokens()) {
    decode_ctx_.push_back(r.num_computed);
  } else {
    prefills_.push_back(PrefillChunk{tokens, r.num_computed});
  }
}

bool Scheduler::Schedule(TimeNs now_ns) {
  step_preemptions_ = 0;
  BuildStep(now_ns, /*respect_visibility=*/true,
            /*outputs_pending=*/config_.async_scheduling);
  // Nothing to run while finished requests still hold blocks (async): vLLM
  // takes the last step's outputs in, which frees them, and schedules
  // again (every arrival visible by then, no step in flight).
  if (sched_slots_.empty() && !finishing_.empty()) {
    ReleaseFinishing();
    BuildStep(now_ns, /*respect_visibility=*/false, /*outputs_pending=*/false);
  }
  ReleaseFinishing();
  if (sched_slots_.empty()) return false;
  ++num_steps_started_;
  step_in_flight_ = true;
  return true;
}

void Scheduler::BuildStep(TimeNs now_ns, bool respect_visibility, bool outputs_pending) {
  sched_slots_.clear();
  sched_tokens_.clear();
  prefills_.clear();
  decode_ctx_.clear();
  batch_tokens_ = 0;
  launched_ = false;
  const int64_t preemptions_before = step_preemptions_;
  int32_t budget = config_.max_num_batched_tokens;

  // 1. Running requests, in admission order.
  size_t i = 0;
  while (i < running_.size() && budget > 0) {
    const int32_t slot = running_[i];
    SchedRequest& r = slots_[slot];
    // Pipeline parallelism: in a launched batch. Async: finished in the
    // last step, its outputs not yet processed (vLLM skips it).
    if (r.in_flight || r.finishing) {
      ++i;
      continue;
    }
    const int32_t tokens = std::min(r.num_tokens() - r.num_computed, budget);
    SERVESIM_CHECK(tokens > 0);
    // Async: its tokens of the step in flight (the last one built) are
    // computed but not processed; the sliding window waits for them.
    const int32_t in_flight =
        outputs_pending && r.last_step == num_steps_started_ - 1 ? r.last_step_tokens : 0;
    bool scheduled = false;
    while (true) {
      if (kv_->Allocate(slot, View(r), r.num_computed, tokens, /*use_hit=*/false,
                        in_flight)) {
        scheduled = true;
        break;
      }
      const int32_t victim = running_.back();
      running_.pop_back();
      if (slots_[victim].finishing) {
        // A finished request (still in vLLM's running list) is the most
        // recently admitted: its blocks go, and it has nothing to redo.
        std::erase(finishing_, victim);
        Release(victim);
        continue;
      }
      Preempt(victim);
      if (victim == slot) break;
    }
    if (!scheduled) break;
    Schedule(slot, tokens, now_ns);
    budget -= tokens;
    ++i;
  }

  // 2. Waiting requests, only if nothing was preempted in this pass. When
  // the async batch built at the last launch would have been empty, vLLM
  // schedules again once that step ends: every arrival is then visible.
  if (step_preemptions_ == preemptions_before) {
    ScheduleWaiting(budget, now_ns, respect_visibility);
    if (sched_slots_.empty() && respect_visibility)
      ScheduleWaiting(budget, now_ns, /*respect_visibility=*/false);
  }
}

void Scheduler::ScheduleWaiting(int32_t& budget, TimeNs now_ns, bool respect_visibility) {
  while (!waiting_.empty() && budget > 0) {
    if (static_cast<int32_t>(running_.size()) >= config_.max_num_seqs) break;
    const int32_t slot = waiting_.front();
    SchedRequest& r = slots_[slot];
    // Arrivals queue in order, so every later one is invisible too.
    if (respect_visibility && r.visible_from_step > num_steps_started_) break;
    SERVESIM_CHECK(r.num_computed == 0);
    const int32_t hit =
        kv_->FindPrefixHit(View(r), r.num_tokens(), r.num_preemptions > 0);
    int32_t tokens = r.num_tokens() - hit;
    if (!config_.enable_chunked_prefill && tokens > budget) break;
    tokens = std::min(tokens, budget);
    // vLLM caps a sliding group at its window plus max_in_flight_tokens.
    if (config_.reserve_full_isl &&
        !kv_->FullSequenceFits(hit,
                               std::min<int64_t>(r.num_tokens(), config_.max_model_len),
                               InFlightTokens())) {
      break;
    }
    if (!kv_->Allocate(slot, View(r), hit, tokens, /*use_hit=*/true)) break;
    waiting_.pop_front();
    r.num_computed = hit;
    if (r.admit_seq < 0) r.prefix_hit_tokens = hit;
    r.admit_seq = next_admit_seq_++;
    running_.push_back(slot);
    Schedule(slot, tokens, now_ns);
    budget -= tokens;
  }
}

void Scheduler::Complete(TimeNs now_ns, StepListener& listener) {
  SERVESIM_CHECK(in_flight_.empty());
  step_in_flight_ = false;
  Apply(sched_slots_, sched_tokens_, nullptr, now_ns, listener,
        /*defer=*/config_.async_scheduling);
}

void Scheduler::Launch() {
  SERVESIM_CHECK(!sched_slots_.empty() && !launched_);
  launched_ = true;
  InFlightBatch b;
  if (!spare_batches_.empty()) {
    b = std::move(spare_batches_.back());
    spare_batches_.pop_back();
  }
  b.slots.assign(sched_slots_.begin(), sched_slots_.end());
  b.tokens.assign(sched_tokens_.begin(), sched_tokens_.end());
  b.epochs.clear();
  for (const int32_t slot : sched_slots_) {
    SchedRequest& r = slots_[slot];
    SERVESIM_CHECK(!r.in_flight);
    r.in_flight = true;
    b.epochs.push_back(r.num_preemptions);
  }
  in_flight_.push_back(std::move(b));
}

void Scheduler::CompleteOldest(TimeNs now_ns, StepListener& listener) {
  SERVESIM_CHECK(!in_flight_.empty());
  InFlightBatch b = std::move(in_flight_.front());
  in_flight_.pop_front();
  step_in_flight_ = false;
  for (size_t k = 0; k < b.slots.size(); ++k) {
    SchedRequest& r = slots_[b.slots[k]];
    if (r.num_preemptions == b.epochs[k]) {
      SERVESIM_CHECK(r.active && r.in_flight);
      r.in_flight = false;
    }
  }
  // (Pipeline parallelism runs without async scheduling: sim/engine.h.)
  Apply(b.slots, b.tokens, &b.epochs, now_ns, listener, /*defer=*/false);
  spare_batches_.push_back(std::move(b));
}

void Scheduler::Apply(const std::vector<int32_t>& slots,
                      const std::vector<int32_t>& tokens,
                      const std::vector<int32_t>* epochs, TimeNs now_ns,
                      StepListener& listener, bool defer) {
  bool any_finished = false;
  for (size_t k = 0; k < slots.size(); ++k) {
    const int32_t slot = slots[k];
    SchedRequest& r = slots_[slot];
    // Preempted while in flight: recomputed from 0, this work discarded.
    if (epochs != nullptr && r.num_preemptions != (*epochs)[k]) continue;
    r.num_computed += tokens[k];
    SERVESIM_CHECK(r.num_computed <= r.num_tokens());
    if (r.num_computed < r.num_tokens()) continue;  // partial prefill chunk
    ++r.num_output;
    if (r.first_token_ns < 0) r.first_token_ns = now_ns;
    listener.OnToken(r, now_ns);
    r.last_token_ns = now_ns;
    if (r.num_output >= r.spec.output_tokens) {
      listener.OnFinish(r, now_ns);
      r.active = false;
      if (defer) {
        r.finishing = true;  // stays in running_, skipped (top of file)
        finishing_.push_back(slot);
      } else {
        Release(slot);
        any_finished = true;
      }
    }
  }
  if (any_finished) {
    std::erase_if(running_, [this](int32_t s) { return !slots_[s].active; });
  }
  // Nothing left to schedule: vLLM processes the outputs without a step
  // in between.
  if (running_.size() == finishing_.size() && waiting_.empty()) ReleaseFinishing();
}

void Scheduler::Release(int32_t slot) {
  SchedRequest& r = slots_[slot];
  r.finishing = false;
  kv_->Free(slot, View(r), r.num_computed, /*preempted=*/false);
  r.spec.prefix_hashes.clear();
  free_slots_.push_back(slot);
  --num_active_;
}

void Scheduler::ReleaseFinishing() {
  if (finishing_.empty()) return;
  std::erase_if(running_, [this](int32_t s) { return slots_[s].finishing; });
  for (const int32_t slot : finishing_) Release(slot);
  finishing_.clear();
}

}  // namespace servesim
