#include "calibration/bench_sim.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "sim/base/status_macros.h"
#include "sim/engine.h"
#include "sim/random_source.h"
#include "sim/scheduler.h"
#include "sim/simulation.h"
#include "sim/vector_source.h"
#include "traces/synthetic.h"

namespace servesim {

int32_t BenchCell::max_input() const {
  int32_t m = input_tokens;
  if (!input_lens.empty()) m = *std::max_element(input_lens.begin(), input_lens.end());
  return m;
}

int32_t BenchCell::max_output() const {
  int32_t m = output_tokens;
  if (!output_lens.empty()) m = *std::max_element(output_lens.begin(), output_lens.end());
  return m;
}

absl::Status ValidateBenchCell(const BenchCell& cell) {
  const bool open = cell.open_loop();
  if (cell.max_concurrency < (open ? 0 : 1) || cell.num_prompts < 1 ||
      cell.input_tokens < 1 || cell.output_tokens < 1 || !(cell.client_overhead_s >= 0)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "bench cell: max_concurrency %d (>= %d), num_prompts %d, input_tokens %d, "
        "output_tokens %d (>= 1) and client_overhead_s %g (>= 0) out of range",
        cell.max_concurrency, open ? 0 : 1, cell.num_prompts, cell.input_tokens,
        cell.output_tokens, cell.client_overhead_s));
  }
  if (!(cell.api_overhead_ms >= 0 && cell.api_overhead_ms <= 1e6)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "bench cell: api_overhead_ms %g out of range [0, 1e6]", cell.api_overhead_ms));
  }
  if (!(cell.request_rate > 0) || !(cell.burstiness > 0) || std::isinf(cell.burstiness)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("bench cell: request_rate %g must be > 0 (inf: closed loop) and "
                        "burstiness %g in (0, inf)",
                        cell.request_rate, cell.burstiness));
  }
  if (cell.input_lens.size() != cell.output_lens.size() ||
      (!cell.input_lens.empty() &&
       cell.input_lens.size() != static_cast<size_t>(cell.num_prompts))) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "bench cell: %d input_lens and %d output_lens for num_prompts %d (both empty, or "
        "both num_prompts long)",
        cell.input_lens.size(), cell.output_lens.size(), cell.num_prompts));
  }
  if (!cell.send_times_s.empty() && cell.send_times_s.size() != cell.input_lens.size()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("bench cell: %d send_times_s for %d input_lens (equal counts)",
                        cell.send_times_s.size(), cell.input_lens.size()));
  }
  for (size_t i = 0; i < cell.send_times_s.size(); ++i) {
    const double t = cell.send_times_s[i];
    if (!std::isfinite(t) || t < 0 || t > 1e9 ||
        (i > 0 && t < cell.send_times_s[i - 1])) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "bench cell: send_times_s[%d] = %g (allowed: finite, 0..1e9 s, nondecreasing)",
          i, t));
    }
  }
  if (!cell.unmeasured.empty() && cell.input_lens.empty()) {
    return absl::InvalidArgumentError(
        "bench cell: unmeasured requests need per-request input_lens/output_lens");
  }
  for (size_t k = 0; k < cell.unmeasured.size(); ++k) {
    const int32_t i = cell.unmeasured[k];
    if (i < 0 || static_cast<size_t>(i) >= cell.input_lens.size() ||
        (k > 0 && i <= cell.unmeasured[k - 1]) || cell.output_lens[i] != 1) {
      return absl::InvalidArgumentError(
          absl::StrFormat("bench cell: unmeasured[%d] = %d (allowed: strictly ascending "
                          "indexes in [0, %d) "
                          "of one-token requests)",
                          k, i, cell.input_lens.size()));
    }
  }
  if (!cell.unmeasured.empty() && cell.unmeasured.size() >= cell.input_lens.size()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "bench cell: %d of %d requests unmeasured (at least one must be measured)",
        cell.unmeasured.size(), cell.input_lens.size()));
  }
  for (size_t i = 0; i < cell.input_lens.size(); ++i) {
    if (cell.input_lens[i] < 1 || cell.output_lens[i] < 1) {
      return absl::InvalidArgumentError(
          absl::StrFormat("bench cell: request %d has %d input / %d output tokens (>= 1)",
                          i, cell.input_lens[i], cell.output_lens[i]));
    }
  }
  if (cell.reused_prompt_seed && !cell.input_lens.empty()) {
    return absl::InvalidArgumentError(
        "bench cell: reused_prompt_seed needs fixed lengths (input_lens empty)");
  }
  if (!cell.reused_prompt_seed && !cell.earlier_cells.empty()) {
    return absl::InvalidArgumentError(
        "bench cell: earlier_cells are only replayed with reused_prompt_seed");
  }
  for (size_t k = 0; k < cell.earlier_cells.size(); ++k) {
    const BenchCell::EarlierCell& e = cell.earlier_cells[k];
    if (e.num_prompts < 1 || e.input_tokens < 1 || e.output_tokens < 1) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "bench cell: earlier_cells[%d] has num_prompts %d, input_tokens "
          "%d, output_tokens %d (each >= 1)",
          k, e.num_prompts, e.input_tokens, e.output_tokens));
    }
  }
  return absl::OkStatus();
}

