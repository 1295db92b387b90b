#include "sim/scheduler_model.h"

#include <algorithm>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "sim/base/hash.h"
#include "sim/base/status_macros.h"
#include "sim/kv_cache.h"
#include "sim/scheduler.h"

namespace servesim {
namespace {

// The reference. Request i of the run uses KV slot i.
class ReferenceScheduler {
 public:
  struct Req {
    RequestSpec spec;
    int32_t computed = 0;
    int32_t output = 0;
    int32_t preemptions = 0;
    int32_t prefix_hit_tokens = -1;  // at first admission
    bool done = false;
    bool finishing = false;  // done, blocks held until the next step (async)
    int32_t num_tokens() const { return spec.input_tokens + output; }
    KvRequestView View() const { return KvViewOf(spec); }
  };
  struct Scheduled {
    int32_t req;
    int32_t tokens;
  };

  ReferenceScheduler(const SchedulerConfig& config, const KvCacheSpec& spec)
      : config_(config), spec_(spec), kv_(spec, config.enable_prefix_caching) {}

  // Rejection rules of the header: lengths, max_model_len, the whole pool
  // (the KV of the last generated token is never written), the token
  // budget without chunking.
  RejectReason CheckFits(const RequestSpec& s) const {
    if (s.input_tokens < 1 || s.output_tokens < 1) return RejectReason::kInvalidLengths;
    const int64_t total = int64_t{s.input_tokens} + s.output_tokens;
    if (total > config_.max_model_len) return RejectReason::kExceedsMaxModelLen;
    // A sliding group holds its window and every batch in flight.
    const int64_t in_flight =
        int64_t{config_.async_scheduling ? 2 : 1} * config_.max_num_batched_tokens;
    if (MaxBlocksHeld(spec_, total - 1, in_flight) > spec_.num_blocks)
      return RejectReason::kExceedsKvCache;
    if (!config_.enable_chunked_prefill && total - 1 > config_.max_num_batched_tokens)
      return RejectReason::kExceedsBatchTokens;
    return RejectReason::kNone;
  }

  void Add(RequestSpec s) {
    reqs_.push_back(Req{std::move(s)});
    waiting_.push_back(static_cast<int32_t>(reqs_.size()) - 1);
  }

  // One step, rule by rule. Async: a finished request still in the
  // running list is skipped; when nothing can run, the finished ones are
  // freed and the step scheduled again.
  // Async: the last step's tokens are still in flight while this one is
  // built (the first pass), and a sliding window slides on the tokens
  // before them.
  void Schedule() {
    preemptions_ = 0;
    absl::flat_hash_map<int32_t, int32_t> in_flight;
    if (config_.async_scheduling) {
      for (const Scheduled& s : step_) in_flight[s.req] = s.tokens;
    }
    Pass(in_flight);
    if (step_.empty() && !finishing_.empty()) {
      FreeFinishing();
      Pass({});
    }
    FreeFinishing();
  }

  void Pass(const absl::flat_hash_map<int32_t, int32_t>& in_flight) {
    step_.clear();
    const int32_t preemptions_before = preemptions_;
    int32_t budget = config_.max_num_batched_tokens;
    size_t i = 0;
    while (i < running_.size() && budget > 0) {
      const int32_t id = running_[i];
      Req& r = reqs_[id];
      if (r.finishing) {
        ++i;
        continue;
      }
      const int32_t tokens = std::min(r.num_tokens() - r.computed, budget);
      const auto it = in_flight.find(id);
      const int32_t pending = it == in_flight.end() ? 0 : it->second;
      if (pending > 0) ++in_flight_steps_;
      bool scheduled = false;
      while (true) {
        if (kv_.Allocate(id, r.View(), r.computed, tokens, false, pending)) {
          scheduled = true;
          break;
        }
        // Preempt the most recently admitted running request: free its
        // blocks, reset its computed tokens, front of the waiting queue;
        // a finished one just frees its blocks.
        const int32_t victim = running_.back();
        running_.pop_back();
        Req& v = reqs_[victim];
        if (v.finishing) {
          kv_.Free(victim, v.View(), v.computed, false);
          v.finishing = false;
          std::erase(finishing_, victim);
          continue;
        }
        kv_.Free(victim, v.View(), v.computed, /*preempted=*/true);
        v.computed = 0;
        ++v.preemptions;
        ++preemptions_;
        waiting_.push_front(victim);
        if (victim == id) break;
      }
      if (!scheduled) break;
      step_.push_back({id, tokens});
      budget -= tokens;
      ++i;
    }
    if (preemptions_ == preemptions_before) Admit(budget);
  }

