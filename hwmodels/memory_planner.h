// vLLM's memory accounting and hybrid KV cache layout (newer V1 builds),
// per runtime:
//  - GPU builds (CUDA, ROCm): requested = total x gpu_memory_utilization;
//    KV = requested - weights - non-torch - activation peak of a profiling
//    step (CUDA graph memory is logged, not subtracted).
//  - TPU builds (vllm-tpu, device vendor "google"): KV = requested -
//    weights; no non-torch term and no activation peak (the v5e log: usable
//    14.49 GiB, weights 8.97 GiB, KV 5.52 GiB = 14.49 - 8.97), and every
//    layer keeps its whole context (no sliding-window freeing: the
//    deployment zeroes the groups' windows), so capacity = KV bytes / bytes
//    per token of all KV layers.
// Pages equalised across attention types; layers split into equal groups
// sharing one block pool.
// See docs/reference/hardware-and-models.md for the worked checks.
// Pure functions; thread-safe.
#ifndef SERVESIM_HWMODELS_MEMORY_PLANNER_H_
#define SERVESIM_HWMODELS_MEMORY_PLANNER_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "hwmodels/deployment.h"
#include "hwmodels/model_arch.h"
#include "hwmodels/server_spec.h"
#include "proto/hwmodels.pb.h"
#include "sim/server_config.h"

namespace servesim {

constexpr double kBytesPerGib = 1024.0 * 1024.0 * 1024.0;

inline constexpr char kAccountingGpu[] =
    "vllm-gpu: KV = usable x gpu_memory_utilization - weights - non-torch - activation "
    "peak";
inline constexpr char kAccountingTpu[] =
    "vllm-tpu: KV = usable x gpu_memory_utilization - weights (no non-torch term, no "
    "activation peak); every layer keeps its whole context";
// Which accounting the device's runtime uses: TPU for vendor "google".
bool UsesTpuAccounting(const proto::Device& device);

// The block layout of the hybrid allocator.
struct KvLayout {
  KvCacheSpec spec;        // groups (num_blocks left 0)
  int64_t page_bytes = 0;  // one layer's page (equal for all types)
  int32_t layers_per_group = 0;
  int64_t block_bytes = 0;  // page_bytes x layers_per_group
};

// REQUIRES: block_size > 0. InvalidArgument when pages cannot be equalised
// (the larger page is not a multiple of the smaller).
absl::StatusOr<KvLayout> PlanKvLayout(const ModelArch& m, int kv_dtype_bytes,
                                      int32_t block_size);

// Blocks one request of `len` tokens needs at its peak as vLLM estimates
// it: VllmMaxBlocksPerRequest (sim/kv_cache.h, where it is compared with
// the scheduler's exact MaxBlocksHeld) with in_flight = (async ? 2 : 1) x
// max_num_batched_tokens.
int64_t BlocksPerRequest(const KvLayout& layout, int64_t len,
                         int32_t max_num_batched_tokens, bool async_scheduling);

// Estimated activation peak of vLLM's profiling run (forward pass of
// max_num_batched_tokens plus the sampler warm-up over max_num_seqs), GiB.
// The two parts of the estimated activation peak: the sampler's fp32 logits
// for max_num_seqs dummy sequences and the forward pass of a
// max_num_batched_tokens profiling step.
struct ActivationParts {
  double sampler_gib = 0, forward_gib = 0;
  double total_gib() const { return sampler_gib + forward_gib; }
};
ActivationParts EstimateActivationParts(const proto::Device& device, const ModelArch& m,
                                        const SchedulerConfig& sched,
                                        int act_dtype_bytes);
double EstimateActivationGib(const proto::Device& device, const ModelArch& m,
                             const SchedulerConfig& sched, int act_dtype_bytes);

// Non-torch memory a tensor-parallel rank adds over TP1 on a GPU build
// (0 at TP1, on TPU, and on AMD, where RCCL's share is not measured): the
// TP group's NCCL / custom all-reduce buffers, plus NCCL's NVLS multicast
// buffers above 2 GPUs on NVSwitch Hopper/Blackwell. GiB.
double TensorParallelNonTorchGib(const proto::Device& device, int32_t tp);

// The whole plan. Measured overrides in `spec` replace the estimates
// (measured_kv_cache_gib replaces everything before the block count).
MemoryPlan PlanMemory(const proto::Device& device, const ModelArch& m,
                      const WeightFormat& f, int dtype_bytes,
                      const SchedulerConfig& sched, const ServerSpec& spec,
                      const KvLayout& layout);

}  // namespace servesim

#endif  // SERVESIM_HWMODELS_MEMORY_PLANNER_H_
