// Cost of pricing one step with the compiled roofline formula.
#include <cstdint>
#include <vector>

#include "benchmark/benchmark.h"
#include "hwmodels/deployment.h"

namespace servesim {
namespace {

Deployment Make(const char* device, const char* model, const char* q) {
  ServerSpec s;
  s.device = device;
  s.model = model;
  s.quantization = q;
  s.max_model_len = 8192;
  return *BuildDeployment(s);
}

void BM_Decode64(benchmark::State& state) {
  const Deployment d = Make("mi300x", "gemma-4-e2b", "none");
  std::vector<int32_t> ctx(64);
  for (int i = 0; i < 64; ++i) ctx[i] = 128 + 37 * i;
  const StepBatch batch{{}, ctx};
  for (auto _ : state) benchmark::DoNotOptimize(d.step_model->Cost(batch));
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Decode64);

void BM_Mixed(benchmark::State& state) {
  const Deployment d = Make("t4", "gemma-4-12b", "w4a16-emb4");
  std::vector<int32_t> ctx(31);
  for (int i = 0; i < 31; ++i) ctx[i] = 1000 + 101 * i;
  const PrefillChunk pf[] = {{1500, 512}, {17, 0}};
  const StepBatch batch{pf, ctx};
  for (auto _ : state) benchmark::DoNotOptimize(d.step_model->Cost(batch));
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Mixed);

void BM_MoeMixed(benchmark::State& state) {
  const Deployment d = Make("mi300x", "gemma-4-26b-a4b", "none");
  std::vector<int32_t> ctx(64);
  for (int i = 0; i < 64; ++i) ctx[i] = 500 + 61 * i;
  const PrefillChunk pf[] = {{2048, 0}};
  const StepBatch batch{pf, ctx};
  for (auto _ : state) benchmark::DoNotOptimize(d.step_model->Cost(batch));
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_MoeMixed);

// What the fitter pays per parameter vector.
void BM_RebuildStepModel(benchmark::State& state) {
  const Deployment d = Make("t4", "gemma-4-12b", "w4a16-emb4");
  ParameterSet p = d.params;
  for (auto _ : state) {
    p.FindMutable("bw_eff_weights")->value += 1e-9;
    benchmark::DoNotOptimize(RebuildStepModel(d, p));
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_RebuildStepModel);

}  // namespace
}  // namespace servesim