  // Waiting requests, strictly in order, into the step.
  void Admit(int32_t& budget) {
    while (!waiting_.empty() && budget > 0 &&
           static_cast<int32_t>(running_.size()) < config_.max_num_seqs) {
      const int32_t id = waiting_.front();
      Req& r = reqs_[id];
      const int32_t hit = kv_.FindPrefixHit(r.View(), r.num_tokens());
      int32_t tokens = r.num_tokens() - hit;
      if (!config_.enable_chunked_prefill && tokens > budget) break;
      tokens = std::min(tokens, budget);
      // vLLM's scheduler_reserve_full_isl: the whole current sequence.
      if (config_.reserve_full_isl &&
          !kv_.FullSequenceFits(hit, std::min(r.num_tokens(), config_.max_model_len),
                                int64_t{config_.async_scheduling ? 2 : 1} *
                                    config_.max_num_batched_tokens)) {
        ++gate_stops_;
        break;
      }
      if (!kv_.Allocate(id, r.View(), hit, tokens, /*use_hit=*/true)) break;
      waiting_.pop_front();
      r.computed = hit;
      if (r.prefix_hit_tokens < 0) r.prefix_hit_tokens = hit;
      running_.push_back(id);
      step_.push_back({id, tokens});
      budget -= tokens;
    }
  }

  // Ends the step: emitted tokens (request ids) and finished requests.
  void Complete(std::vector<RequestId>* tokens, std::vector<RequestId>* finished) {
    for (const Scheduled& s : step_) {
      Req& r = reqs_[s.req];
      r.computed += s.tokens;
      if (r.computed < r.num_tokens()) continue;
      ++r.output;
      tokens->push_back(r.spec.id);
      if (r.output >= r.spec.output_tokens) {
        finished->push_back(r.spec.id);
        r.done = true;
        // Async: vLLM processes this step's outputs after it schedules the
        // next one; the request keeps its blocks and place until then.
        if (config_.async_scheduling) {
          r.finishing = true;
          finishing_.push_back(s.req);
        } else {
          kv_.Free(s.req, r.View(), r.computed, false);
        }
      }
    }
    std::erase_if(running_,
                  [this](int32_t id) { return reqs_[id].done && !reqs_[id].finishing; });
    if (running_.size() == finishing_.size() && waiting_.empty()) FreeFinishing();
  }

  void FreeFinishing() {
    std::erase_if(running_, [this](int32_t id) { return reqs_[id].finishing; });
    for (const int32_t id : finishing_) {
      kv_.Free(id, reqs_[id].View(), reqs_[id].computed, false);
      reqs_[id].finishing = false;
    }
    finishing_.clear();
  }

  const std::vector<Scheduled>& step() const { return step_; }
  const Req& req(int32_t i) const { return reqs_[i]; }
  int32_t preemptions() const { return preemptions_; }
  // Admissions the whole-sequence gate stopped, over the run.
  int64_t gate_stops() const { return gate_stops_; }
  // Running requests scheduled with their last step's tokens in flight.
  int64_t in_flight_steps() const { return in_flight_steps_; }
  int32_t num_running() const { return static_cast<int32_t>(running_.size()); }
  int32_t num_waiting() const { return static_cast<int32_t>(waiting_.size()); }
  int32_t num_finishing() const { return static_cast<int32_t>(finishing_.size()); }
  const ReferenceKvCache& kv() const { return kv_; }

