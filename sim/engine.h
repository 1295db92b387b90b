// Reading guide to sim/ (the simulator core; -> sim/base/ and Abseil only).
// Start here: this loop drives everything. Then scheduler.h (vLLM's step
// rules and preemption), kv_cache.h (blocks, sliding windows, prefix
// cache), step_time_model.h (the interface hwmodels/ implements), client.h
// and router.h (the front end), metrics.h and report.h (the outputs),
// simulation.h (the one pipeline every caller runs an engine through).
// request.h and request_source.h are the data types; the utilities every
// folder shares (status macros, threads, random, JSON, hash) are sim/base/
// (guide: sim/base/status_macros.h). docs/architecture.md: the whole picture.
//
// The discrete-event loop: a client (sim/client.h) sends requests to a
// fleet of one or more replicas through a Router; each replica runs vLLM
// V1 scheduling (sim/scheduler.h) with its own SchedulerConfig,
// KvCacheSpec and StepTimeModel (mixed fleets are fine). The loop jumps
// from event to event (request wake-up, arrival at a replica, end of a
// replica's step), never ticks; time never runs backwards (checked).
//
// Streaming: requests are pulled from the RequestSource one at a time, only
// when the client is ready to send the next one, so memory holds only the
// in-flight requests plus one small RequestRecord per request.
//
// Sessions: a turn of a multi-turn session (RequestSpec::session_id >= 0)
// is never sent before the session's previous turn has finished (a user
// reads the answer first; vLLM's multi-turn benchmark client waits for it
// too). A turn whose time comes while an earlier turn of its session is
// still in flight (or itself held) is held; when that turn ends, the held
// turn becomes ready at max(its intended time, that end) and is sent in
// time order with the source's other requests (ready turns first on ties),
// under the same max_concurrency. Its RequestRecord keeps the intended
// time, so the delay shows as send_ns - intended_ns. A trace replayed from
// a real server rarely triggers it (its timestamps already follow the
// answers); a slower simulated fleet or a synthetic session does.
// A step lasts host_ns + device_ns, or max(host_ns, device_ns) with
// async_scheduling. A replica starts its next step as soon as the previous
// one ends (its outputs processed); requests arriving during a step wait for
// the next one. An idle replica starts a step after every arrival of the
// same instant has been queued (vLLM's engine drains its input queue before
// scheduling), so N requests sent together are batched together.
//
// Pipeline parallelism: a replica whose step model has P > 1 stages
// (StepTimeModel::num_pipeline_stages) runs vLLM V1's batch queue
// (EngineCore.step_with_batch_queue, max_concurrent_batches = P):
//   - while fewer than P batches are in flight, the engine schedules a new
//     batch (Scheduler::Launch; requests of in-flight batches are skipped)
//     and, after its host time, tries again;
//   - when nothing can be scheduled, or P batches are in flight, it blocks
//     until the oldest batch returns and applies its outputs
//     (Scheduler::CompleteOldest: tokens stamped then), then tries again;
//     requests arriving meanwhile wait, as vLLM's busy loop reads its input
//     queue only between steps;
//   - a batch launched at t enters stage 0 at max(t + host, stage 0 free),
//     stage s + 1 at max(leaves stage s + transfer, stage s + 1 free), one
//     batch at a time per stage, in launch order (PipelineFinishTimes in
//     hwmodels/parallelism.h): a batch alone takes host + the stages +
//     (P - 1) transfers, the same as a one-batch step;
//   - so decode streams that are in different batches stay apart and the
//     pipeline serves one batch per slowest stage; streams in one batch
//     stay together (vLLM does not split a batch): the gain under load
//     comes from prefills that do not fit one batch's token budget and
//     arrivals while a batch is being scheduled.
// Not modelled for PP: async scheduling (ignored: host and device are
// serial), lock-step DP groups (refused), the host time of applying
// outputs, a chunk of a request scheduled while its previous chunk is in
// flight (newer vLLM). P = 1 runs the one-batch loop above unchanged.
//
// Thread-compatible. Not copyable.
#ifndef SERVESIM_SIM_ENGINE_H_
#define SERVESIM_SIM_ENGINE_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <queue>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "sim/client.h"
#include "sim/event_queue.h"
#include "sim/metrics.h"
#include "sim/request_source.h"
#include "sim/router.h"
#include "sim/scheduler.h"
#include "sim/server_config.h"
#include "sim/step_time_model.h"

