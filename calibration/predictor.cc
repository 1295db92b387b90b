#include "calibration/predictor.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>

#include "absl/strings/str_format.h"
#include "calibration/bench_sim.h"
#include "sim/base/status_macros.h"

namespace servesim {
namespace {

using servesim::proto::ClientMethod;
using servesim::proto::Measurement;
using servesim::proto::ServerRun;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

struct CellKey {
  std::string run;
  int kind = 0;  // ClientMethod::Kind: the parallel-batch client adds its own cost
  BenchCell cell;
  auto Tie() const {
    return std::tie(run, kind, cell.max_concurrency, cell.num_prompts, cell.input_tokens,
                    cell.output_tokens, cell.client_overhead_s, cell.request_rate,
                    cell.burstiness, cell.input_lens, cell.output_lens, cell.send_times_s,
                    cell.unmeasured);
  }
  bool operator<(const CellKey& o) const { return Tie() < o.Tie(); }
};

double PriceOf(const Measurement& m, const ServerRun& run) {
  return m.price_usd_per_hour() > 0 ? m.price_usd_per_hour() : run.price_usd_per_hour();
}

// The cells a measurement needs (0, 1 or 2).
std::vector<CellKey> CellsOf(const Measurement& m) {
  const ClientMethod& c = m.client();
  std::vector<CellKey> cells;
  switch (c.kind()) {
    case ClientMethod::BENCH_SERVE_CLOSED_LOOP:
    case ClientMethod::BENCH_SERVE_OPEN_LOOP:
    case ClientMethod::SAGEMAKER_PARALLEL_BATCH: {
      BenchCell b;
      b.max_concurrency = c.max_concurrency();
      b.num_prompts =
          c.num_prompts() > 0 ? c.num_prompts() : std::max(8, 2 * c.max_concurrency());
      b.input_tokens = c.input_tokens();
      b.output_tokens = c.output_tokens();
      b.client_overhead_s = c.client_overhead_s();
      if (c.kind() == ClientMethod::BENCH_SERVE_OPEN_LOOP) {
        b.request_rate = c.request_rate();
        b.burstiness = c.burstiness() == 0 ? 1.0 : c.burstiness();  // 0: unset
      }
      b.input_lens.assign(c.input_lens().begin(), c.input_lens().end());
      b.output_lens.assign(c.output_lens().begin(), c.output_lens().end());
      b.send_times_s.assign(c.send_times_s().begin(), c.send_times_s().end());
      b.unmeasured.assign(c.unmeasured().begin(), c.unmeasured().end());
      if (!b.input_lens.empty())
        b.num_prompts = static_cast<int32_t>(b.input_lens.size());
      cells.push_back({m.run(), c.kind(), b});
      break;
    }
    case ClientMethod::SAGEMAKER_DECODE_RATE:
      for (int32_t out : {c.short_output_tokens(), c.long_output_tokens()}) {
        BenchCell b;
        b.max_concurrency = 1;
        b.num_prompts = 1;
        b.input_tokens = c.input_tokens();
        b.output_tokens = out;
        b.client_overhead_s = c.client_overhead_s();
        cells.push_back({m.run(), c.kind(), b});
      }
      break;
    default:
      break;
  }
  return cells;
}

absl::Status CheckMethod(const Measurement& m) {
  using servesim::proto::Metric;
  const auto kind = m.client().kind();
  const Metric metric = m.metric();
  bool ok = false;
  switch (kind) {
    case ClientMethod::BENCH_SERVE_CLOSED_LOOP:
    case ClientMethod::BENCH_SERVE_OPEN_LOOP:
      ok = metric == servesim::proto::OUTPUT_THROUGHPUT ||
           metric == servesim::proto::TOTAL_THROUGHPUT ||
           metric == servesim::proto::MEDIAN_TTFT_MS ||
           metric == servesim::proto::MEDIAN_TPOT_MS ||
           metric == servesim::proto::MEAN_TTFT_MS ||
           metric == servesim::proto::P99_TTFT_MS ||
           metric == servesim::proto::MEAN_TPOT_MS ||
           metric == servesim::proto::MEDIAN_ITL_MS ||
           metric == servesim::proto::P99_ITL_MS ||
           metric == servesim::proto::TOK_S_PER_USD_HOUR ||
           metric == servesim::proto::COST_PER_MTOK;
      break;
    case ClientMethod::SAGEMAKER_PARALLEL_BATCH:
      ok = metric == servesim::proto::OUTPUT_THROUGHPUT ||
           metric == servesim::proto::TOK_S_PER_USD_HOUR ||
           metric == servesim::proto::COST_PER_MTOK;
      break;
    case ClientMethod::SAGEMAKER_DECODE_RATE:
      ok = metric == servesim::proto::DECODE_RATE &&
           m.client().long_output_tokens() > m.client().short_output_tokens() &&
           m.client().short_output_tokens() > 0;
      break;
    case ClientMethod::SERVER_LOG:
      ok = metric == servesim::proto::KV_CAPACITY_TOKENS ||
           metric == servesim::proto::KV_MAX_CONCURRENCY ||
           metric == servesim::proto::FITS_IN_MEMORY;
      break;
    default:
      break;
  }
  if (!ok) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "measurement '%s': metric %s cannot be predicted from client method %s", m.id(),
        MetricName(metric), ClientMethod::Kind_Name(kind)));
  }
  // The cells it simulates: one check, shared with SimulateBenchCell.
  if (kind == ClientMethod::BENCH_SERVE_OPEN_LOOP &&
      (!(m.client().request_rate() > 0) || std::isinf(m.client().request_rate()))) {
    return absl::InvalidArgumentError(
        absl::StrFormat("measurement '%s': open loop needs client request_rate in (0, "
                        "inf), is %g",
                        m.id(), m.client().request_rate()));
  }
  for (const CellKey& key : CellsOf(m)) {
    if (absl::Status st = ValidateBenchCell(key.cell); !st.ok()) {
      return absl::InvalidArgumentError(
          absl::StrFormat("measurement '%s': %s", m.id(), st.message()));
    }
  }
  return absl::OkStatus();
}

