// One million requests of a real trace, end to end on one core: the Azure
// LLM inference conversation trace (19,366 requests) looped to 1,000,000
// and rate-scaled, replayed against Gemma 4 E2B on one MI300X (hwmodels
// roofline step model with the shipped calibration profile, vLLM V1
// scheduler, prefix caching on). Reports simulated requests/s and engine
// steps/s; peak RSS of the process is a counter (getrusage).
#include <sys/resource.h>

#include <string>

#include "benchmark/benchmark.h"
#include "experiments/runner/run_experiment.h"
#include "sim/engine.h"
#include "sim/router.h"
#include "traces/open_trace.h"

namespace servesim {
namespace {

double PeakRssMiB() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;  // ru_maxrss is KiB on Linux
}

void BM_AzureConvLoopedOneMillion(benchmark::State& state) {
  const int64_t num_requests = state.range(0);
  const double rate = static_cast<double>(state.range(1));
  proto::ExperimentConfig config;
  config.mutable_server()->set_device("mi300x");
  config.mutable_server()->set_model("gemma-4-e2b");
  config.mutable_server()->set_max_model_len(16384);
  absl::StatusOr<Fleet> fleet = BuildFleet(config);
  if (!fleet.ok()) {
    state.SkipWithError(std::string(fleet.status().message()).c_str());
    return;
  }
  int64_t steps = 0;
  int64_t completed = 0;
  for (auto _ : state) {
    TraceOptions t;
    t.path =
        std::string(SERVESIM_DATA_DIR) + "/traces/AzureLLMInferenceTrace_conv.csv.gz";
    t.target_rate_per_s = rate;
    t.loop_to_requests = num_requests;
    auto source = OpenTrace(t);
    if (!source.ok()) {
      state.SkipWithError(std::string(source.status().message()).c_str());
      return;
    }
    ClientConfig client;
    client.replay_arrivals = true;
    auto engine =
        Engine::Create(fleet->replicas, MakeRouter("round-robin").value(), client);
    if (!engine.ok()) {
      state.SkipWithError(std::string(engine.status().message()).c_str());
      return;
    }
    absl::Status st = (*engine)->Run(source->get());
    if (!st.ok()) {
      state.SkipWithError(std::string(st.message()).c_str());
      return;
    }
    const RunResult r = (*engine)->Result();
    completed += r.completed;
    steps += (*engine)->step_stats().num_steps();
    benchmark::DoNotOptimize(r);
  }
  state.SetItemsProcessed(completed);
  state.counters["steps_per_s"] =
      benchmark::Counter(static_cast<double>(steps), benchmark::Counter::kIsRate);
  state.counters["peak_rss_MiB"] = PeakRssMiB();
}
// {requests, target mean arrival rate (req/s)}
// 100k beside 1M shows the cost per request does not grow with the run.
BENCHMARK(BM_AzureConvLoopedOneMillion)
    ->Args({100'000, 20})
    ->Args({1'000'000, 20})
    ->Unit(benchmark::kSecond)
    ->Iterations(1)
    ->UseRealTime();

}  // namespace
}  // namespace servesim
