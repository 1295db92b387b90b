// Simulator speed: a 100,000-request closed loop (concurrency 64, 1024 in /
// 128 out, analytic step model, E2B-like hybrid KV spec: one full group of
// 16-token blocks and four sliding groups of 32-token blocks, window 512).
// Reports simulated requests/s (items) and engine steps/s (counter).
#include <memory>
#include <vector>

#include "benchmark/benchmark.h"
#include "sim/analytic_step_model.h"
#include "sim/engine.h"
#include "sim/random_source.h"

namespace servesim {
namespace {

KvCacheSpec E2bLikeSpec() {
  KvCacheSpec s;
  s.num_blocks = 100'000;
  s.groups.push_back(KvGroupSpec{16, 0, 3});
  for (int i = 0; i < 4; ++i) s.groups.push_back(KvGroupSpec{32, 512, 3});
  return s;
}

void BM_ClosedLoop(benchmark::State& state) {
  const bool caching = state.range(0) != 0;
  const int64_t num_prompts = state.range(1);
  AnalyticStepParams p;
  p.host_base_ns = 2'000'000;
  p.host_per_seq_ns = 5'000;
  p.device_base_ns = 6'000'000;
  p.device_per_token_ns = 15'000;
  p.device_per_context_token_ns = 2;
  AnalyticStepModel model(p);
  int64_t requests = 0, steps = 0;
  for (auto _ : state) {
    std::vector<ReplicaConfig> reps(1);
    reps[0].scheduler.max_num_seqs = 256;
    reps[0].scheduler.max_num_batched_tokens = 8192;
    reps[0].scheduler.max_model_len = 32768;
    reps[0].scheduler.enable_prefix_caching = caching;
    reps[0].scheduler.async_scheduling = true;
    reps[0].kv_cache = E2bLikeSpec();
    reps[0].step_model = &model;
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

}  // namespace
}  // namespace servesim