// A pool no larger than the cell can ever occupy: every request of the cell
// in flight at once at full length, in every group, plus slack. When this
// is below the real pool neither pool can run out (no preemption, no
// eviction that matters: prompts are unique), so results are identical,
// and creating the pool (O(blocks)) stops dominating small cells on large
// devices (1.7 M blocks on MI300X).
KvCacheSpec CappedKvCache(const KvCacheSpec& kv, const BenchCell& cell) {
  const int64_t len = static_cast<int64_t>(cell.max_input()) + cell.max_output();
  int64_t per_request = 0;
  for (const KvGroupSpec& g : kv.groups) {
    per_request += (len + g.block_size_tokens - 1) / std::max(1, g.block_size_tokens) + 2;
  }
  // An open loop without a concurrency limit can have every request in
  // flight.
  const int32_t in_flight = cell.max_concurrency > 0
                                ? std::min(cell.max_concurrency, cell.num_prompts)
                                : cell.num_prompts;
  const int64_t need = static_cast<int64_t>(in_flight) * per_request + 64;
  KvCacheSpec capped = kv;
  capped.num_blocks = std::min(kv.num_blocks, need);
  return capped;
}

}  // namespace

Parameter ApiOverheadPrior() {
  Parameter p;
  p.name = kApiOverheadParam;
  p.value = kApiOverheadPriorMs;
  p.lower = 0;
  p.upper = 200;
  p.prior = kApiOverheadPriorMs;
  p.prior_sigma = 5;
  p.unit = "ms";
  p.meaning =
      "per-request latency outside engine steps before the request reaches the scheduler "
      "(HTTP, tokenization, engine input queue); counts in TTFT and delays a closed loop";
  p.source = "prior: calibration (a few ms for an OpenAI-compatible vLLM server)";
  return p;
}

Parameter ParallelCallExtraPrior() {
  Parameter p;
  p.name = kParallelCallExtraParam;
  p.value = 0;
  p.lower = -0.3;  // the per-call cost in the data is 0.56-0.68 s, 0.62 s used
  p.upper = 5;
  p.prior = 0;
  p.prior_sigma = 0.6;
  p.unit = "s";
  p.meaning =
      "extra fixed cost per call when a parallel-batch client starts all its CLI calls "
      "at once (client CPU contention); measuring client only, never used by simulate";
  p.source =
      "prior: calibration (0 +- 0.6 s: between no contention and 16 calls of ~0.6 s "
      "sharing a few client cores)";
  return p;
}