namespace {

// The seed a reused-seed sweep drew its prompts with. Which value does not
// matter (only that every cell shares it); vllm bench serve's default.
constexpr uint64_t kReusedPromptSeed = 0;
// Tokens per prefix hash of those prompts: vLLM's default block size (the
// KV cache maps them onto its own block size).
constexpr int32_t kPromptHashBlockTokens = 16;

// Prompt `index` of the reused seed, its content hashed over its first
// `hashed_tokens` tokens (the rest unique to the request, as RequestSpec
// reads a shorter hash list).
RequestSpec ReusedSeedPrompt(int64_t id, int32_t index, int32_t input_tokens,
                             int32_t output_tokens, int32_t hashed_tokens) {
  RequestSpec r;
  r.id = id;
  r.input_tokens = input_tokens;
  r.output_tokens = output_tokens;
  r.prefix_hashes = VllmRandomPromptHashes(kReusedPromptSeed, index,
                                           std::min(input_tokens, hashed_tokens),
                                           kPromptHashBlockTokens);
  r.hash_block_tokens = kPromptHashBlockTokens;
  return r;
}

// The earlier cells' requests in the order a closed loop of equal lengths
// finishes them (send order), ids after the cell's own.
std::vector<RequestSpec> EarlierCellRequests(const BenchCell& cell) {
  std::vector<RequestSpec> out;
  int64_t id = cell.num_prompts;
  for (const BenchCell::EarlierCell& e : cell.earlier_cells) {
    for (int32_t i = 0; i < e.num_prompts; ++i) {
      out.push_back(
          ReusedSeedPrompt(id++, i, e.input_tokens, e.output_tokens, e.input_tokens));
    }
  }
  return out;
}

// The cell's own requests. Its prompts are distinct from one another, so
// only the part of prompt i that an earlier cell also sent can ever hit:
// hashing just that part gives the same hits and evictions (the blocks past
// it are anonymous, in the same free-queue places) and skips the hash-map
// work of every block no other request shares.
std::vector<RequestSpec> ReusedSeedCellRequests(const BenchCell& cell) {
  std::vector<int32_t> shared_tokens(static_cast<size_t>(cell.num_prompts), 0);
  for (const BenchCell::EarlierCell& e : cell.earlier_cells) {
    const int32_t n = std::min(e.num_prompts, cell.num_prompts);
    for (int32_t i = 0; i < n; ++i) {
      shared_tokens[i] = std::max(shared_tokens[i], e.input_tokens);
    }
  }
  std::vector<RequestSpec> reqs;
  reqs.reserve(static_cast<size_t>(cell.num_prompts));
  for (int32_t i = 0; i < cell.num_prompts; ++i) {
    reqs.push_back(
        ReusedSeedPrompt(i, i, cell.input_tokens, cell.output_tokens, shared_tokens[i]));
  }
  return reqs;
}

absl::StatusOr<RunResult> RunOnce(const SchedulerConfig& scheduler,
                                  const KvCacheSpec& kv_cache, const StepTimeModel& model,
                                  const BenchCell& cell, uint64_t seed,
                                  std::shared_ptr<const KvCache> initial_kv_cache) {
  std::unique_ptr<RequestSource> source;
  if (cell.reused_prompt_seed) {
    source = std::make_unique<VectorSource>(ReusedSeedCellRequests(cell),
                                            "reused-seed random prompts");
  } else if (cell.input_lens.empty()) {
    RandomDatasetConfig data;
    data.num_prompts = cell.num_prompts;
    data.input_len = cell.input_tokens;
    data.output_len = cell.output_tokens;
    data.range_ratio = 0;
    data.seed = seed;
    ASSIGN_OR_RETURN(source, RandomSource::Create(data));
  } else {
    std::vector<RequestSpec> reqs(cell.input_lens.size());
    for (size_t i = 0; i < reqs.size(); ++i) {
      reqs[i].input_tokens = cell.input_lens[i];
      reqs[i].output_tokens = cell.output_lens[i];
      if (!cell.send_times_s.empty())
        reqs[i].arrival_ns =
            static_cast<TimeNs>(std::llround(cell.send_times_s[i] * 1e9));
    }
    // Unmeasured requests load the server and are in no metric: the
    // engine's ComputeRunResult leaves them out (RequestSpec::unmeasured).
    for (const int32_t i : cell.unmeasured) reqs[i].unmeasured = true;
    source = std::make_unique<VectorSource>(std::move(reqs), "measured lengths");
  }

  SimulationSpec spec;
  spec.client.max_concurrency = cell.max_concurrency;
  spec.client.request_rate = cell.request_rate;
  spec.client.burstiness = cell.burstiness;
  spec.client.seed = seed;
  spec.client.replay_arrivals = !cell.send_times_s.empty();
  spec.client.client_overhead_ns =
      static_cast<TimeNs>(std::llround(cell.client_overhead_s * 1e9));
  spec.api_overhead_ms = cell.api_overhead_ms;
  ReplicaConfig replica;
  replica.scheduler = scheduler;
  replica.kv_cache = kv_cache;
  replica.step_model = &model;
  replica.description = "calibration bench cell";
  spec.replicas.push_back(std::move(replica));
  spec.router = "round-robin";
  spec.options.itl_exact_cap = 1 << 20;
  spec.initial_kv_cache = std::move(initial_kv_cache);
  ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine,
                   Simulate(std::move(spec), source.get()));
  return engine->Result();
}

}  // namespace

