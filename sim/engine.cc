#include "sim/engine.h"

#include <algorithm>
#include <span>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "sim/base/status_macros.h"

namespace servesim {
namespace {

// Records a step of `s`'s batch: its statistics, the optional deep KV
// check, and the observer's hook.
void RecordStep(int32_t replica, TimeNs now_ns, TimeNs dur, const Scheduler& s,
                const StepCost& cost, const EngineOptions& options, StepStats& steps,
                EngineObserver* observer) {
  const KvCache& kv = s.kv();
  steps.AddStep(
      s.batch_num_seqs(), s.batch_num_tokens(), dur, now_ns,
      static_cast<double>(kv.num_used_blocks()) / static_cast<double>(kv.num_blocks()));
  if (options.check_kv_every_step) SERVESIM_CHECK(kv.CheckInvariant(/*deep=*/true));
  if (observer != nullptr) observer->OnStep(replica, now_ns, dur, s, cost);
}

}  // namespace

class Engine::Listener : public StepListener {
 public:
  explicit Listener(Engine* e) : e_(e) {}
  void OnToken(const SchedRequest& r, TimeNs now_ns) override {
    RequestRecord& rec = e_->records_[r.cookie];
    if (!rec.unmeasured) e_->tokens_.AddToken(now_ns);
    if (r.num_output == 1) {
      rec.first_token_ns = now_ns;
      return;
    }
    const TimeNs gap = now_ns - r.last_token_ns;
    e_->itl_.Add(gap);
    if (e_->options_.keep_request_itls) {
      e_->request_itls_[r.cookie].push_back(gap);
    }
  }
  void OnFinish(const SchedRequest& r, TimeNs now_ns) override {
    RequestRecord& rec = e_->records_[r.cookie];
    rec.finish_ns = now_ns;
    rec.preemptions = r.num_preemptions;
    rec.prefix_hit_tokens = r.prefix_hit_tokens;
    rec.first_scheduled_ns = r.first_scheduled_ns;
    e_->Done(rec);
  }

 private:
  Engine* e_;
};

absl::StatusOr<std::unique_ptr<Engine>> Engine::Create(
    std::vector<ReplicaConfig> replicas, std::unique_ptr<Router> router,
    const ClientConfig& client, const EngineOptions& options) {
  if (replicas.empty()) return absl::InvalidArgumentError("fleet: no replica");
  if (router == nullptr) return absl::InvalidArgumentError("fleet: no router");
  for (size_t i = 0; i < replicas.size(); ++i) {
    if (replicas[i].step_model == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrFormat("replica %d: no step time model", i));
    }
  }
  RETURN_IF_ERROR(ValidateClientConfig(client));
  std::unique_ptr<Engine> e(
      new Engine(std::move(replicas), std::move(router), client, options));
  for (size_t i = 0; i < e->replica_configs_.size(); ++i) {
    const ReplicaConfig& rc = e->replica_configs_[i];
    auto s = Scheduler::Create(rc.scheduler, rc.kv_cache);
    if (!s.ok()) {
      return absl::Status(s.status().code(),
                          absl::StrFormat("replica %d: %s", i, s.status().message()));
    }
    Replica rep;
    rep.scheduler = std::move(s).value();
    rep.model = rc.step_model;
    rep.async = rc.scheduler.async_scheduling;
    rep.stages = rc.step_model->num_pipeline_stages();
    if (rep.stages < 1) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "replica %d: step model has %d pipeline stages (must be >= 1)", i, rep.stages));
    }
    if (rep.stages > 1) {
      if (rc.lockstep_group >= 0) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "replica %d: a pipeline-parallel replica cannot step in a lock-step group",
            i));
      }
      rep.stage_free_ns.assign(static_cast<size_t>(rep.stages), 0);
      rep.stage_ns.assign(static_cast<size_t>(rep.stages), 0);
    }
    if (rc.lockstep_group >= 0) {
      int32_t g = 0;
      while (g < static_cast<int32_t>(e->groups_.size()) &&
             e->replica_configs_[e->groups_[g].front()].lockstep_group !=
                 rc.lockstep_group) {
        ++g;
      }
      if (g == static_cast<int32_t>(e->groups_.size())) e->groups_.emplace_back();
      e->groups_[g].push_back(static_cast<int32_t>(i));
      rep.group = g;
    }
    e->replica_ptrs_.push_back(rep.scheduler.get());
    e->replicas_.push_back(std::move(rep));
  }
  return e;
}

Engine::Engine(std::vector<ReplicaConfig> configs, std::unique_ptr<Router> router,
               const ClientConfig& client, const EngineOptions& options)
    : replica_configs_(std::move(configs)),
      router_(std::move(router)),
      client_config_(client),
      options_(options),
      listener_(std::make_unique<Listener>(this)),
      itl_(options.itl_exact_cap) {}

