#include "sim/scheduler.h"

#include <vector>

#include "gtest/gtest.h"

namespace servesim {
namespace {

struct Recorder : StepListener {
  struct Tok {
    RequestId id;
    int32_t num_output;
    TimeNs t;
  };
  std::vector<Tok> tokens;
  std::vector<RequestId> finished;
  void OnToken(const SchedRequest& r, TimeNs now) override {
    tokens.push_back({r.spec.id, r.num_output, now});
  }
  void OnFinish(const SchedRequest& r, TimeNs) override { finished.push_back(r.spec.id); }
};

RequestSpec Req(RequestId id, int32_t in, int32_t out) {
  RequestSpec s;
  s.id = id;
  s.input_tokens = in;
  s.output_tokens = out;
  return s;
}

KvCacheSpec Pool(int64_t blocks) {
  KvCacheSpec s;
  s.num_blocks = blocks;
  s.groups.push_back(KvGroupSpec{16, 0, 1});
  return s;
}

SchedulerConfig Cfg(int32_t budget, int32_t max_seqs = 256, bool caching = false) {
  SchedulerConfig c;
  c.max_num_batched_tokens = budget;
  c.max_num_seqs = max_seqs;
  c.max_model_len = 100000;
  c.enable_prefix_caching = caching;
  return c;
}

// Pipeline parallelism: a request of a launched batch is skipped by later
// Schedule() calls until its batch returns; batches return in launch
// order; a request preempted while in flight emits nothing for that batch.
TEST(SchedulerTest, InFlightRequestsAreSkippedAndPreemptedOnesDiscarded) {
  auto s = Scheduler::Create(Cfg(16), Pool(2)).value();
  Recorder rec;
  const int32_t r1 = s->Add(Req(1, 16, 5), 0, 0);
  const int32_t r2 = s->Add(Req(2, 16, 5), 0, 1);
  ASSERT_TRUE(s->Schedule(0));  // A: R1's 16-token prefill fills the budget
  EXPECT_EQ(s->scheduled_slots(), std::vector<int32_t>{r1});
  s->Launch();
  ASSERT_TRUE(s->Schedule(1));  // B: R1 is in flight, R2 is admitted
  EXPECT_EQ(s->scheduled_slots(), std::vector<int32_t>{r2});
  s->Launch();
  EXPECT_FALSE(s->Schedule(2));  // both in flight
  EXPECT_EQ(s->num_in_flight_batches(), 2);
  s->CompleteOldest(3, rec);  // A returns: R1's first token
  ASSERT_EQ(rec.tokens.size(), 1u);
  EXPECT_EQ(rec.tokens[0].id, 1);
  // C: R1's decode needs a second block; the pool's two are R1's and R2's,
  // so R2 (in flight in B) is preempted.
  ASSERT_TRUE(s->Schedule(4));
  EXPECT_EQ(s->scheduled_slots(), std::vector<int32_t>{r1});
  EXPECT_EQ(s->step_preemptions(), 1);
  s->Launch();
  s->CompleteOldest(5, rec);  // B returns: R2's work is discarded
  EXPECT_EQ(rec.tokens.size(), 1u);
  EXPECT_EQ(s->request(r2).num_computed, 0);
  EXPECT_EQ(s->request(r2).num_output, 0);
  EXPECT_FALSE(s->request(r2).in_flight);
  s->CompleteOldest(6, rec);  // C returns: R1's second token
  ASSERT_EQ(rec.tokens.size(), 2u);
  EXPECT_EQ(rec.tokens[1].id, 1);
  EXPECT_EQ(rec.tokens[1].num_output, 2);
  EXPECT_EQ(s->num_in_flight_batches(), 0);
  EXPECT_TRUE(s->kv().CheckInvariant(true));
}

TEST(SchedulerTest, LongPromptIsChunkedByTheTokenBudgetAndEmitsAfterTheLastChunk) {
  auto s = Scheduler::Create(Cfg(100), Pool(1000)).value();
  Recorder rec;
  s->Add(Req(0, 250, 3), 0, 0);
  // Step 1 and 2: 100-token chunks, no token.
  ASSERT_TRUE(s->Schedule(0));
  EXPECT_EQ(s->batch_num_tokens(), 100);
  ASSERT_EQ(s->batch().prefills.size(), 1u);
  EXPECT_EQ(s->batch().prefills[0].num_computed_before, 0);
  s->Complete(10, rec);
  EXPECT_TRUE(rec.tokens.empty());
  ASSERT_TRUE(s->Schedule(10));
  EXPECT_EQ(s->batch_num_tokens(), 100);
  EXPECT_EQ(s->batch().prefills[0].num_computed_before, 100);
  s->Complete(20, rec);
  EXPECT_TRUE(rec.tokens.empty());
  // Step 3: the last 50 prompt tokens; the first token comes at its end.
  ASSERT_TRUE(s->Schedule(20));
  EXPECT_EQ(s->batch_num_tokens(), 50);
  s->Complete(30, rec);
  ASSERT_EQ(rec.tokens.size(), 1u);
  EXPECT_EQ(rec.tokens[0].t, 30);
  // Then one decode token per step.
  ASSERT_TRUE(s->Schedule(30));
  EXPECT_EQ(s->batch().decode_context_lens.size(), 1u);
  EXPECT_EQ(s->batch().decode_context_lens[0], 250);
  s->Complete(40, rec);
  ASSERT_TRUE(s->Schedule(40));
  s->Complete(50, rec);
  EXPECT_EQ(rec.tokens.size(), 3u);
  EXPECT_EQ(rec.finished, std::vector<RequestId>{0});
  EXPECT_FALSE(s->Schedule(50));
  EXPECT_EQ(s->kv().num_used_blocks(), 0);
}

TEST(SchedulerTest, RunningRequestsComeFirstAndShareTheBudget) {
  auto s = Scheduler::Create(Cfg(100), Pool(1000)).value();
  Recorder rec;
  s->Add(Req(0, 90, 5), 0, 0);
  ASSERT_TRUE(s->Schedule(0));
  s->Complete(1, rec);  // request 0 decoding now
  s->Add(Req(1, 300, 5), 1, 1);
  ASSERT_TRUE(s->Schedule(1));
  // Decode of 0 (1 token) then a 99-token chunk of 1.
  EXPECT_EQ(s->batch().decode_context_lens.size(), 1u);
  ASSERT_EQ(s->batch().prefills.size(), 1u);
  EXPECT_EQ(s->batch().prefills[0].num_tokens, 99);
}

// vLLM's engine core launches step n, then at once schedules step n + 1
// (a batch queue of two): a request that arrives while step n runs is
// first seen by the batch of step n + 2. An engine with nothing else to run
// schedules it as soon as step n ends.
TEST(SchedulerTest, AsyncSchedulingAdmitsAnArrivalDuringAStepOneStepLater) {
  for (const bool async : {false, true}) {
    SCOPED_TRACE(async ? "async" : "sync");
    SchedulerConfig cfg = Cfg(1000);
    cfg.async_scheduling = async;
    auto s = Scheduler::Create(cfg, Pool(1000)).value();
    Recorder rec;
    s->Add(Req(0, 10, 5), 0, 0);
    ASSERT_TRUE(s->Schedule(0));  // step 1: request 0's prompt
    s->Add(Req(1, 10, 5), 5, 1);  // arrives while step 1 runs
    s->Complete(10, rec);
    ASSERT_TRUE(s->Schedule(10));  // step 2
    EXPECT_EQ(s->batch_num_prefills(), async ? 0 : 1);
    EXPECT_EQ(s->batch_num_tokens(), async ? 1 : 11);
    s->Complete(20, rec);
    ASSERT_TRUE(s->Schedule(20));  // step 3
    if (async) {
      EXPECT_EQ(s->batch_num_prefills(), 1);
    }
    s->Complete(30, rec);
  }
  // Nothing else to run: no step is lost.
  SchedulerConfig cfg = Cfg(1000);
  cfg.async_scheduling = true;
  auto s = Scheduler::Create(cfg, Pool(1000)).value();
  Recorder rec;
  s->Add(Req(0, 10, 1), 0, 0);
  ASSERT_TRUE(s->Schedule(0));
  s->Add(Req(1, 10, 1), 5, 1);
  s->Complete(10, rec);  // request 0 finishes
  ASSERT_TRUE(s->Schedule(10));
  EXPECT_EQ(s->batch_num_prefills(), 1);
}

TEST(SchedulerTest, PreemptsTheLastAdmittedRequestWhichRestartsFromZero) {
  // 6 blocks of 16 tokens. A and B: 32-token prompts (2 blocks each).
  auto s = Scheduler::Create(Cfg(1000), Pool(6)).value();
  Recorder rec;
  const int32_t a = s->Add(Req(0, 32, 40), 0, 0);
  const int32_t b = s->Add(Req(1, 32, 40), 0, 1);
  ASSERT_TRUE(s->Schedule(0));
  EXPECT_EQ(s->batch_num_seqs(), 2);
  s->Complete(1, rec);
  EXPECT_EQ(s->kv().num_used_blocks(), 4);
  // Tokens 33..48: each needs a third block (6 used), fits.
  TimeNs t = 1;
  for (int i = 0; i < 16; ++i, ++t) {
    ASSERT_TRUE(s->Schedule(t));
    ASSERT_EQ(s->step_preemptions(), 0);
    s->Complete(t + 1, rec);
  }
  EXPECT_EQ(s->request(a).num_computed, 48);
  EXPECT_EQ(s->kv().num_used_blocks(), 6);
  // Token 49 of A needs a 4th block: none free, so B (admitted last) is
  // preempted: all its blocks freed, computed tokens back to 0, front of the
  // waiting queue; no waiting request is admitted in this step.
  ASSERT_TRUE(s->Schedule(t));
  EXPECT_EQ(s->step_preemptions(), 1);
  EXPECT_EQ(s->batch_num_seqs(), 1);
  EXPECT_EQ(s->scheduled_slots()[0], a);
  EXPECT_EQ(s->request(b).num_computed, 0);
  EXPECT_EQ(s->request(b).num_preemptions, 1);
  EXPECT_EQ(s->request(b).num_output, 17);  // kept: recompute, not regenerate
  EXPECT_EQ(s->num_waiting(), 1);
  EXPECT_EQ(s->kv().num_used_blocks(), 4);
  s->Complete(t + 1, rec);
  // Next step: B would resume by recomputing its prompt and 17 generated
  // tokens (49 tokens, 4 blocks) but A holds 4 of the 6 blocks: B waits.
  ASSERT_TRUE(s->Schedule(t + 1));
  EXPECT_EQ(s->batch_num_seqs(), 1);
  EXPECT_EQ(s->num_waiting(), 1);
}

TEST(SchedulerTest, VictimIsTheRequestItselfStopsTheRunningPass) {
  // 5 blocks. A: 40 tokens in 3 blocks (room up to 48). B: 32 tokens in 2
  // full blocks. A's decode fits; B's needs a block, none is free, and the
  // most recently admitted running request is B itself: B is preempted and
  // the pass stops.
  auto s = Scheduler::Create(Cfg(1000), Pool(5)).value();
  Recorder rec;
  const int32_t a = s->Add(Req(0, 40, 10), 0, 0);
  const int32_t b = s->Add(Req(1, 32, 10), 0, 1);
  ASSERT_TRUE(s->Schedule(0));
  s->Complete(1, rec);
  ASSERT_TRUE(s->Schedule(1));
  EXPECT_EQ(s->step_preemptions(), 1);
  ASSERT_EQ(s->batch_num_seqs(), 1);
  EXPECT_EQ(s->scheduled_slots()[0], a);
  EXPECT_EQ(s->request(b).num_computed, 0);
  EXPECT_EQ(s->request(b).num_preemptions, 1);
  EXPECT_EQ(s->num_running(), 1);
  EXPECT_EQ(s->num_waiting(), 1);
}

TEST(SchedulerTest, WaitingQueueIsHeadOfLineBlocked) {
  // 10 blocks. First request takes 8; the second needs 3 (does not fit);
  // the third would fit (1 block) but must wait behind the second.
  auto s = Scheduler::Create(Cfg(10000), Pool(10)).value();
  s->Add(Req(0, 128, 2), 0, 0);
  s->Add(Req(1, 48, 2), 0, 1);
  s->Add(Req(2, 16, 2), 0, 2);
  ASSERT_TRUE(s->Schedule(0));
  EXPECT_EQ(s->batch_num_seqs(), 1);
  EXPECT_EQ(s->num_waiting(), 2);
}

// vLLM's scheduler_reserve_full_isl: a waiting request is admitted only
// when its whole prompt fits the free blocks, not its first chunk. 10
// blocks, 32-token budget: A (64 tokens, 4 blocks, 5 once it decodes)
// runs; B's 128-token prompt needs 8 blocks, 5 are free. Without the gate B's first
// 32-token chunk (2 blocks) is admitted and later chunks preempt; with it B waits.
TEST(SchedulerTest, WholePromptMustFitToBeAdmittedWithReserveFullIsl) {
  for (const bool gate : {true, false}) {
    SchedulerConfig c = Cfg(32);
    c.reserve_full_isl = gate;
    auto s = Scheduler::Create(c, Pool(10)).value();
    Recorder rec;
    s->Add(Req(0, 64, 20), 0, 0);
    ASSERT_TRUE(s->Schedule(0));  // A's first chunk
    s->Complete(1, rec);
    s->Add(Req(1, 128, 2), 1, 1);
    ASSERT_TRUE(s->Schedule(1));  // A's second chunk (the budget: 32)
    s->Complete(2, rec);
    ASSERT_TRUE(s->Schedule(2));  // A's first decode; B?
    EXPECT_EQ(s->num_waiting(), gate ? 1 : 0) << "gate " << gate;
    EXPECT_EQ(s->batch_num_seqs(), gate ? 1 : 2) << "gate " << gate;
  }
}

// Async scheduling: vLLM schedules step n + 1 before it processes step n's
// outputs, so a request that finished in step n still holds its blocks and
// its max_num_seqs place while step n + 1 is built. max_num_seqs 2: A
// finishes in step 0 beside C; B, waiting, joins step 1 when scheduling is
// synchronous and step 2 when it is async. A's blocks are free after step
// 1 is scheduled.
TEST(SchedulerTest, AsyncFinishedRequestHoldsItsPlaceOneMoreStep) {
  for (const bool async : {false, true}) {
    SchedulerConfig c = Cfg(1000, /*max_seqs=*/2);
    c.async_scheduling = async;
    auto s = Scheduler::Create(c, Pool(100)).value();
    Recorder rec;
    const int32_t a = s->Add(Req(0, 16, 1), 0, 0);
    s->Add(Req(2, 16, 10), 0, 1);
    ASSERT_TRUE(s->Schedule(0));
    s->Complete(1, rec);
    ASSERT_EQ(rec.finished, std::vector<RequestId>{0});  // A's one token
    EXPECT_EQ(s->num_finishing(), async ? 1 : 0);
    EXPECT_EQ(s->kv().num_used_blocks(), async ? 2 : 1);  // a block each
    s->Add(Req(1, 16, 2), 1, 2);
    ASSERT_TRUE(s->Schedule(1));
    EXPECT_EQ(s->batch_num_seqs(), async ? 1 : 2) << "async " << async;
    EXPECT_EQ(s->num_finishing(), 0);
    if (async) {
      EXPECT_FALSE(s->request(a).active);  // (sync: B took its slot)
    }
    s->Complete(2, rec);
    ASSERT_TRUE(s->Schedule(2));
    EXPECT_EQ(s->batch_num_seqs(), 2) << "async " << async;
  }
}

// Async, a pool of 10 blocks: two 80-token prompts (5 blocks each) are
// prefilled together; one answers in a single token and finishes, still
// holding its 5 blocks; the other's first decode needs a 6th block.
//  - The finished one admitted last is the victim (vLLM's running list
//    still holds it): its blocks go and nothing is preempted.
//  - The finished one admitted first: the other preempts itself, the step
//    would be empty, so the finished one is freed and the step scheduled
//    again, recomputing the other (the engine needs Schedule() false only
//    when no work is left; the first version aborted here).
TEST(SchedulerTest, AsyncFinishedRequestIsAVictimAndAnEmptyStepReschedules) {
  for (const bool finished_last : {true, false}) {
    SchedulerConfig c = Cfg(1000);
    c.async_scheduling = true;
    auto s = Scheduler::Create(c, Pool(10)).value();
    Recorder rec;
    if (finished_last) {
      s->Add(Req(1, 80, 10), 0, 0);
      s->Add(Req(0, 80, 1), 0, 1);
    } else {
      s->Add(Req(0, 80, 1), 0, 0);
      s->Add(Req(1, 80, 10), 0, 1);
    }
    ASSERT_TRUE(s->Schedule(0));
    s->Complete(1, rec);
    ASSERT_EQ(rec.finished, std::vector<RequestId>{0});
    ASSERT_EQ(s->num_finishing(), 1);
    EXPECT_EQ(s->kv().num_used_blocks(), 10);
    ASSERT_TRUE(s->Schedule(1)) << "finished_last " << finished_last;
    EXPECT_EQ(s->num_finishing(), 0);
    EXPECT_EQ(s->batch_num_seqs(), 1);
    EXPECT_EQ(s->step_preemptions(), finished_last ? 0 : 1);
    // The other request: a decode, or (preempted) its 81 tokens again.
    EXPECT_EQ(s->scheduled_tokens()[0], finished_last ? 1 : 81);
  }
}

TEST(SchedulerTest, MaxNumSeqsCapsRunningRequests) {
  auto s = Scheduler::Create(Cfg(10000, /*max_seqs=*/2), Pool(1000)).value();
  Recorder rec;
  for (int i = 0; i < 5; ++i) s->Add(Req(i, 10, 3), 0, i);
  ASSERT_TRUE(s->Schedule(0));
  EXPECT_EQ(s->batch_num_seqs(), 2);
  EXPECT_EQ(s->num_running(), 2);
  s->Complete(1, rec);
  ASSERT_TRUE(s->Schedule(1));
  EXPECT_EQ(s->batch_num_seqs(), 2);  // still capped
}

TEST(SchedulerTest, AdmissionTakesThePrefixHit) {
  auto s = Scheduler::Create(Cfg(10000, 256, /*caching=*/true), Pool(1000)).value();
  Recorder rec;
  RequestSpec a = Req(0, 64, 2);
  a.prefix_hashes = {1, 2, 3, 4};
  a.hash_block_tokens = 16;
  RequestSpec b = a;
  b.id = 1;
  s->Add(a, 0, 0);
  ASSERT_TRUE(s->Schedule(0));
  s->Complete(1, rec);
  const int32_t sb = s->Add(b, 1, 1);
  ASSERT_TRUE(s->Schedule(1));
  EXPECT_EQ(s->request(sb).prefix_hit_tokens, 48);
  // B computes only 16 tokens, attending to the 48 cached ones.
  ASSERT_EQ(s->batch().prefills.size(), 1u);
  EXPECT_EQ(s->batch().prefills[0].num_tokens, 16);
  EXPECT_EQ(s->batch().prefills[0].num_computed_before, 48);
}

// An earlier benchmark's prompts, replayed into one scheduler's cache, are
// hit by another scheduler that starts from a copy of that cache.
TEST(SchedulerTest, WarmedKvCacheCopyIsHitByTheSamePrompt) {
  auto warm = Scheduler::Create(Cfg(32, 256, /*caching=*/true), Pool(1000)).value();
  RequestSpec a = Req(0, 64, 2);
  a.prefix_hashes = {1, 2, 3, 4};
  a.hash_block_tokens = 16;
  warm->WarmPrefixCache(std::vector<RequestSpec>{a});
  EXPECT_EQ(warm->kv().num_used_blocks(), 0);
  EXPECT_GE(warm->kv().num_cached_blocks(), 4);

  auto s = Scheduler::Create(Cfg(10000, 256, /*caching=*/true), Pool(1000)).value();
  ASSERT_TRUE(s->StartFromKvCache(warm->kv()).ok());
  RequestSpec b = a;
  b.id = 1;
  const int32_t sb = s->Add(b, 0, 0);
  ASSERT_TRUE(s->Schedule(0));
  EXPECT_EQ(s->request(sb).prefix_hit_tokens, 48);
  EXPECT_EQ(s->batch().prefills[0].num_tokens, 16);

  // A cold scheduler computes the whole prompt.
  auto cold = Scheduler::Create(Cfg(10000, 256, /*caching=*/true), Pool(1000)).value();
  const int32_t sc = cold->Add(b, 0, 0);
  ASSERT_TRUE(cold->Schedule(0));
  EXPECT_EQ(cold->request(sc).prefix_hit_tokens, 0);
}

TEST(SchedulerTest, StartFromKvCacheRejectsAnotherSpecOrSetting) {
  auto warm = Scheduler::Create(Cfg(32, 256, /*caching=*/true), Pool(1000)).value();
  auto smaller = Scheduler::Create(Cfg(32, 256, /*caching=*/true), Pool(999)).value();
  const absl::Status st = smaller->StartFromKvCache(warm->kv());
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("1000 blocks"), std::string::npos) << st;
  auto off = Scheduler::Create(Cfg(32, 256, /*caching=*/false), Pool(1000)).value();
  EXPECT_FALSE(off->StartFromKvCache(warm->kv()).ok());
}

TEST(SchedulerTest, RequestsThatCanNeverFitAreRejectedWithAReason) {
  SchedulerConfig c = Cfg(1000);
  c.max_model_len = 200;
  auto s = Scheduler::Create(c, Pool(10)).value();
  EXPECT_EQ(s->CheckFits(Req(0, 150, 51)), RejectReason::kExceedsMaxModelLen);
  EXPECT_EQ(s->CheckFits(Req(0, 150, 50)),
            RejectReason::kExceedsKvCache);                       // 199 tokens: 13 blocks
  EXPECT_EQ(s->CheckFits(Req(0, 100, 61)), RejectReason::kNone);  // 160 tokens: 10 blocks
  EXPECT_EQ(s->CheckFits(Req(0, 100, 62)),
            RejectReason::kExceedsKvCache);  // 161: 11 blocks
  EXPECT_EQ(s->CheckFits(Req(0, 0, 5)), RejectReason::kInvalidLengths);
  EXPECT_EQ(RejectReasonName(RejectReason::kExceedsKvCache), "exceeds_kv_cache");
}

}  // namespace
}  // namespace servesim
