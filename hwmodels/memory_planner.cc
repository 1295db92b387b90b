#include "hwmodels/memory_planner.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "sim/base/int_math.h"
#include "sim/kv_cache.h"

namespace servesim {
namespace {

// Activation model, fitted jointly to the two measured profiling peaks
// (MI300X E2B bf16, 16,384 tokens / 1,024 seqs: 5.59 GiB; T4 12B, 2,048
// tokens / 256 seqs: 1.15 GiB). Sampler warm-up: copies x seqs x vocab x 4 B;
// forward: factor x tokens x (2 x max FFN width + 4 x hidden) x dtype bytes.
constexpr double kSamplerLogitCopies = 1.63;
constexpr double kForwardActivationFactor = 4.22;

std::string Gib(double v) { return absl::StrFormat("%.2f GiB", v); }

// Per-rank communication buffers of a TP group (NCCL channels, vLLM's
// custom all-reduce IPC buffers), allocated outside torch after vLLM's
// start-of-worker memory snapshot, so counted as non-torch memory: the
// H100 log of vLLM PR #10511 gives non_torch_memory 1.79 GiB at TP1 and
// 3.58 GiB at TP2 for the same model, +1.79 GiB per rank.
constexpr double kTpCommBuffersGib = 1.79;
// NCCL NVLink SHARP (NVLS) multicast buffers: NCCL enables NVLS for more
// than 2 GPUs on NVSwitch Hopper/Blackwell systems and maps nvlsPerRankSize
// = 301,989,888 B (288 MiB) per rank of the communicator on every GPU
// (nvlsTotalSize = 8 x 288 MiB at 8 GPUs: the NCCL log in vLLM issue
// #9699). vLLM holds two NCCL communicators per TP group (its PyNccl one
// and torch's device group), so 2 x tp x 288 MiB per rank: 4.5 GiB at TP8,
// against the 4.91-5.00 GiB the same issue measured (Llama-3.1-405B TP8 on
// H200: 17,595 GPU blocks of 1,008 KiB with NVLS, 227xx with
// NCCL_NVLS_ENABLE=0).
constexpr double kNvlsCommunicators = 2;
constexpr double kNvlsBytesPerRank = 301989888.0;

}  // namespace

double TensorParallelNonTorchGib(const proto::Device& device, int32_t tp) {
  if (tp <= 1 || device.vendor() != "nvidia") return 0.0;
  double gib = kTpCommBuffersGib;
  const std::string& arch = device.architecture();
  if (tp > 2 && (arch == "hopper" || arch == "blackwell") &&
      absl::StrContains(device.interconnect().topology(), "NVSwitch")) {
    gib +=
        kNvlsCommunicators * static_cast<double>(tp) * kNvlsBytesPerRank / kBytesPerGib;
  }
  return gib;
}

bool UsesTpuAccounting(const proto::Device& device) {
  return device.vendor() == "google";
}

absl::StatusOr<KvLayout> PlanKvLayout(const ModelArch& m, int kv_dtype_bytes,
                                      int32_t block_size) {
  if (block_size <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--block-size: ", block_size, " is not a positive integer"));
  }
  // Attention types among the layers that hold KV: (sliding, window,
  // kv heads, head dim) -> count.
  struct Type {
    bool sliding;
    int32_t window;
    int64_t bytes_per_token;
    int32_t count;
  };
  std::vector<Type> types;
  for (const LayerArch& l : m.layers) {
    if (!l.holds_kv) continue;
    const int64_t bpt = LayerKvBytesPerToken(l, kv_dtype_bytes);
    auto it = std::find_if(types.begin(), types.end(), [&](const Type& t) {
      return t.sliding == l.sliding && t.window == l.window && t.bytes_per_token == bpt;
    });
    if (it == types.end()) {
      types.push_back({l.sliding, l.window, bpt, 1});
    } else {
      ++it->count;
    }
  }
  KvLayout out;
  if (types.empty())
    return absl::InvalidArgumentError("model has no layer that holds KV");
  int64_t max_page = 0;
  int32_t min_count = types[0].count;
  for (const Type& t : types) {
    max_page = std::max(max_page, t.bytes_per_token * block_size);
    min_count = std::min(min_count, t.count);
  }
  out.page_bytes = max_page;
  out.layers_per_group = types.size() == 1 ? types[0].count : min_count;
  out.block_bytes = out.page_bytes * out.layers_per_group;
  // Full attention first (vLLM orders groups by type; order is cosmetic).
  std::stable_sort(types.begin(), types.end(),
                   [](const Type& a, const Type& b) { return !a.sliding && b.sliding; });
  for (const Type& t : types) {
    const int64_t page = t.bytes_per_token * block_size;
    if (max_page % page != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("model '", m.id, "': KV page sizes ", page, " and ", max_page,
                       " bytes cannot be equalised (not a multiple)"));
    }
    KvGroupSpec g;
    g.block_size_tokens = static_cast<int32_t>(block_size * (max_page / page));
    g.sliding_window = t.sliding ? t.window : 0;
    const int32_t groups = static_cast<int32_t>(CeilDiv(t.count, out.layers_per_group));
    for (int i = 0; i < groups; ++i) {
      g.num_layers = std::min(out.layers_per_group, t.count - i * out.layers_per_group);
      out.spec.groups.push_back(g);
    }
  }
  return out;
}