Engine::~Engine() = default;

absl::Status Engine::PullNext() {
  has_pending_ = false;
  if (source_done_) return absl::OkStatus();
  ASSIGN_OR_RETURN(bool more, client_->Next(pending_, &pending_intended_ns_));
  if (!more) {
    source_done_ = true;
    return absl::OkStatus();
  }
  has_pending_ = true;
  if (pending_intended_ns_ > now_) events_.Push(pending_intended_ns_, kWake);
  return absl::OkStatus();
}

absl::Status Engine::TrySend() {
  const int64_t cap = client_config_.max_concurrency;
  while (true) {
    // The earliest of the next ready turn and the source's next request
    // (the ready turn on ties).
    const bool from_ready =
        !ready_.empty() &&
        (!has_pending_ || ready_.top().ready_ns <= pending_intended_ns_);
    if (!from_ready && !has_pending_) break;
    if ((from_ready ? ready_.top().ready_ns : pending_intended_ns_) > now_) break;
    const int64_t session = from_ready ? -1 : pending_.session_id;
    if (session >= 0) {
      if (auto busy = session_busy_.find(session); busy != session_busy_.end()) {
        // An earlier turn of its session is in flight or held: hold it.
        ++busy->second;
        held_[session].push_back(HeldTurn{std::move(pending_), pending_intended_ns_});
        RETURN_IF_ERROR(PullNext());
        continue;
      }
    }
    if (cap != 0 && in_flight_ >= cap) break;
    // (A ready turn was counted in its session when it was held.)
    if (session >= 0) session_busy_[session] = 1;
    if (from_ready) {
      // priority_queue::top is const; the turn is copied out, then popped.
      HeldTurn turn = ready_.top().turn;
      ready_.pop();
      Send(std::move(turn.spec), turn.intended_ns);
    } else {
      Send(std::move(pending_), pending_intended_ns_);
      RETURN_IF_ERROR(PullNext());
    }
  }
  return absl::OkStatus();
}

void Engine::Send(RequestSpec&& spec, TimeNs intended_ns) {
  const int64_t idx = static_cast<int64_t>(records_.size());
  RequestRecord rec;
  rec.id = spec.id;
  rec.input_tokens = spec.input_tokens;
  rec.output_tokens = spec.output_tokens;
  rec.unmeasured = spec.unmeasured;
  rec.intended_ns = intended_ns;
  rec.send_ns = now_;
  records_.push_back(rec);
  record_session_.push_back(spec.session_id);
  if (options_.keep_request_itls) request_itls_.emplace_back();
  ++in_flight_;
  peak_in_flight_ = std::max(peak_in_flight_, in_flight_);
  int32_t t;
  if (!transit_free_.empty()) {
    t = transit_free_.back();
    transit_free_.pop_back();
  } else {
    t = static_cast<int32_t>(transit_.size());
    transit_.emplace_back();
    transit_record_.push_back(0);
  }
  transit_[t] = std::move(spec);
  transit_record_[t] = idx;
  events_.Push(now_ + client_config_.client_overhead_ns, kArrive, 0, t);
}

void Engine::Arrive(int32_t t) {
  const int64_t idx = transit_record_[t];
  RequestRecord& rec = records_[idx];
  rec.arrival_ns = now_;
  const int32_t r = router_->Route(transit_[t], replica_ptrs_);
  SERVESIM_CHECK(r >= 0 && r < num_replicas());
  rec.replica = r;
  Scheduler& s = *replicas_[r].scheduler;
  const RejectReason reason = s.CheckFits(transit_[t]);
  if (reason != RejectReason::kNone) {
    rec.reject = reason;
    rec.finish_ns = now_;
    transit_free_.push_back(t);
    Done(rec);
    return;
  }
  // Sends and arrivals keep their order (one overhead for all) and an
  // admitted request always finishes: the first admitted request is the
  // earliest successful send, vLLM's origin of the per-second buckets.
  if (!tokens_.has_origin()) tokens_.SetOrigin(rec.send_ns);
  s.Add(std::move(transit_[t]), now_, idx);
  transit_free_.push_back(t);
  Replica& rep = replicas_[r];
  if (!rep.busy && !rep.kick_pending) {
    rep.kick_pending = true;
    events_.Push(now_, kKick, r);
  }
}