absl::StatusOr<Predictor> Predictor::Create(const MeasurementDb& db,
                                            const std::vector<std::string>& ids) {
  Predictor p;
  p.ids_ = ids;
  for (const std::string& id : ids) {
    const Measurement* m = db.FindMeasurement(id);
    if (m == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrFormat("predictor: unknown measurement '%s'", id));
    }
    RETURN_IF_ERROR(CheckMethod(*m));
    p.points_.push_back(*m);
    const ServerRun& run = *db.FindRun(m->run());
    if (p.runs_.count(run.id())) continue;
    p.runs_[run.id()] = run;
    const ServerSpec spec = MeasurementDb::SpecOf(run);
    absl::StatusOr<Deployment> d = BuildDeployment(spec);
    if (!d.ok()) {
      return absl::InvalidArgumentError(
          absl::StrFormat("run '%s': %s", run.id(), d.status().message()));
    }
    if (p.deployments_.empty()) {
      p.base_params_ = d->params;
      ASSIGN_OR_RETURN(p.prior_params_, DefaultParameters(spec));
      if (p.base_params_.Find(kApiOverheadParam) == nullptr) {
        p.base_params_.mutable_params().push_back(ApiOverheadPrior());
      }
      if (p.prior_params_.Find(kApiOverheadParam) == nullptr) {
        p.prior_params_.mutable_params().push_back(ApiOverheadPrior());
      }
      for (ParameterSet* set : {&p.base_params_, &p.prior_params_}) {
        if (set->Find(kParallelCallExtraParam) == nullptr) {
          set->mutable_params().push_back(ParallelCallExtraPrior());
        }
      }
    }
    p.deployments_.emplace(run.id(), *std::move(d));
    if (run.sweep_reuses_prompt_seed()) {
      std::vector<SweepCell>& sweep = p.sweeps_[run.id()];
      for (const servesim::proto::SweepCell& c : run.sweep_cells()) {
        sweep.push_back(
            {c.input_tokens(), c.max_concurrency(), c.num_prompts(), c.output_tokens()});
      }
      for (const Measurement& other : db.measurements()) {
        if (other.run() != run.id() ||
            other.client().kind() != ClientMethod::BENCH_SERVE_CLOSED_LOOP ||
            other.client().input_lens_size() > 0) {
          continue;
        }
        for (const CellKey& k : CellsOf(other)) {
          sweep.push_back({k.cell.input_tokens, k.cell.max_concurrency,
                           k.cell.num_prompts, k.cell.output_tokens});
        }
      }
      std::sort(sweep.begin(), sweep.end());
      sweep.erase(std::unique(sweep.begin(), sweep.end()), sweep.end());
    }
    const ServerSpec logged = MeasurementDb::WithLoggedMemory(run);
    if (logged.measured_kv_cache_gib || logged.measured_weights_gib) {
      ASSIGN_OR_RETURN(Deployment dl, BuildDeployment(logged));
      p.logged_deployments_.emplace(run.id(), std::move(dl));
    }
  }
  return p;
}

