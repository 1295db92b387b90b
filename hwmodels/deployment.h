// Reading guide to hwmodels/ (-> sim, proto). Start here. Then catalog.h
// and model_arch.h (devices and models), memory_planner.h (KV capacity),
// step_model.h (the step-time formula; docs/step_model.md), params.h
// (calibration parameters), calibration_profile.h (fitted profiles).
//
// The top-level entry of hwmodels: from the `vllm serve` flags of one
// replica (ServerSpec) to everything the simulator needs: the resolved
// device / model / weight format / dtype, the scheduler config with vLLM's
// defaults filled in, the memory plan and KV cache layout, and a calibrated
// step-time model with the parameters it used.
//
// Typical use:
//   ASSIGN_OR_RETURN(Deployment d, BuildDeployment(spec));
//   if (!d.memory.fits) { ...print d.memory.reason... }
//   SimulationSpec s;  // sim/simulation.h, the one pipeline
//   s.replicas.push_back({.scheduler = d.scheduler, .kv_cache = d.kv_cache,
//                         .step_model = d.step_model.get()});
//   s.client = client;
//   ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine, Simulate(std::move(s), &source));
//   RunResult r = engine->Result();
//
// Calibration (the fitter) builds once, then re-prices thousands of times:
//   ASSIGN_OR_RETURN(Deployment d, BuildDeployment(spec));
//   ParameterSet p = d.params;  p.FindMutable("bw_eff_weights")->value = 0.8;
//   std::shared_ptr<const StepTimeModel> m = RebuildStepModel(d, p);  // ~us
#ifndef SERVESIM_HWMODELS_DEPLOYMENT_H_
#define SERVESIM_HWMODELS_DEPLOYMENT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "hwmodels/model_arch.h"
#include "hwmodels/parallelism.h"
#include "hwmodels/params.h"
#include "hwmodels/server_spec.h"
#include "proto/hwmodels.pb.h"
#include "sim/server_config.h"
#include "sim/step_time_model.h"

