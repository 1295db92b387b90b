// Simulates one benchmark cell "the way it was measured": a closed loop of
// `max_concurrency` client streams, or an open loop at `request_rate`,
// sending `num_prompts` requests of fixed lengths or of the measured
// per-request lengths (ignore_eos: exactly those outputs, every prompt
// unique) to one replica built from the real sim/ scheduler and KV cache
// and a StepTimeModel, and computes the numbers `vllm bench serve` reports
// (TTFT from send, TPOT = (latency - TTFT) / (out - 1), output throughput
// = output tokens / (last finish - first send)).
// A fixed client-side cost per call (write-up A's CLI process) delays each
// request's arrival at the server and counts in its latency.
// The run itself is Simulate (sim/simulation.h), the pipeline simulate,
// sweep and plan run: this file only chooses its inputs (the cell's
// request source and client, several arrival draws, unmeasured requests).
// Deterministic; O(steps x batch). Thread-compatible.
#ifndef SERVESIM_CALIBRATION_BENCH_SIM_H_
#define SERVESIM_CALIBRATION_BENCH_SIM_H_

#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "sim/kv_cache.h"
#include "sim/server_config.h"
#include "sim/step_time_model.h"

namespace servesim {

struct BenchCell {
  int32_t max_concurrency = 1;  // 0: no limit (open loop only)
  int32_t num_prompts = 8;
  int32_t input_tokens = 128;
  int32_t output_tokens = 128;
  double client_overhead_s = 0;
  // The API server's latency per request (the profile's api_overhead_ms),
  // added to the client overhead by Simulate (sim/simulation.h) exactly as
  // `servesim simulate` adds it.
  double api_overhead_ms = 0;
  // +inf: closed loop (all requests at once, max_concurrency in flight).
  // Finite: open loop with Gamma gaps of shape `burstiness`; the metrics
  // are then the mean over kOpenLoopRealizations arrival draws (seeds
  // kOpenLoopSeedBase, +1, ...), since the measured run's own draw is not
  // in its result file (unless send_times_s replays it).
  double request_rate = std::numeric_limits<double>::infinity();
  double burstiness = 1;
  // Per-request lengths in send order (both empty, or both num_prompts
  // long, every entry >= 1); empty: input_tokens / output_tokens each.
  std::vector<int32_t> input_lens, output_lens;
  // With input_lens: the measured send times (s after the first,
  // nondecreasing), replayed exactly (one run, no arrival draws).
  std::vector<double> send_times_s;
  // With input_lens: indexes (strictly ascending, each with output_lens 1)
  // of requests that load the server but are left out of the metrics
  // (ClientMethod.unmeasured: a result file's requests that streamed no
  // token). Their output tokens count in no throughput.
  std::vector<int32_t> unmeasured;
  // A sweep that reused one prompt seed for every cell (ServerRun
  // sweep_reuses_prompt_seed): prompt i of this cell is prompt i of
  // vLLM's random dataset at that seed (VllmRandomPromptHashes,
  // traces/synthetic.h), and `earlier_cells`, the cells the sweep ran
  // before this one on the same server, in order, pass through the prefix
  // cache first (Scheduler::WarmPrefixCache; the cell starts from that
  // state, SimulationSpec::initial_kv_cache), so the prompts they share with
  // this cell hit. Fixed lengths only (input_lens empty).
  // false: every prompt unique, the cache cold.
  bool reused_prompt_seed = false;
  struct EarlierCell {
    int32_t num_prompts = 0;
    int32_t input_tokens = 0;
    int32_t output_tokens = 0;
  };
  std::vector<EarlierCell> earlier_cells;

  bool open_loop() const { return std::isfinite(request_rate); }
  int32_t max_input() const;
  int32_t max_output() const;
};

inline constexpr int kOpenLoopRealizations = 3;
inline constexpr uint64_t kOpenLoopSeedBase = 1000;  // draws use seeds 1000, 1001, ...

struct BenchCellResult {
  // False when the server rejects the cell's requests (e.g. input + output
  // > max_model_len); the reason says why, with numbers. Metrics are 0.
  bool feasible = true;
  std::string infeasible_reason;
  double duration_s = 0;
  double output_throughput = 0;  // tok/s
  double total_throughput = 0;   // (input + output) tok/s
  double mean_ttft_ms = 0, median_ttft_ms = 0, p99_ttft_ms = 0;
  double mean_tpot_ms = 0, median_tpot_ms = 0;
  double median_itl_ms = 0, p99_itl_ms = 0;
  double median_e2el_ms = 0;
  int64_t num_steps = 0;
  int64_t num_preemptions = 0;
};

// OK, or InvalidArgument naming the field and its allowed range: counts and
// lengths >= 1 (max_concurrency >= 0 for an open loop), request_rate > 0,
// burstiness in (0, inf), api_overhead_ms in [0, 1e6], per-request arrays of num_prompts
// entries, send times finite and nondecreasing, unmeasured indexes ascending, in range,
// each a one-token request, and fewer than num_prompts; reused_prompt_seed
// only with fixed lengths, earlier_cells only with it, each count >= 1.
absl::Status ValidateBenchCell(const BenchCell& cell);

// The KV cache state a reused-seed cell starts from: a fresh cache of
// `kv_cache` after BenchCell::earlier_cells ran through it (each prompt
// alone, in send order, Scheduler::WarmPrefixCache). It depends on the
// scheduler's chunk size and prefix-caching setting, the KV spec and the
// earlier cells, not on the step-time model, so a fit that simulates a
// cell under many parameter values builds it once: the memo keeps each
// distinct state for its lifetime. The state keeps only the prefix-cache
// keys the cell's own prompts can hit (KvCache::RetainKeysOf: same result,
// and a copy costs what those keys cost), so it is kept per cell (its
// num_prompts and input_tokens are in the memo's key). Thread-safe.
class WarmKvCacheMemo {
 public:
  // Errors: those of Scheduler::Create. REQUIRES: cell.reused_prompt_seed.
  absl::StatusOr<std::shared_ptr<const KvCache>> Get(const SchedulerConfig& scheduler,
                                                     const KvCacheSpec& kv_cache,
                                                     const BenchCell& cell);

 private:
  std::mutex mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<const KvCache>> states_;
};

// Errors: ValidateBenchCell's, Scheduler::Create's. `memo`: where
// reused-seed cells take their starting KV state from (built here when
// null; the result is the same).
absl::StatusOr<BenchCellResult> SimulateBenchCell(const SchedulerConfig& scheduler,
                                                  const KvCacheSpec& kv_cache,
                                                  const StepTimeModel& model,
                                                  const BenchCell& cell,
                                                  WarmKvCacheMemo* memo = nullptr);

}  // namespace servesim

#endif  // SERVESIM_CALIBRATION_BENCH_SIM_H_