int64_t BlocksPerRequest(const KvLayout& layout, int64_t len,
                         int32_t max_num_batched_tokens, bool async_scheduling) {
  const int64_t in_flight = int64_t{async_scheduling ? 2 : 1} * max_num_batched_tokens;
  return VllmMaxBlocksPerRequest(layout.spec, len, in_flight);
}

ActivationParts EstimateActivationParts(const proto::Device& device, const ModelArch& m,
                                        const SchedulerConfig& sched,
                                        int act_dtype_bytes) {
  const double copies = device.sampler_logit_copies() > 0 ? device.sampler_logit_copies()
                                                          : kSamplerLogitCopies;
  const double factor = device.forward_activation_factor() > 0
                            ? device.forward_activation_factor()
                            : kForwardActivationFactor;
  int64_t max_ffn = 0;
  for (const LayerArch& l : m.layers)
    max_ffn = std::max<int64_t>(max_ffn, l.intermediate_size);
  if (m.num_experts > 0) {
    max_ffn =
        std::max<int64_t>(max_ffn, int64_t{m.experts_top_k} * m.expert_intermediate_size);
  }
  // vLLM's profile_run warms the sampler on the last pipeline stage only.
  const double sampler = m.runs_lm_head ? copies * sched.max_num_seqs *
                                              static_cast<double>(m.vocab_size) * 4.0
                                        : 0.0;
  const double forward = factor * sched.max_num_batched_tokens *
                         (2.0 * max_ffn + 4.0 * m.hidden_size) * act_dtype_bytes;
  return ActivationParts{sampler / kBytesPerGib, forward / kBytesPerGib};
}

double EstimateActivationGib(const proto::Device& device, const ModelArch& m,
                             const SchedulerConfig& sched, int act_dtype_bytes) {
  return EstimateActivationParts(device, m, sched, act_dtype_bytes).total_gib();
}