absl::StatusOr<std::vector<PointPrediction>> Predictor::Predict(
    const ParameterSet& params) const {
  // Step models at these parameters, one per run.
  std::map<std::string, std::shared_ptr<const StepTimeModel>> models;
  std::map<CellKey, BenchCellResult> results;
  const Parameter* api = params.Find(kApiOverheadParam);
  const double api_overhead_ms = api == nullptr ? 0.0 : std::max(0.0, api->value);
  const Parameter* extra = params.Find(kParallelCallExtraParam);
  const double parallel_extra_s = extra == nullptr ? 0.0 : extra->value;
  for (const Measurement& m : points_) {
    for (const CellKey& key : CellsOf(m)) {
      if (results.count(key)) continue;
      const Deployment& d = deployments_.at(key.run);
      // A timed cell needs a server that loads (a FITS_IN_MEMORY row may
      // record one that does not; it is never simulated).
      if (!d.memory.fits) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "run '%s' (measurement '%s'): %s", key.run, m.id(), d.memory.reason));
      }
      auto& model = models[key.run];
      if (model == nullptr) model = RebuildStepModel(d, params);
      BenchCell cell = key.cell;
      cell.api_overhead_ms = api_overhead_ms;
      if (m.client().kind() == servesim::proto::ClientMethod::SAGEMAKER_PARALLEL_BATCH) {
        cell.client_overhead_s = std::max(0.0, cell.client_overhead_s + parallel_extra_s);
      }
      SchedulerConfig sched = d.scheduler;
      KvCacheSpec kv = d.kv_cache;
      const auto sweep = sweeps_.find(key.run);
      if (sweep != sweeps_.end() &&
          m.client().kind() == ClientMethod::BENCH_SERVE_CLOSED_LOOP &&
          cell.input_lens.empty()) {
        // The sweep's earlier cells left their prompts in the cache: the
        // whole pool (what they evict matters) and prefix caching as run.
        cell.reused_prompt_seed = true;
        const SweepCell self{cell.input_tokens, cell.max_concurrency, cell.num_prompts,
                             cell.output_tokens};
        for (const SweepCell& e : sweep->second) {
          if (!(e < self)) break;
          cell.earlier_cells.push_back({e.num_prompts, e.input_tokens, e.output_tokens});
        }
      } else {
        // Every prompt of a cell is unique (random dataset, own seed per
        // repetition), so prefix caching can never hit: simulating without
        // it gives the same schedule and skips the block-hash bookkeeping.
        sched.enable_prefix_caching = false;
        kv = CappedKvCache(kv, cell);
      }
      ASSIGN_OR_RETURN(BenchCellResult r,
                       SimulateBenchCell(sched, kv, *model, cell, warm_kv_.get()));
      results.emplace(key, std::move(r));
    }
  }

  std::vector<PointPrediction> out;
  out.reserve(points_.size());
  for (const Measurement& m : points_) {
    const ServerRun& run = runs_.at(m.run());
    PointPrediction pred;
    const std::vector<CellKey> cells = CellsOf(m);
    std::vector<const BenchCellResult*> rs;
    for (const CellKey& k : cells) {
      const BenchCellResult& r = results.at(k);
      if (!r.feasible) {
        pred.feasible = false;
        pred.note = r.infeasible_reason;
      }
      rs.push_back(&r);
    }
    if (!pred.feasible) {
      pred.value = kNaN;
      out.push_back(std::move(pred));
      continue;
    }
    const double price = PriceOf(m, run);
    switch (m.metric()) {
      case servesim::proto::OUTPUT_THROUGHPUT:
        pred.value = rs[0]->output_throughput;
        break;
      case servesim::proto::TOTAL_THROUGHPUT:
        pred.value = rs[0]->total_throughput;
        break;
      case servesim::proto::MEDIAN_TTFT_MS:
        pred.value = rs[0]->median_ttft_ms;
        break;
      case servesim::proto::MEDIAN_TPOT_MS:
        pred.value = rs[0]->median_tpot_ms;
        break;
      case servesim::proto::MEAN_TTFT_MS:
        pred.value = rs[0]->mean_ttft_ms;
        break;
      case servesim::proto::P99_TTFT_MS:
        pred.value = rs[0]->p99_ttft_ms;
        break;
      case servesim::proto::MEAN_TPOT_MS:
        pred.value = rs[0]->mean_tpot_ms;
        break;
      case servesim::proto::MEDIAN_ITL_MS:
        pred.value = rs[0]->median_itl_ms;
        break;
      case servesim::proto::P99_ITL_MS:
        pred.value = rs[0]->p99_itl_ms;
        break;
      case servesim::proto::TOK_S_PER_USD_HOUR:
        pred.value = rs[0]->output_throughput / price;
        break;
      case servesim::proto::COST_PER_MTOK:
        pred.value = price / (rs[0]->output_throughput * 3600) * 1e6;
        break;
      case servesim::proto::DECODE_RATE: {
        const double dt_s = (rs[1]->median_e2el_ms - rs[0]->median_e2el_ms) / 1e3;
        pred.value =
            (m.client().long_output_tokens() - m.client().short_output_tokens()) / dt_s;
        break;
      }
      case servesim::proto::KV_CAPACITY_TOKENS:
      case servesim::proto::KV_MAX_CONCURRENCY: {
        const bool tokens = m.metric() == servesim::proto::KV_CAPACITY_TOKENS;
        const Deployment& est = deployments_.at(m.run());
        auto it = logged_deployments_.find(m.run());
        const Deployment& used = it == logged_deployments_.end() ? est : it->second;
        auto value = [tokens](const Deployment& d) {
          return tokens ? static_cast<double>(d.memory.kv_cache_tokens)
                        : d.memory.max_concurrency;
        };
        pred.value = value(used);
        pred.estimated_value = value(est);
        pred.note = it == logged_deployments_.end()
                        ? "planner estimate (no memory log)"
                        : absl::StrFormat(
                              "from the logged KV memory (%s); estimated overheads: %g",
                              used.memory.sources, pred.estimated_value);
        break;
      }
      case servesim::proto::FITS_IN_MEMORY: {
        auto it = logged_deployments_.find(m.run());
        const Deployment& d =
            it == logged_deployments_.end() ? deployments_.at(m.run()) : it->second;
        pred.value = d.memory.fits ? 1 : 0;
        pred.note = d.memory.fits ? "planner: fits" : d.memory.reason;
        break;
      }
      default:
        return absl::InternalError("predictor: unhandled metric");
    }
    out.push_back(std::move(pred));
  }
  return out;
}

const Deployment* Predictor::FindDeployment(const std::string& run_id) const {
  auto it = deployments_.find(run_id);
  return it == deployments_.end() ? nullptr : &it->second;
}

absl::StatusOr<std::vector<double>> Predictor::PredictValues(
    const ParameterSet& params) const {
  ASSIGN_OR_RETURN(std::vector<PointPrediction> p, Predict(params));
  std::vector<double> v;
  v.reserve(p.size());
  for (const PointPrediction& x : p) v.push_back(x.value);
  return v;
}

}  // namespace servesim