 private:
  SchedulerConfig config_;
  KvCacheSpec spec_;
  ReferenceKvCache kv_;
  std::vector<Req> reqs_;
  std::vector<int32_t> running_;  // admission order
  std::deque<int32_t> waiting_;
  std::vector<int32_t> finishing_;  // finished, not yet freed (async)
  std::vector<Scheduled> step_;
  int32_t preemptions_ = 0;
  int64_t gate_stops_ = 0;
  int64_t in_flight_steps_ = 0;
};

struct Recorder : StepListener {
  std::vector<RequestId> tokens, finished;
  void OnToken(const SchedRequest& r, TimeNs) override { tokens.push_back(r.spec.id); }
  void OnFinish(const SchedRequest& r, TimeNs) override { finished.push_back(r.spec.id); }
};

class Driver {
 public:
  Driver(ChoiceSource& src, SchedulerModelStats* stats) : src_(src), stats_(stats) {}

  absl::Status Run(int64_t max_ops) {
    static constexpr int32_t kSizes[] = {1, 2, 4, 5, 8, 16, 32};
    cfg_.max_num_seqs = 1 + static_cast<int32_t>(src_.Next(8));
    cfg_.max_num_batched_tokens = 1 + static_cast<int32_t>(src_.Next(160));
    cfg_.max_model_len = 16 + static_cast<int32_t>(src_.Next(600));
    cfg_.enable_chunked_prefill = src_.Next(4) != 0;
    cfg_.enable_prefix_caching = src_.Next(4) != 0;
    cfg_.reserve_full_isl = src_.Next(2) != 0;
    cfg_.async_scheduling = src_.Next(2) != 0;
    const int num_groups = 1 + static_cast<int>(src_.Next(3));
    for (int g = 0; g < num_groups; ++g) {
      KvGroupSpec gs;
      gs.block_size_tokens = kSizes[src_.Next(7)];
      // Windows of 2..129 tokens (KvCache refuses 1: it attends to nothing).
      gs.sliding_window =
          src_.Next(2) == 0 ? 0 : 2 + static_cast<int32_t>(src_.Next(128));
      spec_.groups.push_back(gs);
    }
    spec_.num_blocks = 1 + src_.Next(src_.Next(2) == 0 ? 32 : 400);
    hbt_ = kSizes[src_.Next(7)];
    auto real = Scheduler::Create(cfg_, spec_);
    if (!real.ok()) return real.status();
    real_ = std::move(real).value();
    ref_ = std::make_unique<ReferenceScheduler>(cfg_, spec_);
    for (op_ = 0; op_ < max_ops && !src_.exhausted(); ++op_) {
      if (src_.Next(3) == 0) {
        RETURN_IF_ERROR(AddRequest());
      } else if (real_->HasWork()) {
        RETURN_IF_ERROR(Step());
      }
    }
    stats_->full_isl_gate_stops += ref_->gate_stops();
    stats_->in_flight_steps += ref_->in_flight_steps();
    return absl::OkStatus();
  }

 private:
  std::string Where() const {
    std::string groups;
    for (const KvGroupSpec& gs : spec_.groups) {
      absl::StrAppendFormat(&groups, " [bs %d window %d]", gs.block_size_tokens,
                            gs.sliding_window);
    }
    return absl::StrFormat(
        "op %d: max_num_seqs %d, budget %d, max_model_len %d, chunked %d, caching %d, "
        "reserve_full_isl %d, async %d, %d blocks, groups%s",
        op_, cfg_.max_num_seqs, cfg_.max_num_batched_tokens, cfg_.max_model_len,
        cfg_.enable_chunked_prefill, cfg_.enable_prefix_caching, cfg_.reserve_full_isl,
        cfg_.async_scheduling, spec_.num_blocks, groups);
  }

  absl::Status Differ(const char* what, const std::string& real, const std::string& ref) {
    return absl::InternalError(
        absl::StrFormat("%s: %s: Scheduler %s, reference %s", Where(), what, real, ref));
  }