absl::StatusOr<std::shared_ptr<const KvCache>> WarmKvCacheMemo::Get(
    const SchedulerConfig& scheduler, const KvCacheSpec& kv_cache,
    const BenchCell& cell) {
  SERVESIM_CHECK(cell.reused_prompt_seed);
  // Everything the state depends on, by value.
  std::string key =
      absl::StrCat(scheduler.max_num_batched_tokens, "/", scheduler.enable_prefix_caching,
                   "/", kv_cache.num_blocks);
  for (const KvGroupSpec& g : kv_cache.groups) {
    absl::StrAppend(&key, "/g", g.block_size_tokens, ",", g.sliding_window, ",",
                    g.num_layers);
  }
  for (const BenchCell::EarlierCell& e : cell.earlier_cells) {
    absl::StrAppend(&key, "/c", e.num_prompts, ",", e.input_tokens, ",", e.output_tokens);
  }
  // The state keeps only the keys this cell's prompts can hit.
  absl::StrAppend(&key, "/self", cell.num_prompts, ",", cell.input_tokens);
  {
    std::lock_guard<std::mutex> lock(mu_);
    const auto it = states_.find(key);
    if (it != states_.end()) return it->second;
  }
  // Built outside the lock (two threads may build the same state; both
  // builds are identical and the first stored wins).
  ASSIGN_OR_RETURN(std::unique_ptr<Scheduler> warm,
                   Scheduler::Create(scheduler, kv_cache));
  warm->WarmPrefixCache(EarlierCellRequests(cell));
  std::unique_ptr<KvCache> kept = warm->kv().Clone();
  const std::vector<RequestSpec> own = ReusedSeedCellRequests(cell);
  std::vector<KvRequestView> views;
  views.reserve(own.size());
  for (const RequestSpec& r : own) {
    views.push_back(
        KvRequestView{r.id, r.input_tokens, r.prefix_hashes, r.hash_block_tokens});
  }
  kept->RetainKeysOf(views);
  std::shared_ptr<const KvCache> state = std::move(kept);
  std::lock_guard<std::mutex> lock(mu_);
  return states_.emplace(std::move(key), std::move(state)).first->second;
}

