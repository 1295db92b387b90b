// Predicts measured numbers "the way they were measured": each measurement
// of the data is re-created with the run's server flags (hwmodels
// deployment: scheduler defaults, memory plan, KV layout, step model) and
// its client method, then simulated through the sim/ engine:
//  - BENCH_SERVE_CLOSED_LOOP: `vllm bench serve` closed loop of c streams,
//    num_prompts as measured, fixed lengths (or the measured per-request
//    lengths), ignore_eos -> output / total throughput, median TTFT, median
//    TPOT; per-dollar rows = throughput / price; cost per 1M tokens =
//    price / (throughput x 3600) x 1e6.
//  - BENCH_SERVE_OPEN_LOOP: the same at the measured request rate and
//    burstiness (optionally capped by max_concurrency); the metrics are the
//    mean over kOpenLoopRealizations arrival draws.
//  - SAGEMAKER_DECODE_RATE: (long - short) / (wall(long) - wall(short)) of
//    two single requests, each with the fixed per-call CLI cost.
//  - SAGEMAKER_PARALLEL_BATCH: c parallel calls x output / wall of the batch
//    (prefill, ramp and per-call cost included).
//  - SERVER_LOG: KV capacity / concurrency from the memory planner, using
//    the run's logged memory figures ("measured overheads"); whether the
//    model fits.
// Construction builds each run's deployment once; Predict() only rebuilds
// step models (cheap) and simulates each distinct cell once.
// Thread-compatible.
#ifndef SERVESIM_CALIBRATION_PREDICTOR_H_
#define SERVESIM_CALIBRATION_PREDICTOR_H_

#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/statusor.h"
#include "calibration/bench_sim.h"
#include "calibration/measurements.h"
#include "hwmodels/deployment.h"
#include "hwmodels/params.h"

namespace servesim {

// Calibration-level parameter (not a step-time knob): fixed latency per
// request between the client's send and the scheduler (API server, HTTP,
// tokenization), in ms; added to every simulated cell's client overhead.
// Predictor adds it (with ApiOverheadPrior) to the step model's parameters;
// Simulate (sim/simulation.h) adds it to the client overhead, for validate
// as for `simulate`.
inline constexpr char kApiOverheadParam[] = "api_overhead_ms";
Parameter ApiOverheadPrior();

// Client-level parameter of the measuring method, not of the server: the
// extra fixed cost per call, in s, when a SAGEMAKER_PARALLEL_BATCH client
// starts its c CLI processes at once (they contend for the client machine's
// CPU; the per-call cost in the data was timed one call at a time). Added
// to the client overhead of parallel-batch cells only. A calibration
// profile may carry it for the record; `simulate` never applies it.
inline constexpr char kParallelCallExtraParam[] = "parallel_call_extra_s";
Parameter ParallelCallExtraPrior();

// What the simulator says about one measurement.
struct PointPrediction {
  double value = 0;  // NaN when infeasible
  bool feasible = true;
  std::string note;  // infeasible reason, planner reason, ...
  // KV rows only: the planner with estimated (not logged) overheads.
  double estimated_value = 0;
};

class Predictor {
 public:
  // `ids`: the measurements to predict, all from runs of `db`. Errors:
  // unknown ids, a run whose deployment cannot be built, a metric that
  // does not go with its client method.
  static absl::StatusOr<Predictor> Create(const MeasurementDb& db,
                                          const std::vector<std::string>& ids);

  // The parameter set of the first run's deployment (with the default
  // calibration profile applied, if any): names, bounds, priors, values.
  const ParameterSet& base_params() const { return base_params_; }
  // The same with the priors as values (no profile applied).
  const ParameterSet& prior_params() const { return prior_params_; }

  // Predictions for every id, in order.
  absl::StatusOr<std::vector<PointPrediction>> Predict(const ParameterSet& params) const;
  // Just the values (NaN for infeasible), for the fitter.
  absl::StatusOr<std::vector<double>> PredictValues(const ParameterSet& params) const;

  const std::vector<std::string>& ids() const { return ids_; }
  // The deployment of a run of these ids (built with the default profile);
  // nullptr when the run is not among them.
  const Deployment* FindDeployment(const std::string& run_id) const;

 private:
  Predictor() = default;

  std::vector<std::string> ids_;
  std::vector<servesim::proto::Measurement> points_;        // by index of ids_
  std::map<std::string, servesim::proto::ServerRun> runs_;  // by run id
  std::map<std::string, Deployment> deployments_;           // by run id
  std::map<std::string, Deployment> logged_deployments_;    // runs with a memory log
  // Runs with sweep_reuses_prompt_seed: the run's declared sweep_cells and
  // every closed-loop cell of fixed lengths the data hold for it (fitted,
  // graded or excluded: they all ran), in the sweep's order (input_tokens,
  // then max_concurrency).
  struct SweepCell {
    int32_t input_tokens = 0;
    int32_t max_concurrency = 0;
    int32_t num_prompts = 0;
    int32_t output_tokens = 0;
    bool operator==(const SweepCell&) const = default;
    // Spelled out: clang-tidy 14 flags a defaulted <=> (modernize-use-nullptr).
    friend bool operator<(const SweepCell& a, const SweepCell& b) {
      return std::tie(a.input_tokens, a.max_concurrency, a.num_prompts, a.output_tokens) <
             std::tie(b.input_tokens, b.max_concurrency, b.num_prompts, b.output_tokens);
    }
  };
  std::map<std::string, std::vector<SweepCell>> sweeps_;  // by run id
  // Their cells' starting KV states, shared by copies of this predictor
  // (the refits of a validation) and by Predict's threads.
  std::shared_ptr<WarmKvCacheMemo> warm_kv_ = std::make_shared<WarmKvCacheMemo>();
  ParameterSet base_params_;
  ParameterSet prior_params_;
};

}  // namespace servesim

#endif  // SERVESIM_CALIBRATION_PREDICTOR_H_
