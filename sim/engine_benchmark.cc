// Simulator speed: a 100,000-request closed loop (concurrency 64, 1024 in /
// 128 out, analytic step model, E2B-like hybrid KV spec: one full group of
// 16-token blocks and four sliding groups of 32-token blocks, window 512).
// Reports simulated requests/s (items) and engine steps/s (counter).
// BM_PrefixHitWarm: the prefix-cache lookup a reused-seed bench cell makes
// at each admission (KvCache::FindPrefixHit on a cache warmed with the
// same prompts, every block a hit), per prompt length.
// BM_MultiTurnChats: 100,000 turns of 4-turn chats replayed open loop on
// the same spec with prefix caching: each turn repeats the previous prompt
// and its hashed answer (RequestSpec::hashed_output_tokens), and a turn
// waits for its previous one (the engine's session gate).
#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "benchmark/benchmark.h"
#include "sim/analytic_step_model.h"
#include "sim/engine.h"
#include "sim/kv_cache.h"
#include "sim/random_source.h"
#include "sim/scheduler.h"
#include "sim/vector_source.h"

namespace servesim {
namespace {

KvCacheSpec E2bLikeSpec() {
  KvCacheSpec s;
  s.num_blocks = 100'000;
  s.groups.push_back(KvGroupSpec{16, 0, 3});
  for (int i = 0; i < 4; ++i) s.groups.push_back(KvGroupSpec{32, 512, 3});
  return s;
}

// The analytic step model every engine benchmark runs (host 2 ms + 5 us a
// sequence; device 6 ms + 15 us a token + 2 ns a context token).
AnalyticStepParams BenchStepParams() {
  AnalyticStepParams p;
  p.host_base_ns = 2'000'000;
  p.host_per_seq_ns = 5'000;
  p.device_base_ns = 6'000'000;
  p.device_per_token_ns = 15'000;
  p.device_per_context_token_ns = 2;
  return p;
}

// One replica: 256 sequences, 8,192 batched tokens, async scheduling, the
// E2B-like spec.
std::vector<ReplicaConfig> BenchReplica(const StepTimeModel* model, bool caching) {
  std::vector<ReplicaConfig> reps(1);
  reps[0].scheduler.max_num_seqs = 256;
  reps[0].scheduler.max_num_batched_tokens = 8192;
  reps[0].scheduler.max_model_len = 32768;
  reps[0].scheduler.enable_prefix_caching = caching;
  reps[0].scheduler.async_scheduling = true;
  reps[0].kv_cache = E2bLikeSpec();
  reps[0].step_model = model;
  return reps;
}

void BM_ClosedLoop(benchmark::State& state) {
  const bool caching = state.range(0) != 0;
  const int64_t num_prompts = state.range(1);
  const AnalyticStepModel model(BenchStepParams());
  int64_t requests = 0, steps = 0;
  for (auto _ : state) {
    std::vector<ReplicaConfig> reps = BenchReplica(&model, caching);
    ClientConfig cc;
    cc.max_concurrency = 64;
    auto e =
        Engine::Create(std::move(reps), std::make_unique<RoundRobinRouter>(), cc).value();
    RandomDatasetConfig dc;
    dc.num_prompts = num_prompts;
    dc.input_len = 1024;
    dc.output_len = 128;
    auto src = RandomSource::Create(dc).value();
    if (!e->Run(src.get()).ok()) state.SkipWithError("run failed");
    const RunResult r = e->Result();
    requests += r.completed;
    steps += r.num_steps;
    benchmark::DoNotOptimize(r.output_throughput);
  }
  state.SetItemsProcessed(requests);
  state.counters["steps_per_s"] =
      benchmark::Counter(static_cast<double>(steps), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_ClosedLoop)
    ->ArgNames({"prefix_caching", "num_prompts"})
    ->Args({0, 100'000})
    ->Args({1, 100'000})
    ->Unit(benchmark::kMillisecond);

void BM_PrefixHitWarm(benchmark::State& state) {
  const int32_t input_tokens = static_cast<int32_t>(state.range(0));
  constexpr int kPrompts = 64;
  constexpr int32_t kHashBlock = 16;
  std::vector<RequestSpec> prompts(kPrompts);
  uint64_t x = 0x9e3779b97f4a7c15ULL;
  for (int i = 0; i < kPrompts; ++i) {
    prompts[i].id = i;
    prompts[i].input_tokens = input_tokens;
    prompts[i].output_tokens = 1;
    prompts[i].hash_block_tokens = kHashBlock;
    for (int32_t b = 0; b < input_tokens / kHashBlock; ++b) {
      x = x * 6364136223846793005ULL + 1442695040888963407ULL;
      prompts[i].prefix_hashes.push_back(x | 1);
    }
  }
  SchedulerConfig sc;
  sc.max_num_batched_tokens = 8192;
  sc.max_model_len = 32768;
  KvCacheSpec spec = E2bLikeSpec();
  spec.num_blocks = 1'000'000;
  auto warm = Scheduler::Create(sc, spec).value();
  warm->WarmPrefixCache(prompts);
  std::unique_ptr<KvCache> kv = warm->kv().Clone();
  int64_t lookups = 0, hit_tokens = 0;
  for (auto _ : state) {
    for (const RequestSpec& r : prompts) {
      const KvRequestView v{r.id, r.input_tokens, r.prefix_hashes, r.hash_block_tokens};
      hit_tokens += kv->FindPrefixHit(v, r.input_tokens, /*may_have_unique_hits=*/false);
      ++lookups;
    }
  }
  if (hit_tokens / lookups < input_tokens - 2 * kHashBlock) {
    state.SkipWithError("the warmed prompts do not hit");
  }
  state.SetItemsProcessed(lookups);
}
BENCHMARK(BM_PrefixHitWarm)->ArgNames({"input_len"})->Arg(1024)->Arg(8192);

// 25,000 chats of 4 turns (100 new tokens, 128-token answers, 16-token
// hash blocks), chats starting 20 per second, a turn 5 s after the last.
std::vector<RequestSpec> MultiTurnChats() {
  constexpr int kChats = 25'000, kTurns = 4, kNew = 100, kAnswer = 128, kBlock = 16;
  std::vector<RequestSpec> turns;
  turns.reserve(size_t{kChats} * kTurns);
  for (int c = 0; c < kChats; ++c) {
    int32_t context = 0;
    for (int t = 0; t < kTurns; ++t) {
      RequestSpec r;
      r.session_id = c;
      r.arrival_ns = TimeNs{c} * (kNsPerSec / 20) + TimeNs{t} * 5 * kNsPerSec;
      r.input_tokens = context + kNew;
      r.output_tokens = kAnswer;
      r.hashed_output_tokens = t + 1 < kTurns ? kAnswer : 0;
      r.hash_block_tokens = kBlock;
      uint64_t h = 0x5eedULL;
      for (int b = 0; b < (r.input_tokens + r.hashed_output_tokens) / kBlock; ++b) {
        h = h * 0x9E3779B97F4A7C15ULL + ((static_cast<uint64_t>(c) << 20) | b) + 1;
        r.prefix_hashes.push_back(h | 1);
      }
      context = r.input_tokens + kAnswer;
      turns.push_back(std::move(r));
    }
  }
  std::stable_sort(turns.begin(), turns.end(),
                   [](const RequestSpec& a, const RequestSpec& b) {
                     return a.arrival_ns < b.arrival_ns;
                   });
  for (size_t i = 0; i < turns.size(); ++i) turns[i].id = static_cast<RequestId>(i);
  return turns;
}

void BM_MultiTurnChats(benchmark::State& state) {
  const AnalyticStepModel model(BenchStepParams());
  const std::vector<RequestSpec> turns = MultiTurnChats();
  int64_t requests = 0, steps = 0, hit_tokens = 0;
  for (auto _ : state) {
    std::vector<ReplicaConfig> reps = BenchReplica(&model, /*caching=*/true);
    ClientConfig cc;
    cc.replay_arrivals = true;
    auto e =
        Engine::Create(std::move(reps), std::make_unique<RoundRobinRouter>(), cc).value();
    VectorSource src(turns);
    if (!e->Run(&src).ok()) state.SkipWithError("run failed");
    const RunResult r = e->Result();
    requests += r.completed;
    steps += r.num_steps;
    for (const RequestRecord& rec : e->records()) hit_tokens += rec.prefix_hit_tokens;
  }
  if (hit_tokens == 0) state.SkipWithError("no prefix hit");
  state.SetItemsProcessed(requests);
  state.counters["steps_per_s"] =
      benchmark::Counter(static_cast<double>(steps), benchmark::Counter::kIsRate);
  state.counters["hit_tokens_per_request"] =
      static_cast<double>(hit_tokens) /
      static_cast<double>(std::max<int64_t>(1, requests));
}
BENCHMARK(BM_MultiTurnChats)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace servesim