  absl::Status AddRequest() {
    RequestSpec s;
    s.id = next_id_++;
    s.input_tokens = 1 + static_cast<int32_t>(src_.Next(src_.Next(4) == 0 ? 500 : 100));
    s.output_tokens = 1 + static_cast<int32_t>(src_.Next(src_.Next(4) == 0 ? 200 : 16));
    if (!answers_.empty() && src_.Next(4) == 0) {
      // A chat's next turn: an earlier prompt, its hashed answer (whole
      // hash blocks) and new text.
      const RequestSpec& p = answers_[src_.Next(static_cast<uint32_t>(answers_.size()))];
      const int32_t whole = (p.input_tokens + p.hashed_output_tokens) / hbt_;
      s.input_tokens = p.input_tokens + p.hashed_output_tokens + 1 +
                       static_cast<int32_t>(src_.Next(40));
      s.hash_block_tokens = hbt_;
      s.prefix_hashes.assign(p.prefix_hashes.begin(), p.prefix_hashes.begin() + whole);
      uint64_t h = s.prefix_hashes.empty() ? 7 : s.prefix_hashes.back();
      for (int32_t i = whole; i < (s.input_tokens + hbt_ - 1) / hbt_; ++i) {
        h = HashCombine(h, (static_cast<uint64_t>(s.id) << 24) + i);
        s.prefix_hashes.push_back(h);
      }
      parent_prompt_[s.id] = p.input_tokens;
    } else if (src_.Next(4) != 0) {
      // Chained hashes from one of three shared prefixes, unique after a
      // random point; one in four hashes its whole answer too.
      s.hash_block_tokens = hbt_;
      if (src_.Next(4) == 0) s.hashed_output_tokens = s.output_tokens;
      const uint64_t family = src_.Next(3);
      const int32_t n = (s.input_tokens + s.hashed_output_tokens + hbt_ - 1) / hbt_;
      const int32_t shared = static_cast<int32_t>(src_.Next(n + 1));
      uint64_t h = family;
      for (int32_t i = 0; i < n; ++i) {
        h = HashCombine(h, i < shared ? static_cast<uint64_t>(i)
                                      : (static_cast<uint64_t>(s.id) << 24) + i);
        s.prefix_hashes.push_back(h);
      }
      if (s.hashed_output_tokens > 0) {
        if (answers_.size() == 8) answers_.erase(answers_.begin());
        answers_.push_back(s);
      }
    }
    const RejectReason real = real_->CheckFits(s);
    const RejectReason ref = ref_->CheckFits(s);
    if (real != ref) {
      return Differ("CheckFits", std::string(RejectReasonName(real)),
                    std::string(RejectReasonName(ref)));
    }
    if (real != RejectReason::kNone) {
      ++stats_->rejected;
      return absl::OkStatus();
    }
    ids_.push_back(s.id);
    real_->Add(s, now_, static_cast<int64_t>(ids_.size()) - 1);
    ref_->Add(std::move(s));
    ++stats_->added;
    return absl::OkStatus();
  }

