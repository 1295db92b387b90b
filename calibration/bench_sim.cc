#include "calibration/bench_sim.h"

#include <cmath>
#include <memory>
#include <vector>

#include "absl/strings/str_format.h"
#include "sim/engine.h"
#include "sim/random_source.h"
#include "sim/router.h"
#include "sim/status_macros.h"

namespace servesim {

absl::StatusOr<BenchCellResult> SimulateBenchCell(const SchedulerConfig& scheduler,
                                                  const KvCacheSpec& kv_cache,
                                                  const StepTimeModel& model,
                                                  const BenchCell& cell) {
  if (cell.max_concurrency < 1 || cell.num_prompts < 1 || cell.input_tokens < 1 ||
      cell.output_tokens < 1 || !(cell.client_overhead_s >= 0)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("bench cell: max_concurrency %d, num_prompts %d, input_tokens "
                        "%d, output_tokens %d must "
                        "be >= 1 and client_overhead_s %g >= 0",
                        cell.max_concurrency, cell.num_prompts, cell.input_tokens,
                        cell.output_tokens, cell.client_overhead_s));
  }
  RandomDatasetConfig data;
  data.num_prompts = cell.num_prompts;
  data.input_len = cell.input_tokens;
  data.output_len = cell.output_tokens;
  data.range_ratio = 0;
  ASSIGN_OR_RETURN(std::unique_ptr<RandomSource> source, RandomSource::Create(data));

  ClientConfig client;
  client.max_concurrency = cell.max_concurrency;
  client.client_overhead_ns =
      static_cast<TimeNs>(std::llround(cell.client_overhead_s * 1e9));
  ReplicaConfig replica;
  replica.scheduler = scheduler;
  replica.kv_cache = kv_cache;
  replica.step_model = &model;
  replica.description = "calibration bench cell";
  std::vector<ReplicaConfig> replicas;
  replicas.push_back(std::move(replica));
  ASSIGN_OR_RETURN(std::unique_ptr<Router> router, MakeRouter("round-robin"));
  EngineOptions options;
  options.itl_exact_cap = 1 << 20;
  ASSIGN_OR_RETURN(
      std::unique_ptr<Engine> engine,
      Engine::Create(std::move(replicas), std::move(router), client, options));
  RETURN_IF_ERROR(engine->Run(source.get()));
  const RunResult r = engine->Result();

  BenchCellResult out;
  if (r.completed == 0) {
    out.feasible = false;
    std::string why = "no request completed";
    for (int k = 0; k < kNumRejectReasons; ++k) {
      if (r.rejected_by_reason[k] > 0) {
        why = absl::StrFormat("the simulated server rejects every request (%s)",
                              RejectReasonName(static_cast<RejectReason>(k)));
      }
    }
    out.infeasible_reason =
        absl::StrFormat("%s: %d input + %d output tokens, max_model_len %d", why,
                        cell.input_tokens, cell.output_tokens, scheduler.max_model_len);
    return out;
  }
  out.duration_s = r.duration_s;
  out.output_throughput = r.output_throughput;
  out.total_throughput = r.total_token_throughput;
  out.mean_ttft_ms = r.ttft.mean_ms;
  out.median_ttft_ms = r.ttft.median_ms;
  out.mean_tpot_ms = r.tpot.mean_ms;
  out.median_tpot_ms = r.tpot.median_ms;
  out.median_e2el_ms = r.e2el.median_ms;
  out.num_steps = r.num_steps;
  out.num_preemptions = r.preemptions;
  return out;
}

}  // namespace servesim