namespace servesim {

struct ReplicaConfig {
  SchedulerConfig scheduler;
  KvCacheSpec kv_cache;
  const StepTimeModel* step_model = nullptr;  // not owned; must outlive the Engine
  std::string description;                    // provenance, free text
  // >= 0: the replicas with this id step in lock-step, as vLLM's DP engines
  // of an MoE model do (their experts span the ranks): a step of the group
  // starts when any member has work, members with none run a dummy batch,
  // and every member's step lasts the longest member's. -1: on its own.
  int32_t lockstep_group = -1;
};

struct EngineOptions {
  // Runs of equal consecutive pooled ITL values kept exactly before
  // switching to a histogram (16 bytes a run).
  int64_t itl_exact_cap = 4'000'000;
  // Keep every request's ITL list (for --save-detailed); O(output tokens).
  bool keep_request_itls = false;
  // Deep KV-cache invariant check after every step (tests; slow).
  bool check_kv_every_step = false;
};

// Optional hooks (Chrome trace, tests). Called synchronously in the loop.
class EngineObserver {
 public:
  virtual ~EngineObserver() = default;
  // A step of `replica` was scheduled; `s.batch()` etc. describe it.
  virtual void OnStep(int32_t replica, TimeNs start_ns, TimeNs duration_ns,
                      const Scheduler& s, const StepCost& cost) {}
  // A request finished or was rejected; its record is complete.
  virtual void OnRequestDone(const RequestRecord& record) {}
};

class Engine {
 public:
  // Errors: no replica, a null step model, invalid scheduler/KV/client
  // config (messages name the field).
  static absl::StatusOr<std::unique_ptr<Engine>> Create(
      std::vector<ReplicaConfig> replicas, std::unique_ptr<Router> router,
      const ClientConfig& client, const EngineOptions& options = {});
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;
  ~Engine();

  // Before Run: every replica's KV cache starts as a copy of `state` (what
  // an earlier benchmark on the same servers left in their prefix caches;
  // Scheduler::StartFromKvCache, whose errors it returns).
  absl::Status StartFromKvCache(const KvCache& state);

  // Sends every request of `source` and simulates until all have finished
  // or were rejected. Call once. Errors come from the source (bad record).
  absl::Status Run(RequestSource* source, EngineObserver* observer = nullptr);

  // After Run: one record per request, in source order.
  const std::vector<RequestRecord>& records() const { return records_; }
  // After Run with keep_request_itls: each request's inter-token gaps in ns
  // (exact: ttft + their sum is the E2E latency; float seconds drifted by ~1 us).
  const std::vector<std::vector<TimeNs>>& request_itls() const { return request_itls_; }
  RunResult Result() const;
  const ItlAccumulator& itl() const { return itl_; }
  const StepStats& step_stats() const { return steps_; }
  int32_t num_replicas() const { return static_cast<int32_t>(replicas_.size()); }
  const Scheduler& replica(int32_t i) const { return *replicas_[i].scheduler; }
  const ReplicaConfig& replica_config(int32_t i) const { return replica_configs_[i]; }
  const Router& router() const { return *router_; }
  TimeNs now_ns() const { return now_; }
  int64_t peak_in_flight() const { return peak_in_flight_; }
  std::string Describe() const;