absl::StatusOr<BenchCellResult> SimulateBenchCell(const SchedulerConfig& scheduler,
                                                  const KvCacheSpec& kv_cache,
                                                  const StepTimeModel& model,
                                                  const BenchCell& cell,
                                                  WarmKvCacheMemo* memo) {
  RETURN_IF_ERROR(ValidateBenchCell(cell));
  std::shared_ptr<const KvCache> initial_kv_cache;
  if (cell.reused_prompt_seed) {
    WarmKvCacheMemo local;
    ASSIGN_OR_RETURN(initial_kv_cache,
                     (memo != nullptr ? memo : &local)->Get(scheduler, kv_cache, cell));
  }
  // A closed loop of fixed lengths does not depend on the seed; an open
  // loop's arrivals do: average over several draws.
  const int draws =
      cell.open_loop() && cell.send_times_s.empty() ? kOpenLoopRealizations : 1;
  BenchCellResult out;
  for (int k = 0; k < draws; ++k) {
    // Draw seeds apart from servesim simulate's default seed 0, so a file it
    // wrote is not reproduced by one of the draws.
    ASSIGN_OR_RETURN(RunResult r, RunOnce(scheduler, kv_cache, model, cell,
                                          kOpenLoopSeedBase + k, initial_kv_cache));
    if (r.completed == 0) {
      out = BenchCellResult{};
      out.feasible = false;
      std::string why = "no request completed";
      for (int j = 0; j < kNumRejectReasons; ++j) {
        if (r.rejected_by_reason[j] > 0) {
          why = absl::StrFormat("the simulated server rejects every request (%s)",
                                RejectReasonName(static_cast<RejectReason>(j)));
        }
      }
      out.infeasible_reason = absl::StrFormat(
          "%s: %d input + %d output tokens%s, max_model_len %d", why, cell.max_input(),
          cell.max_output(), cell.input_lens.empty() ? "" : " (longest request)",
          scheduler.max_model_len);
      return out;
    }
    const double w = 1.0 / draws;
    out.duration_s += w * r.duration_s;
    out.output_throughput += w * r.output_throughput;
    out.total_throughput += w * r.total_token_throughput;
    out.mean_ttft_ms += w * r.ttft.mean_ms;
    out.median_ttft_ms += w * r.ttft.median_ms;
    out.p99_ttft_ms += w * r.ttft.p99_ms;
    out.median_itl_ms += w * r.itl.median_ms;
    out.p99_itl_ms += w * r.itl.p99_ms;
    out.mean_tpot_ms += w * r.tpot.mean_ms;
    out.median_tpot_ms += w * r.tpot.median_ms;
    out.median_e2el_ms += w * r.e2el.median_ms;
    out.num_steps += r.num_steps;
    out.num_preemptions += r.preemptions;
  }
  return out;
}

}  // namespace servesim