void Engine::StartStep(int32_t r, bool from_idle) {
  Replica& rep = replicas_[r];
  if (rep.stages > 1) {
    PipeStep(r);
    return;
  }
  if (rep.group >= 0) {
    StartGroupStep(rep.group, from_idle);
    return;
  }
  Scheduler& s = *rep.scheduler;
  if (!s.Schedule(now_)) {
    rep.busy = false;
    // Every queued request fits an empty replica, so an idle replica never
    // holds work it cannot start.
    SERVESIM_CHECK(!s.HasWork());
    return;
  }
  const StepCost cost = rep.model->Cost(s.batch());
  SERVESIM_CHECK(cost.host_ns >= 0 && cost.device_ns >= 0);
  // Async scheduling prepares step n + 1 on the host while step n runs, so
  // a busy replica steps every max(host, device). A step started from idle
  // has nothing to hide its own host work behind: host + device.
  const TimeNs dur = rep.async && !from_idle ? std::max(cost.host_ns, cost.device_ns)
                                             : cost.host_ns + cost.device_ns;
  rep.busy = true;
  RecordStep(r, now_, dur, s, cost, options_, steps_, observer_);
  events_.Push(now_ + dur, kStepEnd, r);
}

void Engine::PipeStep(int32_t r) {
  Replica& rep = replicas_[r];
  Scheduler& s = *rep.scheduler;
  const int32_t in_flight = s.num_in_flight_batches();
  if (in_flight < rep.stages && s.Schedule(now_)) {
    const StepTimeModel::PipelineCost pc = rep.model->PipelineStageCosts(
        s.batch(), std::span<TimeNs>(rep.stage_ns.data(), rep.stage_ns.size()));
    SERVESIM_CHECK(pc.host_ns >= 0 && pc.transfer_ns >= 0);
    TimeNs t = now_ + pc.host_ns;
    TimeNs device = 0;
    for (int32_t st = 0; st < rep.stages; ++st) {
      const TimeNs d = rep.stage_ns[st];
      SERVESIM_CHECK(d >= 0);
      if (st > 0) t += pc.transfer_ns;
      t = std::max(t, rep.stage_free_ns[st]) + d;
      rep.stage_free_ns[st] = t;
      device += d;
    }
    SERVESIM_CHECK(rep.finish_ns.empty() || t >= rep.finish_ns.back());
    rep.finish_ns.push_back(t);
    s.Launch();
    rep.busy = true;
    const TimeNs dur = t - now_;
    RecordStep(r, now_, dur, s,
               StepCost{pc.host_ns, device + (rep.stages - 1) * pc.transfer_ns}, options_,
               steps_, observer_);
    // The engine is free to schedule again once this batch's host work is
    // done (vLLM returns from the step without waiting for the batch).
    events_.Push(now_ + pc.host_ns, kPipeStep, r);
    return;
  }
  if (in_flight == 0) {
    rep.busy = false;
    // As StartStep: an idle replica never holds work it cannot start.
    SERVESIM_CHECK(!s.HasWork());
    return;
  }
  // Nothing to schedule, or the queue is full: block on the oldest batch.
  events_.Push(std::max(now_, rep.finish_ns.front()), kStepEnd, r);
}

void Engine::EndPipeBatch(int32_t r) {
  Replica& rep = replicas_[r];
  SERVESIM_CHECK(!rep.finish_ns.empty() && now_ >= rep.finish_ns.front());
  rep.finish_ns.pop_front();
  rep.scheduler->CompleteOldest(now_, *listener_);
  SERVESIM_CHECK(rep.scheduler->kv().CheckInvariant());
  PipeStep(r);
}

void Engine::StartGroupStep(int32_t g, bool from_idle) {
  const std::vector<int32_t>& members = groups_[g];
  TimeNs dur = 0;
  bool any = false;
  for (const int32_t m : members) {
    Replica& rep = replicas_[m];
    rep.stepped = rep.scheduler->Schedule(now_);
    if (!rep.stepped) {
      // Nothing to run: a dummy batch, shorter than the members' real ones
      // (its cost is not added; the group waits for its longest member).
      SERVESIM_CHECK(!rep.scheduler->HasWork());
      continue;
    }
    rep.cost = rep.model->Cost(rep.scheduler->batch());
    const StepCost& cost = rep.cost;
    SERVESIM_CHECK(cost.host_ns >= 0 && cost.device_ns >= 0);
    dur = std::max(dur, rep.async && !from_idle ? std::max(cost.host_ns, cost.device_ns)
                                                : cost.host_ns + cost.device_ns);
    any = true;
  }
  for (const int32_t m : members) replicas_[m].busy = any;
  if (!any) return;
  for (const int32_t m : members) {
    const Replica& rep = replicas_[m];
    if (!rep.stepped) continue;
    RecordStep(m, now_, dur, *rep.scheduler, rep.cost, options_, steps_, observer_);
  }
  events_.Push(now_ + dur, kStepEnd, members.front());
}

void Engine::EndGroupStep(int32_t g) {
  for (const int32_t m : groups_[g]) {
    Replica& rep = replicas_[m];
    if (!rep.stepped) continue;
    rep.scheduler->Complete(now_, *listener_);
    SERVESIM_CHECK(rep.scheduler->kv().CheckInvariant());
  }
  StartGroupStep(g, /*from_idle=*/false);
}