 private:
  struct Replica {
    std::unique_ptr<Scheduler> scheduler;
    const StepTimeModel* model = nullptr;
    bool async = false;
    bool busy = false;
    bool kick_pending = false;  // a kKick event is queued
    int32_t group = -1;         // index into groups_, or -1
    bool stepped = false;       // had a batch in the group's current step
    StepCost cost;              // of that batch
    // Pipeline parallelism (P = stages > 1): when each stage is free, the
    // in-flight batches' finish times (oldest first), scratch stage times.
    int32_t stages = 1;
    std::vector<TimeNs> stage_free_ns;
    std::deque<TimeNs> finish_ns;
    std::vector<TimeNs> stage_ns;
  };
  class Listener;
  enum EventKind : int32_t {
    kWake = 1,
    kArrive = 2,
    kStepEnd = 3,
    kKick = 4,
    kPipeStep = 5,  // a PP replica's engine is free again after a launch
  };

  Engine(std::vector<ReplicaConfig> configs, std::unique_ptr<Router> router,
         const ClientConfig& client, const EngineOptions& options);
  absl::Status PullNext();
  absl::Status TrySend();
  void Arrive(int32_t transit);
  // from_idle: the replica was idle (async scheduling cannot overlap this
  // step's host work with a previous step).
  void StartStep(int32_t r, bool from_idle);
  void EndStep(int32_t r);
  // One step of every member of lock-step group g (ReplicaConfig).
  void StartGroupStep(int32_t g, bool from_idle);
  void EndGroupStep(int32_t g);
  void Done(RequestRecord& rec);
  // Pipeline parallelism: one pass of vLLM's step_with_batch_queue for
  // replica r at now_ (engine.h top); EndPipeBatch applies the oldest batch.
  void PipeStep(int32_t r);
  void EndPipeBatch(int32_t r);

  std::vector<ReplicaConfig> replica_configs_;
  std::vector<Replica> replicas_;
  std::vector<std::vector<int32_t>> groups_;  // lock-step groups' members
  std::vector<const Scheduler*> replica_ptrs_;
  std::unique_ptr<Router> router_;
  ClientConfig client_config_;
  EngineOptions options_;
  std::unique_ptr<Client> client_;
  std::unique_ptr<Listener> listener_;
  EngineObserver* observer_ = nullptr;
  RequestSource* source_ = nullptr;

  EventQueue events_;
  TimeNs now_ = 0;
  // The next request from the client, not yet sent.
  bool has_pending_ = false;
  bool source_done_ = false;
  RequestSpec pending_;
  TimeNs pending_intended_ns_ = 0;
  // Requests between send and arrival at a replica (client overhead).
  std::vector<RequestSpec> transit_;
  std::vector<int64_t> transit_record_;
  std::vector<int32_t> transit_free_;
  int64_t in_flight_ = 0;
  int64_t peak_in_flight_ = 0;
  bool ran_ = false;
  // Sessions (top of file): per session, its requests in flight, held or
  // ready; the held turns in source order; ready turns by (time, order).
  struct HeldTurn {
    RequestSpec spec;
    TimeNs intended_ns = 0;
  };
  struct ReadyTurn {
    TimeNs ready_ns = 0;
    int64_t seq = 0;
    HeldTurn turn;
  };
  struct LaterReady {
    bool operator()(const ReadyTurn& a, const ReadyTurn& b) const {
      return a.ready_ns != b.ready_ns ? a.ready_ns > b.ready_ns : a.seq > b.seq;
    }
  };
  absl::flat_hash_map<int64_t, int32_t> session_busy_;
  absl::flat_hash_map<int64_t, std::deque<HeldTurn>> held_;
  std::priority_queue<ReadyTurn, std::vector<ReadyTurn>, LaterReady> ready_;
  int64_t ready_seq_ = 0;
  std::vector<int64_t> record_session_;  // per record: its session, or -1
  // Sends `spec` (intended at `intended_ns`) at now_.
  void Send(RequestSpec&& spec, TimeNs intended_ns);

  std::vector<RequestRecord> records_;
  std::vector<std::vector<TimeNs>> request_itls_;
  ItlAccumulator itl_;
  OutputTokenBuckets tokens_;
  StepStats steps_;
};

}  // namespace servesim

#endif  // SERVESIM_SIM_ENGINE_H_