  absl::Status Step() {
    if (real_->num_finishing() != ref_->num_finishing()) {
      return Differ("finishing", absl::StrCat(real_->num_finishing()),
                    absl::StrCat(ref_->num_finishing()));
    }
    if (real_->num_finishing() > 0) ++stats_->steps_with_finishing;
    const bool any = real_->Schedule(now_);
    ref_->Schedule();
    // The engine relies on it: an empty step means nothing is left to do.
    if (!any && real_->HasWork()) {
      return Differ("empty step with work left",
                    "running/waiting " +
                        absl::StrCat(real_->num_running(), "/", real_->num_waiting()),
                    "none");
    }
    // The step: (request id, tokens) in order.
    std::vector<std::string> a, b;
    for (size_t k = 0; k < real_->scheduled_slots().size(); ++k) {
      const SchedRequest& r = real_->request(real_->scheduled_slots()[k]);
      a.push_back(absl::StrFormat("%d:%d hit %d", r.spec.id, real_->scheduled_tokens()[k],
                                  r.prefix_hit_tokens));
    }
    for (const auto& s : ref_->step()) {
      const auto& r = ref_->req(s.req);
      b.push_back(
          absl::StrFormat("%d:%d hit %d", r.spec.id, s.tokens, r.prefix_hit_tokens));
      if (r.computed == r.prefix_hit_tokens && r.preemptions == 0) {
        stats_->prefix_hit_tokens += r.prefix_hit_tokens;  // first admission
        const auto it = parent_prompt_.find(r.spec.id);
        if (it != parent_prompt_.end() && r.prefix_hit_tokens > it->second) {
          ++stats_->answer_hits;  // reaches into an earlier request's answer
        }
      }
    }
    if (a != b || any != !b.empty()) {
      return Differ("scheduled", absl::StrJoin(a, " "), absl::StrJoin(b, " "));
    }
    if (real_->step_preemptions() != ref_->preemptions()) {
      return Differ("preemptions", absl::StrCat(real_->step_preemptions()),
                    absl::StrCat(ref_->preemptions()));
    }
    // The batch: a decode is one token of a request past its prefill whose
    // KV then covers all but the new token; anything else is a prefill chunk.
    std::vector<std::string> pa, pb;
    for (const PrefillChunk& p : real_->batch().prefills) {
      pa.push_back(absl::StrFormat("p%d@%d", p.num_tokens, p.num_computed_before));
    }
    for (int32_t c : real_->batch().decode_context_lens)
      pa.push_back(absl::StrCat("d", c));
    std::vector<std::string> decodes;
    for (const auto& s : ref_->step()) {
      const auto& r = ref_->req(s.req);
      if (r.output > 0 && s.tokens == 1 && r.computed + 1 == r.num_tokens()) {
        decodes.push_back(absl::StrCat("d", r.computed));
      } else {
        pb.push_back(absl::StrFormat("p%d@%d", s.tokens, r.computed));
      }
    }
    pb.insert(pb.end(), decodes.begin(), decodes.end());
    if (pa != pb) return Differ("batch", absl::StrJoin(pa, " "), absl::StrJoin(pb, " "));
    stats_->preemptions += ref_->preemptions();

    now_ += 1000;
    Recorder rec;
    std::vector<RequestId> tokens, finished;
    real_->Complete(now_, rec);
    ref_->Complete(&tokens, &finished);
    if (rec.tokens != tokens) {
      return Differ("tokens", absl::StrJoin(rec.tokens, " "), absl::StrJoin(tokens, " "));
    }
    if (rec.finished != finished) {
      return Differ("finished", absl::StrJoin(rec.finished, " "),
                    absl::StrJoin(finished, " "));
    }
    stats_->finished += static_cast<int64_t>(finished.size());
    if (real_->num_running() != ref_->num_running() ||
        real_->num_waiting() != ref_->num_waiting()) {
      return Differ("running/waiting",
                    absl::StrCat(real_->num_running(), "/", real_->num_waiting()),
                    absl::StrCat(ref_->num_running(), "/", ref_->num_waiting()));
    }
    const KvCache& kv = real_->kv();
    const ReferenceKvCache& rkv = ref_->kv();
    if (kv.num_free_blocks() != rkv.num_free_blocks() ||
        kv.num_cached_blocks() != rkv.num_cached_blocks()) {
      return Differ("KV free/cached",
                    absl::StrCat(kv.num_free_blocks(), "/", kv.num_cached_blocks()),
                    absl::StrCat(rkv.num_free_blocks(), "/", rkv.num_cached_blocks()));
    }
    if (!kv.CheckInvariant(/*deep=*/true)) {
      return absl::InternalError(absl::StrCat(Where(), ": KvCache::CheckInvariant"));
    }
    ++stats_->steps;
    return absl::OkStatus();
  }

  ChoiceSource& src_;
  SchedulerModelStats* stats_;
  SchedulerConfig cfg_;
  KvCacheSpec spec_;
  int32_t hbt_ = 16;
  std::vector<RequestSpec> answers_;  // requests that hash their answer
  absl::flat_hash_map<RequestId, int32_t> parent_prompt_;  // follow-up -> prompt
  std::unique_ptr<Scheduler> real_;
  std::unique_ptr<ReferenceScheduler> ref_;
  std::vector<RequestId> ids_;
  RequestId next_id_ = 0;
  TimeNs now_ = 0;
  int64_t op_ = 0;
};

}  // namespace

absl::Status RunSchedulerModel(ChoiceSource& src, int64_t max_ops,
                               SchedulerModelStats* stats) {
  SchedulerModelStats local;
  Driver d(src, stats != nullptr ? stats : &local);
  return d.Run(max_ops);
}

}  // namespace servesim