MemoryPlan PlanMemory(const proto::Device& device, const ModelArch& m,
                      const WeightFormat& f, int dtype_bytes,
                      const SchedulerConfig& sched, const ServerSpec& spec,
                      const KvLayout& layout) {
  MemoryPlan p;
  std::vector<std::string> src;
  const bool tpu = UsesTpuAccounting(device);
  p.accounting = tpu ? kAccountingTpu : kAccountingGpu;
  p.total_gib = device.usable_memory_gib();
  p.requested_gib = p.total_gib * spec.gpu_memory_utilization;
  auto pick = [&](const std::optional<double>& measured, double estimate,
                  const char* name) {
    src.push_back(absl::StrCat(name, measured ? "=measured" : "=estimated"));
    return measured ? *measured : estimate;
  };
  p.weights_gib =
      pick(spec.measured_weights_gib,
           ComputeWeightBytes(m, f, dtype_bytes).Total() / kBytesPerGib, "weights");
  p.non_torch_gib =
      pick(spec.measured_non_torch_gib,
           tpu ? 0.0
               : device.non_torch_gib() +
                     TensorParallelNonTorchGib(device, spec.tensor_parallel_size),
           "non_torch");
  p.activation_gib = pick(
      spec.measured_activation_peak_gib,
      tpu ? 0.0 : EstimateActivationGib(device, m, sched, dtype_bytes), "activation");
  p.cuda_graph_gib =
      pick(spec.measured_cuda_graph_gib,
           device.cuda_graph_gib_per_layer() * static_cast<double>(m.layers.size()),
           "cuda_graph");
  p.cuda_graph_subtracted = false;
  p.kv_block_bytes = layout.block_bytes;
  p.blocks_per_request = BlocksPerRequest(
      layout, sched.max_model_len, sched.max_num_batched_tokens, sched.async_scheduling);
  const double non_kv = p.weights_gib + p.non_torch_gib + p.activation_gib;
  if (spec.measured_kv_cache_gib) {
    p.kv_cache_gib = *spec.measured_kv_cache_gib;
    src.emplace_back("kv_cache=measured");
  } else {
    p.kv_cache_gib = p.requested_gib - non_kv;
    src.emplace_back("kv_cache=derived");
  }
  p.sources = absl::StrJoin(src, " ");

  if (!spec.measured_kv_cache_gib && p.weights_gib + p.non_torch_gib > p.requested_gib) {
    p.fits = false;
    p.reason = absl::StrCat(
        "weights ", Gib(p.weights_gib), " + non-torch memory ", Gib(p.non_torch_gib),
        " = ", Gib(p.weights_gib + p.non_torch_gib), " exceed the requested ",
        Gib(p.requested_gib), " (gpu_memory_utilization ",
        absl::StrFormat("%.2f", spec.gpu_memory_utilization), " x ", Gib(p.total_gib),
        " usable on ", device.id(),
        ") before any activation or KV cache memory: the model does not load");
    p.kv_cache_gib = std::max(0.0, p.kv_cache_gib);
    return p;
  }
  if (p.kv_cache_gib <= 0) {
    p.fits = false;
    std::string activation, remedy = "--max-num-batched-tokens";
    if (spec.measured_activation_peak_gib) {
      activation = "measured";
    } else {
      const ActivationParts a = EstimateActivationParts(device, m, sched, dtype_bytes);
      activation = absl::StrCat("sampler logits of ", sched.max_num_seqs, " sequences ",
                                Gib(a.sampler_gib), " + a ", sched.max_num_batched_tokens,
                                "-token profiling step ", Gib(a.forward_gib));
      if (a.sampler_gib > a.forward_gib) remedy = "--max-num-seqs";
    }
    p.reason = absl::StrCat(
        "weights ", Gib(p.weights_gib), " + non-torch ", Gib(p.non_torch_gib),
        " + activation peak ", Gib(p.activation_gib), " (", activation,
        ") = ", Gib(non_kv), " leave no KV cache memory in ", Gib(p.requested_gib), " (",
        absl::StrFormat("%.2f", spec.gpu_memory_utilization), " x ", Gib(p.total_gib),
        "); lower ", remedy, " or raise --gpu-memory-utilization");
    p.kv_cache_gib = 0;
    return p;
  }
  const double kv_bytes = p.kv_cache_gib * kBytesPerGib;
  p.num_blocks =
      static_cast<int64_t>(std::floor(kv_bytes / static_cast<double>(p.kv_block_bytes)));
  p.max_concurrency =
      static_cast<double>(p.num_blocks) / static_cast<double>(p.blocks_per_request);
  // int(concurrency x L), in exact integer arithmetic.
  p.kv_cache_tokens = p.num_blocks * int64_t{sched.max_model_len} / p.blocks_per_request;
  if (p.num_blocks < p.blocks_per_request) {
    p.fits = false;
    p.reason = absl::StrCat(
        "KV cache ", Gib(p.kv_cache_gib), " holds ", p.num_blocks, " blocks of ",
        p.kv_block_bytes, " B, but one request of max_model_len ", sched.max_model_len,
        " needs ", p.blocks_per_request,
        " blocks; lower --max-model-len (`servesim memory` names the largest that fits: "
        "the KV need is not linear in it with sliding-window layers) or "
        "--max-num-batched-tokens");
    return p;
  }
  p.fits = true;
  return p;
}

}  // namespace servesim
