// What a user asks for when they "serve" a model: the `vllm serve` flags
// that matter to performance and memory. Filled from the CLI or from an
// experiment config; consumed by the memory planner and the step model.
#ifndef SERVESIM_HWMODELS_SERVER_SPEC_H_
#define SERVESIM_HWMODELS_SERVER_SPEC_H_

#include <cstdint>
#include <optional>
#include <string>

namespace servesim {

struct ServerSpec {
  std::string device;          // "t4", "l4", "mi300x", "tpu-v5e", "tpu-v6e"
  std::string model;           // "gemma-4-e2b", ... or a HF id, or a config.json path
  std::string dtype = "auto";  // "bf16", "fp16", "auto" (the device's default)
  std::string quantization = "none";  // none|fp8|w8a8|w4a16|w4a16-emb4
  // KV cache elements: "auto" (the model dtype, 2 bytes) or "fp8",
  // "fp8_e4m3", "fp8_e5m2" (1 byte), as `vllm serve --kv-cache-dtype`.
  std::string kv_cache_dtype = "auto";
  int32_t max_model_len = 0;  // 0: the model's own limit
  double gpu_memory_utilization = 0.90;
  int32_t max_num_seqs = 0;            // 0: vLLM's default for the device
  int32_t max_num_batched_tokens = 0;  // 0: vLLM's default for the device
  int32_t block_size = 16;
  bool enable_prefix_caching = true;
  bool async_scheduling = true;
  // vLLM's scheduler_reserve_full_isl (SchedulerConfig::reserve_full_isl).
  bool scheduler_reserve_full_isl = true;
  // Parallelism (hwmodels/parallelism.h): one replica split over
  // pipeline_parallel_size stages of tensor_parallel_size chips of one
  // node; data_parallel_size engines; experts spread with EP.
  int32_t tensor_parallel_size = 1;
  int32_t pipeline_parallel_size = 1;
  int32_t data_parallel_size = 1;
  bool enable_expert_parallel = false;
  // Measured non-KV memory, when the user has the server log; otherwise
  // the planner estimates each from the model and flags.
  std::optional<double> measured_weights_gib;
  std::optional<double> measured_non_torch_gib;
  std::optional<double> measured_activation_peak_gib;
  std::optional<double> measured_cuda_graph_gib;
  // Available KV cache memory straight from a server log (skips the rest).
  std::optional<double> measured_kv_cache_gib;
  // Calibration profile file; empty: the default profile shipped for the
  // device (calibration/profiles/<device>.textproto) if any.
  std::string calibration_profile;
};

}  // namespace servesim

#endif  // SERVESIM_HWMODELS_SERVER_SPEC_H_