void Engine::EndStep(int32_t r) {
  if (replicas_[r].stages > 1) {
    EndPipeBatch(r);
    return;
  }
  if (replicas_[r].group >= 0) {
    EndGroupStep(replicas_[r].group);
    return;
  }
  replicas_[r].scheduler->Complete(now_, *listener_);
  SERVESIM_CHECK(replicas_[r].scheduler->kv().CheckInvariant());
  StartStep(r, /*from_idle=*/false);
}

void Engine::Done(RequestRecord& rec) {
  --in_flight_;
  SERVESIM_CHECK(in_flight_ >= 0);
  const int64_t session = record_session_[&rec - records_.data()];
  if (session >= 0) {
    // The session's next held turn (if any) may go once its time comes.
    auto busy = session_busy_.find(session);
    SERVESIM_CHECK(busy != session_busy_.end() && busy->second > 0);
    if (--busy->second == 0) session_busy_.erase(busy);
    auto held = held_.find(session);
    if (held != held_.end()) {
      HeldTurn turn = std::move(held->second.front());
      held->second.pop_front();
      if (held->second.empty()) held_.erase(held);
      const TimeNs ready_ns = std::max(now_, turn.intended_ns);
      ready_.push(ReadyTurn{ready_ns, ready_seq_++, std::move(turn)});
      if (ready_ns > now_) events_.Push(ready_ns, kWake);
    }
  }
  if (observer_ != nullptr) observer_->OnRequestDone(rec);
}

absl::Status Engine::StartFromKvCache(const KvCache& state) {
  SERVESIM_CHECK(!ran_);
  for (Replica& r : replicas_) RETURN_IF_ERROR(r.scheduler->StartFromKvCache(state));
  return absl::OkStatus();
}

absl::Status Engine::Run(RequestSource* source, EngineObserver* observer) {
  SERVESIM_CHECK(!ran_);
  ran_ = true;
  source_ = source;
  observer_ = observer;
  client_ = std::make_unique<Client>(client_config_, source);
  RETURN_IF_ERROR(PullNext());
  RETURN_IF_ERROR(TrySend());
  while (!events_.empty()) {
    const Event e = events_.Pop();
    SERVESIM_CHECK(e.time_ns >= now_);  // time never runs backwards
    now_ = e.time_ns;
    switch (e.kind) {
      case kWake:
        break;
      case kArrive:
        Arrive(static_cast<int32_t>(e.b));
        break;
      case kStepEnd:
        EndStep(e.a);
        break;
      case kPipeStep:
        PipeStep(e.a);
        break;
      case kKick:
        replicas_[e.a].kick_pending = false;
        if (!replicas_[e.a].busy) StartStep(e.a, /*from_idle=*/true);
        break;
      default:
        SERVESIM_CHECK(false);
    }
    RETURN_IF_ERROR(TrySend());
  }
  // Every request finished or was rejected.
  SERVESIM_CHECK(!has_pending_ && source_done_ && in_flight_ == 0);
  SERVESIM_CHECK(ready_.empty() && held_.empty() && session_busy_.empty());
  for (const Replica& rep : replicas_) SERVESIM_CHECK(!rep.scheduler->HasWork());
  // The per-second token buckets start at the earliest successful send.
  for (const RequestRecord& rec : records_) {
    SERVESIM_CHECK(!rec.ok() || rec.send_ns >= tokens_.origin_ns());
  }
  return absl::OkStatus();
}

RunResult Engine::Result() const {
  int64_t preemptions = 0;
  for (const Replica& rep : replicas_) preemptions += rep.scheduler->total_preemptions();
  return ComputeRunResult(records_, itl_, steps_, preemptions, tokens_);
}

std::string Engine::Describe() const {
  std::string s =
      absl::StrFormat("%d replica(s), router %s", replicas_.size(), router_->Name());
  for (size_t i = 0; i < replica_configs_.size(); ++i) {
    const ReplicaConfig& rc = replica_configs_[i];
    absl::StrAppend(
        &s, absl::StrFormat(
                "; replica %d: max_num_seqs=%d max_num_batched_tokens=%d "
                "max_model_len=%d prefix_caching=%d async=%d kv_blocks=%d groups=%d%s%s",
                i, rc.scheduler.max_num_seqs, rc.scheduler.max_num_batched_tokens,
                rc.scheduler.max_model_len, rc.scheduler.enable_prefix_caching,
                rc.scheduler.async_scheduling, rc.kv_cache.num_blocks,
                rc.kv_cache.groups.size(), rc.description.empty() ? "" : ", ",
                rc.description));
  }
  return s;
}

}  // namespace servesim