namespace servesim {

class CompiledStepGraph;  // hwmodels/step_model.h

// vLLM's memory accounting for one replica, in GiB (2^30 bytes) unless the
// name says otherwise. Every field is filled whether or not it fits.
struct MemoryPlan {
  double total_gib = 0;      // memory the runtime can use
  double requested_gib = 0;  // total x gpu_memory_utilization
  double weights_gib = 0;
  double non_torch_gib = 0;
  double activation_gib = 0;  // peak of the profiling step
  double cuda_graph_gib = 0;  // estimate of graph capture memory
  // Whether cuda_graph_gib was taken out of the KV budget (the measured
  // builds only log it; they do not subtract it).
  bool cuda_graph_subtracted = false;
  double kv_cache_gib = 0;     // available KV cache memory
  int64_t kv_block_bytes = 0;  // one block of the shared pool (all layers of a group)
  int64_t num_blocks = 0;
  int64_t blocks_per_request = 0;  // for one request of max_model_len tokens
  double max_concurrency = 0;      // num_blocks / blocks_per_request
  int64_t kv_cache_tokens = 0;     // vLLM's "GPU KV cache size"
  bool fits = false;
  std::string reason;  // empty when it fits; otherwise why not, with numbers
  // Which of the overheads came from measured overrides, e.g.
  // "weights=measured kv_cache=estimated".
  std::string sources;
  // The runtime's KV budget rule (memory_planner.h kAccounting*), e.g.
  // "vllm-tpu: KV = usable x gpu_memory_utilization - weights".
  std::string accounting;
};

// Everything one simulated replica needs. Value type; cheap to copy (the
// step model is shared and immutable).
// The prior of the per-request API server latency (`api_overhead_ms`,
// calibration/predictor.h ApiOverheadPrior: 5 +- 5 ms, a few ms for an
// OpenAI-compatible vLLM server).
inline constexpr double kApiOverheadPriorMs = 5.0;

struct Deployment {
  servesim::proto::Device device;
  ModelArch model;             // expanded per-layer architecture
  WeightFormat format;         // resolved quantization
  std::string dtype;           // "bf16" | "fp16" (activations, and KV unless fp8)
  std::string kv_cache_dtype;  // the dtype, or "fp8" / "fp8_e4m3" / "fp8_e5m2"
  int kv_dtype_bytes = 2;
  ServerSpec spec;            // as given
  SchedulerConfig scheduler;  // vLLM defaults filled in
  MemoryPlan memory;
  KvCacheSpec kv_cache;  // num_blocks == memory.num_blocks
  std::shared_ptr<const StepTimeModel> step_model;
  ParameterSet params;  // the parameters step_model uses
  // The compiled operator graph, so the step model can be rebuilt with
  // other parameters without re-deriving the graph.
  std::shared_ptr<const CompiledStepGraph> graph;
  // Human-readable: formula, parameters and their sources.
  std::string provenance;
  // False when no calibration profile applies (datasheet priors only, or
  // caller-supplied parameters): the CLI warns that such a prediction
  // carries the priors' error.
  bool calibrated = false;
  // The shipped profile of the device applied (not a user's file): its
  // software build. `servesim validate`'s known gaps for that profile then
  // go into the prediction's provenance (experiments/capacity/simulate_report.cc).
  bool shipped_profile = false;
  std::string profile_software_build;
  // The applied profile: where it came from (a path, or the shipped
  // profile's name) and the workloads its fit saw (empty without a
  // profile, or in a profile written before the range was recorded).
  std::string profile_origin;
  proto::FittedRange fitted_range;
  // The server settings of the runs the profile was fitted on (empty
  // without a profile, or in a profile written before they were recorded).
  std::vector<proto::FittedServer> fitted_servers;
  // The API server's latency per request (a client-side cost, not a
  // step-time knob: the client adds it): the profile's api_overhead_ms
  // where the profile carries it, else its prior kApiOverheadPriorMs,
  // the value every fit that leaves it fixed predicts with (and
  // `validate`'s leave-one-device-out, which keeps a device's priors for
  // anything not an efficiency). api_overhead_source says which.
  double api_overhead_ms = 0;
  std::string api_overhead_source;
  // Non-empty when no profile applies and the device's priors came by rule
  // from the calibrated devices (hwmodels/catalog_priors.h): says from where
  // and with what expected error. The CLI's warning uses it; it is also in
  // `provenance`.
  std::string uncalibrated_note;
  // Tensor parallelism: chips per replica; memory, kv_cache and graph are
  // one rank's (model stays the whole model); step_model includes the
  // collectives (TensorParallelStepModel) when > 1.
  int32_t tensor_parallel_size = 1;
  // Engines of this server (--data-parallel-size), each a replica of the
  // fleet behind vLLM's DP balancer; the instance holds DP x TP chips.
  int32_t data_parallel_size = 1;
  // Expert parallelism: TP x DP with --enable-expert-parallel and an MoE
  // model, else 1; memory and graph are then the fullest rank's.
  int32_t expert_parallel_size = 1;
  TensorParallelCollectives collectives;
  std::string collective_link;  // CollectiveLink::description; empty at TP 1
  // Pipeline parallelism (hwmodels/parallelism.h PipelineStage): stages of
  // the replica; the instance holds PP x TP (x DP) chips. With PP > 1:
  // `memory` is the plan of the stage that sets the pool (the fewest blocks,
  // or the first that does not fit), stage_memory every stage's (its own
  // num_blocks, before the minimum), stage_layers their [begin, end) layers,
  // stage_graphs their compiled graphs (graph stays the whole rank's), and
  // step_model a PipelineStepModel (the engine runs vLLM's batch queue).
  int32_t pipeline_parallel_size = 1;
  std::vector<MemoryPlan> stage_memory;
  std::vector<std::pair<int32_t, int32_t>> stage_layers;
  std::vector<std::shared_ptr<const CompiledStepGraph>> stage_graphs;
  std::vector<TensorParallelCollectives> stage_collectives;
  PipelineTransfer pipeline_transfer;
};

// Resolves names, plans memory and builds the step model. Errors
// (InvalidArgument) name the flag and the allowed values: unknown device,
// model, quantization or dtype (bf16 on t4), out-of-range numbers.
// The device's vLLM build must run the weight format (CheckWeightFormat).
// Not fitting in memory is NOT an error: memory.fits == false.
// Parameters: params_override if given (must contain every parameter of
// DefaultParameters; missing ones keep the default), else the calibration
// profile (ResolveCalibrationProfile of spec.calibration_profile: a user's file,
// or the shipped calibration/profiles/<device>.textproto embedded in the
// binary, which applies only to the shipped file of that device), else the
// priors (by rule from the calibrated devices for an uncalibrated device).
// A profile is refused on another device: its `device` must name this one,
// and its device_content_hash (when set) must equal the device file's hash.
absl::StatusOr<Deployment> BuildDeployment(const ServerSpec& spec,
                                           const ParameterSet* params_override = nullptr);

// The prior ParameterSet for the device / model / format of `spec` (no
// calibration profile applied).
absl::StatusOr<ParameterSet> DefaultParameters(const ServerSpec& spec);

// A new step model over d.graph with `params` (values looked up by name;
// missing names keep d.params' value). Cheap: O(number of operators), no
// graph work. Thread-safe (d is only read).
std::shared_ptr<const StepTimeModel> RebuildStepModel(const Deployment& d,
                                                      const ParameterSet& params);

// `rank_model` with d's TP collectives added (itself at TP 1). Not for
// PP > 1 (its stages have their own graphs: RebuildStepModel).
std::shared_ptr<const StepTimeModel> WithCollectives(
    const Deployment& d, std::shared_ptr<const StepTimeModel> rank_model);

// The allowed names, for error messages and --help.
std::string AllowedDeviceNames();  // "t4, l4, mi300x, tpu-v5e, tpu-v6e"
std::string AllowedModelNames();
std::string AllowedQuantizationNames();  // "none, fp8, w8a8, w4a16, w4a16-emb4"

}  // namespace servesim

#endif  // SERVESIM_HWMODELS_DEPLOYMENT_H_
