#include "hwmodels/deployment.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "hwmodels/calibration_profile.h"
#include "hwmodels/catalog.h"
#include "hwmodels/catalog_priors.h"
#include "hwmodels/memory_planner.h"
#include "hwmodels/parallelism.h"
#include "hwmodels/step_model.h"
#include "sim/base/status_macros.h"

namespace servesim {
namespace {

absl::StatusOr<std::string> ResolveDtype(const std::string& requested,
                                         const proto::Device& d) {
  std::string s = absl::AsciiStrToLower(requested);
  if (s.empty() || s == "auto") s = d.default_dtype();
  if (s == "bfloat16") s = "bf16";
  if (s == "float16" || s == "half") s = "fp16";
  if (s == "bf16") {
    if (!d.supports_bf16()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--dtype: bf16 is not supported on ", d.id(), " (", d.name(),
                       "); allowed: fp16 or auto (auto picks fp16 on ", d.id(), ")"));
    }
    return s;
  }
  if (s == "fp16") return s;
  return absl::InvalidArgumentError(absl::StrCat("--dtype: unknown value '", requested,
                                                 "'; allowed: auto, bf16, fp16"));
}

// --kv-cache-dtype as vLLM spells it: auto (the model dtype) or an fp8
// format, 1 byte an element, on a device with fp8 (vLLM's fp8 KV paths:
// FlashAttention 3 / FlashInfer on Hopper, Ada and Blackwell, ROCm on
// MI300-class; servesim does not model the Ampere / Turing conversions).
absl::Status ResolveKvCacheDtype(const std::string& requested, const proto::Device& d,
                                 const std::string& dtype, std::string* name,
                                 int* bytes) {
  const std::string s = absl::AsciiStrToLower(requested);
  if (s.empty() || s == "auto" || s == dtype || (s == "bfloat16" && dtype == "bf16") ||
      (s == "float16" && dtype == "fp16")) {
    *name = dtype;
    *bytes = 2;
    return absl::OkStatus();
  }
  if (s == "fp8" || s == "fp8_e4m3" || s == "fp8_e5m2") {
    if (!(d.peak_flops_fp8() > 0)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--kv-cache-dtype ", requested, ": ", d.id(), " (", d.name(),
          ") has no fp8 (servesim models fp8 KV caches on devices with fp8: Ada, Hopper, "
          "Blackwell, MI300-class); allowed here: auto"));
    }
    *name = s;
    *bytes = 1;
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "--kv-cache-dtype: unknown value '", requested,
      "'; allowed: auto (the model dtype, ", dtype, "), fp8, fp8_e4m3, fp8_e5m2"));
}

absl::Status ValidateSpec(const ServerSpec& s) {
  if (!(s.gpu_memory_utilization > 0 && s.gpu_memory_utilization <= 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--gpu-memory-utilization: ", s.gpu_memory_utilization, " is outside (0, 1]"));
  }
  if (s.max_model_len < 0)
    return absl::InvalidArgumentError(
        absl::StrCat("--max-model-len: ", s.max_model_len,
                     " is negative; allowed: 0 (model limit) or > 0"));
  if (s.max_num_seqs < 0)
    return absl::InvalidArgumentError(absl::StrCat(
        "--max-num-seqs: ", s.max_num_seqs, " is negative; allowed: 0 (default) or > 0"));
  if (s.max_num_batched_tokens < 0)
    return absl::InvalidArgumentError(
        absl::StrCat("--max-num-batched-tokens: ", s.max_num_batched_tokens,
                     " is negative; allowed: 0 (default) or > 0"));
  if (s.block_size <= 0 || s.block_size > 4096)
    return absl::InvalidArgumentError(
        absl::StrCat("--block-size: ", s.block_size, " is outside [1, 4096]"));
  auto nonneg = [](const std::optional<double>& v, const char* flag) -> absl::Status {
    if (v && !(*v >= 0 && std::isfinite(*v)))
      return absl::InvalidArgumentError(
          absl::StrCat(flag, ": ", *v, " is not a finite value >= 0"));
    return absl::OkStatus();
  };
  RETURN_IF_ERROR(nonneg(s.measured_weights_gib, "--measured-weights-gib"));
  RETURN_IF_ERROR(nonneg(s.measured_non_torch_gib, "--measured-non-torch-gib"));
  RETURN_IF_ERROR(nonneg(s.measured_activation_peak_gib, "--measured-activation-gib"));
  RETURN_IF_ERROR(nonneg(s.measured_cuda_graph_gib, "--measured-cuda-graph-gib"));
  RETURN_IF_ERROR(nonneg(s.measured_kv_cache_gib, "--measured-kv-cache-gib"));
  return absl::OkStatus();
}

struct Resolved {
  proto::Device device;
  ModelArch model;
  WeightFormat format;
  int32_t weight_block_n = 0;  // the checkpoint's fp8 block, when loaded in it
};

absl::StatusOr<Resolved> Resolve(const ServerSpec& spec) {
  if (spec.device.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--device is required; allowed: ", AllowedDeviceNames()));
  }
  if (spec.model.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--model is required; allowed: ", AllowedModelNames()));
  }
  Resolved r;
  ASSIGN_OR_RETURN(r.device, FindDevice(spec.device));
  ASSIGN_OR_RETURN(proto::ModelArch desc, FindModel(spec.model));
  ASSIGN_OR_RETURN(r.model, ExpandModelArch(desc));
  // vLLM loads a quantized checkpoint in its own format (quantization_config
  // in config.json) and refuses a different --quantization.
  std::string quantization = spec.quantization;
  if (const std::string& ckpt = desc.checkpoint_quantization();
      absl::StartsWith(ckpt, kUnmodelledQuantPrefix)) {
    // A format servesim does not know by name: the user says which of its
    // formats it is (its weights would otherwise be taken as 16-bit).
    ASSIGN_OR_RETURN(const WeightFormat given, ResolveWeightFormat(spec.quantization));
    if (given.id == "none") {
      return absl::InvalidArgumentError(absl::StrCat(
          "--quantization: the checkpoint's quantization_config.quant_method is '",
          ckpt.substr(std::string_view(kUnmodelledQuantPrefix).size()), "' (", r.model.id,
          "), a format servesim does not model by name; pass the --quantization it "
          "matches (allowed: fp8, w8a8, w4a16, w4a16-emb4, mxfp4; e.g. w4a16 for 4-bit "
          "GPTQ or AWQ weights)"));
    }
  } else if (!ckpt.empty()) {
    ASSIGN_OR_RETURN(const WeightFormat given, ResolveWeightFormat(spec.quantization));
    if (given.id == "none") {
      quantization = ckpt;
    } else if (given.id != ckpt) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--quantization: ", given.id, " does not match the checkpoint's format ", ckpt,
          " (quantization_config of ", r.model.id, "); allowed: ", ckpt,
          " or none (the checkpoint's)"));
    }
  }
  ASSIGN_OR_RETURN(r.format, ResolveWeightFormat(quantization));
  if (quantization == desc.checkpoint_quantization())
    r.weight_block_n = desc.checkpoint_weight_block_n();
  // mxfp4 quantizes MoE experts only (vLLM's Mxfp4Config leaves linear
  // layers unquantized): on a dense model it would change nothing while
  // the result said mxfp4.
  if (r.format.expert_weight_bits > 0 && r.format.weight_bits == 16 &&
      r.model.num_experts == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--quantization ", r.format.id, ": quantizes MoE experts only, and ", r.model.id,
        " is dense (no experts), so every weight would stay 16-bit; allowed for it: ",
        "none, fp8, w8a8, w4a16, w4a16-emb4"));
  }
  RETURN_IF_ERROR(CheckWeightFormat(r.device, r.format.id));
  ApplyDeviceKernelRules(r.device, &r.format);
  return r;
}

// vLLM's serve defaults: >= 70 GiB and not an A100: 8192 / 1024; else 2048 / 256.
void DefaultSchedulerLimits(const proto::Device& d, int32_t* batched, int32_t* seqs) {
  const bool big = d.usable_memory_gib() >= 70 && !absl::StrContains(d.id(), "a100");
  *batched = d.default_max_num_batched_tokens() > 0 ? d.default_max_num_batched_tokens()
                                                    : (big ? 8192 : 2048);
  *seqs = d.default_max_num_seqs() > 0 ? d.default_max_num_seqs() : (big ? 1024 : 256);
}

}  // namespace

std::string AllowedDeviceNames() { return absl::StrJoin(DeviceIds(), ", "); }
std::string AllowedModelNames() {
  return absl::StrCat(
      absl::StrJoin(ModelIds(), ", "),
      " (or a Hugging Face id such as google/gemma-4-E2B-it, or a config.json path)");
}
std::string AllowedQuantizationNames() {
  return "none, fp8, w8a8, w4a16, w4a16-emb4, mxfp4";
}

// An uncalibrated device takes its priors by rule (catalog_priors.h); a
// calibrated one keeps its file as is. The note is kept only when no
// profile is given (a user's own profile then calibrates the device).
absl::Status ApplyPriorRule(const ServerSpec& spec, proto::Device* device,
                            std::string* note) {
  if (IsCalibratedDevice(*device)) return absl::OkStatus();
  ASSIGN_OR_RETURN(PriorsByRule rule, DerivePriorsByRule(*device));
  *device = std::move(rule.device);
  if (spec.calibration_profile.empty()) *note = std::move(rule.note);
  return absl::OkStatus();
}

absl::StatusOr<ParameterSet> DefaultParameters(const ServerSpec& spec) {
  ASSIGN_OR_RETURN(Resolved r, Resolve(spec));
  std::string note;
  RETURN_IF_ERROR(ApplyPriorRule(spec, &r.device, &note));
  return PriorStepParameters(r.device, r.model, r.format);
}

absl::StatusOr<Deployment> BuildDeployment(const ServerSpec& spec,
                                           const ParameterSet* params_override) {
  RETURN_IF_ERROR(ValidateSpec(spec));
  ASSIGN_OR_RETURN(Resolved r, Resolve(spec));
  Deployment d;
  d.spec = spec;
  if (params_override == nullptr)
    RETURN_IF_ERROR(ApplyPriorRule(spec, &r.device, &d.uncalibrated_note));
  d.device = r.device;
  d.model = r.model;
  d.format = r.format;
  ASSIGN_OR_RETURN(d.dtype, ResolveDtype(spec.dtype, d.device));
  const int dtype_bytes = 2;
  RETURN_IF_ERROR(ResolveKvCacheDtype(spec.kv_cache_dtype, d.device, d.dtype,
                                      &d.kv_cache_dtype, &d.kv_dtype_bytes));

  SchedulerConfig& s = d.scheduler;
  int32_t def_batched = 0, def_seqs = 0;
  DefaultSchedulerLimits(d.device, &def_batched, &def_seqs);
  s.max_num_batched_tokens =
      spec.max_num_batched_tokens > 0 ? spec.max_num_batched_tokens : def_batched;
  s.max_num_seqs = spec.max_num_seqs > 0 ? spec.max_num_seqs : def_seqs;
  // vLLM's SchedulerConfig refuses a step budget below the sequence limit.
  if (s.max_num_batched_tokens < s.max_num_seqs) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--max-num-batched-tokens: ", s.max_num_batched_tokens, " is below max_num_seqs ",
        s.max_num_seqs,
        spec.max_num_seqs > 0 ? " (--max-num-seqs)"
                              : absl::StrCat(" (vLLM's default on ", d.device.id(), ")"),
        "; vLLM refuses it: allowed >= ", s.max_num_seqs, ", or lower --max-num-seqs"));
  }
  const int64_t model_limit = d.model.max_position_embeddings;
  if (spec.max_model_len > 0 && model_limit > 0 && spec.max_model_len > model_limit) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--max-model-len: ", spec.max_model_len, " exceeds the model's limit of ",
        model_limit, " tokens (", d.model.id, ")"));
  }
  s.max_model_len = spec.max_model_len > 0
                        ? spec.max_model_len
                        : static_cast<int32_t>(model_limit > 0 ? model_limit : 8192);
  s.enable_chunked_prefill = true;
  s.enable_prefix_caching = spec.enable_prefix_caching;
  s.async_scheduling = spec.async_scheduling;
  s.reserve_full_isl = spec.scheduler_reserve_full_isl;

  // Tensor parallelism (hwmodels/parallelism.h): memory and step graph are
  // one rank's (every rank holds the same shards); collectives added below.
  RETURN_IF_ERROR(CheckParallelism(d.device, d.model, spec));
  // A block-quantized fp8 checkpoint: vLLM's Fp8 linear and MoE methods
  // refuse a per-rank width that is no multiple of the block (Qwen3-235B-
  // A22B-FP8 at TP 8: experts of 1,536 / 8 = 192, block 128).
  if (const int32_t bn = r.weight_block_n; bn > 0 && spec.tensor_parallel_size > 1) {
    const int32_t tp = spec.tensor_parallel_size;
    const bool ep = ExpertParallelSize(d.model, spec) > 1;
    auto check = [&](int64_t width, const std::string& what) -> absl::Status {
      if (width > 0 && (width / tp) % bn != 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--tensor-parallel-size: ", tp, " splits the ", what, " of ", d.model.id,
            " (", width, ") into ", width / tp,
            " per rank, not a multiple of the fp8 "
            "checkpoint's weight block ",
            bn, " (vLLM refuses to load it); allowed: a size that keeps it a multiple",
            d.model.num_experts > 0 && !ep ? ", or --enable-expert-parallel" : ""));
      }
      return absl::OkStatus();
    };
    for (const LayerArch& l : d.model.layers) {
      if (!l.moe) RETURN_IF_ERROR(check(l.intermediate_size, "MLP width"));
    }
    if (d.model.num_experts > 0 && !ep) {
      RETURN_IF_ERROR(check(d.model.expert_intermediate_size, "expert width"));
    }
  }
  d.tensor_parallel_size = spec.tensor_parallel_size;
  d.data_parallel_size = spec.data_parallel_size;
  d.expert_parallel_size = ExpertParallelSize(d.model, spec);
  const ModelArch rank = TensorParallelRank(d.model, d.tensor_parallel_size,
                                            d.expert_parallel_size, d.data_parallel_size);
  d.pipeline_parallel_size = spec.pipeline_parallel_size;
  const int32_t pp = d.pipeline_parallel_size;
  if (d.tensor_parallel_size > 1 || pp > 1 ||
      (d.data_parallel_size > 1 && d.expert_parallel_size > 1)) {
    // Each group's link: the TP group's, the DP group's (one rank of each
    // engine), and a stage-to-stage handoff's (hwmodels/parallelism.h).
    ASSIGN_OR_RETURN(const CollectiveLink link,
                     TensorParallelLink(d.device, d.tensor_parallel_size));
    ASSIGN_OR_RETURN(const CollectiveLink dp_link,
                     TensorParallelLink(d.device, d.data_parallel_size, false,
                                        d.tensor_parallel_size * d.data_parallel_size));
    if (d.tensor_parallel_size > 1 ||
        (d.data_parallel_size > 1 && d.expert_parallel_size > 1)) {
      d.collectives =
          CompileCollectives(d.model, d.tensor_parallel_size, link, dtype_bytes,
                             d.data_parallel_size, d.expert_parallel_size, &dp_link);
    }
    // Each group that talks names its link.
    if (d.tensor_parallel_size > 1) d.collective_link = link.description;
    if (d.data_parallel_size > 1 && d.expert_parallel_size > 1) {
      absl::StrAppend(&d.collective_link, d.collective_link.empty() ? "" : "; ",
                      "DP group: ", dp_link.description);
    }
    if (pp > 1) {
      d.stage_layers =
          PipelineStageLayers(static_cast<int32_t>(d.model.layers.size()), pp);
      for (int32_t st = 0; st < pp; ++st) {
        d.stage_collectives.push_back(
            d.tensor_parallel_size > 1
                ? CompileCollectives(PipelineStage(d.model, st, pp),
                                     d.tensor_parallel_size, link, dtype_bytes)
                : TensorParallelCollectives{});
      }
      ASSIGN_OR_RETURN(const CollectiveLink handoff,
                       TensorParallelLink(d.device, 2, /*point_to_point=*/true,
                                          d.tensor_parallel_size * pp));
      d.pipeline_transfer =
          CompilePipelineTransfer(d.model, d.tensor_parallel_size, handoff, dtype_bytes);
      absl::StrAppend(&d.collective_link, d.collective_link.empty() ? "" : "; ",
                      "stage handoff: ", handoff.description);
    }
  }

  ASSIGN_OR_RETURN(KvLayout layout,
                   PlanKvLayout(rank, d.kv_dtype_bytes, spec.block_size));
  // The TPU build keeps every layer's whole context (no sliding-window
  // block freeing): its logged capacity is KV bytes / bytes per token of all
  // KV layers (v5e: 5.52 GiB / 18,432 B = 321,563 tokens; logged 321,376).
  if (UsesTpuAccounting(d.device)) {
    for (KvGroupSpec& g : layout.spec.groups) g.sliding_window = 0;
  }
  if (pp == 1) {
    d.memory = PlanMemory(d.device, rank, d.format, dtype_bytes, s, spec, layout);
  } else {
    // Each stage profiles its own memory; the engine takes the fewest
    // blocks over the workers (vLLM get_kv_cache_configs).
    int32_t limiting = -1;
    for (int32_t st = 0; st < pp; ++st) {
      KvLayout stage_layout = layout;
      stage_layout.block_bytes =
          layout.page_bytes *
          PipelineStageBlockLayers(rank, layout.layers_per_group, st, pp);
      d.stage_memory.push_back(PlanMemory(d.device, PipelineStage(rank, st, pp), d.format,
                                          dtype_bytes, s, spec, stage_layout));
      const MemoryPlan& m = d.stage_memory.back();
      if (limiting >= 0 && !d.stage_memory[limiting].fits) continue;
      if (limiting < 0 || !m.fits || m.num_blocks < d.stage_memory[limiting].num_blocks) {
        limiting = st;
      }
    }
    d.memory = d.stage_memory[limiting];
    if (!d.memory.fits) {
      d.memory.reason =
          absl::StrCat("pipeline stage ", limiting, " of ", pp, " (layers ",
                       d.stage_layers[limiting].first, "-",
                       d.stage_layers[limiting].second - 1, "): ", d.memory.reason);
    }
  }
  d.kv_cache = layout.spec;
  d.kv_cache.num_blocks = d.memory.num_blocks;
  // The block pool the simulator tracks holds at most 2^30 blocks (17 G
  // tokens at 16 a block): only a toy model on a large device asks more.
  if (d.memory.fits && d.memory.num_blocks > (int64_t{1} << 30)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "the KV cache of %s on %s would hold %d blocks, more than the 2^30 the simulator "
        "tracks (a model this small on a device this large); raise --block-size or lower "
        "--gpu-memory-utilization",
        d.model.id, d.device.id(), d.memory.num_blocks));
  }

  ASSIGN_OR_RETURN(d.graph, CompiledStepGraph::Build(d.device, rank, d.format, d.dtype,
                                                     d.kv_dtype_bytes));
  for (int32_t st = 0; pp > 1 && st < pp; ++st) {
    ASSIGN_OR_RETURN(
        auto g, CompiledStepGraph::Build(d.device, PipelineStage(rank, st, pp), d.format,
                                         d.dtype, d.kv_dtype_bytes));
    d.stage_graphs.push_back(std::move(g));
  }
  d.params = PriorStepParameters(d.device, rank, d.format);
  std::string param_source = "priors";
  d.api_overhead_ms = kApiOverheadPriorMs;
  d.api_overhead_source =
      "prior of api_overhead_ms, 5 +- 5 ms: not fitted for this device, and a fit "
      "that leaves it fixed predicts with this value";
  if (params_override != nullptr) {
    for (const Parameter& p : params_override->params()) {
      if (Parameter* q = d.params.FindMutable(p.name)) *q = p;
    }
    param_source = "caller-supplied parameters";
  } else {
    // A shipped profile belongs to the shipped file of its device id.
    const bool shipped_device = IsShippedDevice(d.device);
    ResolvedProfile prof;
    if (!spec.calibration_profile.empty() || shipped_device) {
      ASSIGN_OR_RETURN(
          prof, ResolveCalibrationProfile(spec.calibration_profile, d.device.id()));
    }
    if (prof.found) {
      const std::string& path = prof.origin;
      // A profile fitted on one device says nothing about another: the
      // hash names the exact device file; without one, the shipped file.
      const std::string& want_hash = prof.profile.device_content_hash();
      // (file_hash: a profile written before content_hash left prices and
      // comments out.)
      if (want_hash.empty() ? !shipped_device
                            : want_hash != d.device.content_hash() &&
                                  want_hash != d.device.file_hash()) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "--calibration %s: the profile was fitted on %s (device_content_hash "
            "%s), not on this device file %s (%s); fit one for it with `servesim "
            "calibrate --device %s --bench FILE...`",
            path,
            want_hash.empty()
                ? absl::StrCat("the shipped device '", prof.profile.device(), "'")
                : absl::StrCat("device '", prof.profile.device(), "'"),
            want_hash.empty() ? "none: the shipped file" : want_hash, d.device.origin(),
            d.device.content_hash(), d.device.origin()));
      }
      if (!prof.profile.device().empty()) {
        auto of = want_hash.empty() ? FindDevice(prof.profile.device())
                                    : absl::StatusOr<proto::Device>(d.device);
        if (!of.ok() || of->id() != d.device.id()) {
          return absl::InvalidArgumentError(absl::StrFormat(
              "--calibration %s: the profile was fitted on device '%s' (its device "
              "field), not on '%s'; fit one for %s with `servesim calibrate --device %s "
              "--bench FILE...` or leave --calibration out for the shipped profile",
              spec.calibration_profile, prof.profile.device(), d.device.id(),
              d.device.id(), d.device.id()));
        }
      }
      const int n = ApplyProfile(prof.profile, &d.params);
      param_source = absl::StrCat("calibration profile ", path, " (", n,
                                  " step-model parameters; client-side ones such as "
                                  "api_overhead_ms are applied by the client)");
      d.calibrated = true;
      d.shipped_profile = prof.shipped;
      d.profile_software_build = prof.profile.software_build();
      d.profile_origin = path;
      d.fitted_range = prof.profile.fitted_range();
      d.fitted_servers.assign(prof.profile.fitted_servers().begin(),
                              prof.profile.fitted_servers().end());
      for (const auto& p : prof.profile.parameters()) {
        if (p.name() != "api_overhead_ms") continue;
        d.api_overhead_ms = std::max(0.0, p.value());
        d.api_overhead_source =
            absl::StrCat("api_overhead_ms of the calibration profile ", path);
      }
    }
  }
  d.step_model = RebuildStepModel(d, d.params);

  const WeightBytes wb = ComputeWeightBytes(rank, d.format, dtype_bytes);
  d.provenance = absl::StrCat(
      "device ", d.device.id(), " (", d.device.name(), "); model ", d.model.id, " (",
      d.model.display_name, "); format ", d.format.id, " (", d.format.description,
      "); dtype ", d.dtype,
      d.kv_dtype_bytes == 2 ? ""
                            : absl::StrCat(", KV cache ", d.kv_cache_dtype, " (1 byte)"),
      absl::StrFormat("; weights %.3f GiB estimated", wb.Total() / kBytesPerGib),
      "; memory sources: ", d.memory.sources, "; scheduler max_num_batched_tokens ",
      s.max_num_batched_tokens, ", max_num_seqs ", s.max_num_seqs, ", max_model_len ",
      s.max_model_len, s.async_scheduling ? ", async" : ", sync",
      s.reserve_full_isl ? "" : ", admission on the first chunk (no full-ISL reserve)",
      "; parameters from ", param_source, ". Step model: ", d.step_model->Describe());
  if (!d.uncalibrated_note.empty())
    absl::StrAppend(&d.provenance, " Uncalibrated: ", d.uncalibrated_note, ".");
  if (d.tensor_parallel_size > 1) {
    absl::StrAppend(&d.provenance, "; tensor parallel size ", d.tensor_parallel_size,
                    " (weights, memory and step per rank; collectives over ",
                    d.collective_link, ", datasheet figures, not calibrated)");
  }
  if (pp > 1) {
    absl::StrAppend(&d.provenance, "; pipeline parallel size ", pp,
                    " (layers per stage by vLLM's get_pp_indices; memory per stage, the "
                    "KV pool the fewest blocks over stages; vLLM's batch queue, up to ",
                    pp, " batches in flight, stages and transfers over ",
                    d.collective_link, ")");
  }
  if (d.expert_parallel_size > 1) {
    absl::StrAppend(
        &d.provenance, "; expert parallel size ", d.expert_parallel_size, " (",
        DescribeExpertSplit(d.model, d.tensor_parallel_size, d.expert_parallel_size),
        "; uniform routing: each rank runs its share of the top-k rows",
        d.data_parallel_size > 1 && d.tensor_parallel_size <= 1 && pp <= 1
            ? absl::StrCat("; DP expert collectives over ", d.collective_link)
            : "",
        ")");
  }
  return d;
}

std::shared_ptr<const StepTimeModel> RebuildStepModel(const Deployment& d,
                                                      const ParameterSet& params) {
  ParameterSet merged = d.params;
  for (const Parameter& p : params.params()) {
    if (Parameter* q = merged.FindMutable(p.name)) q->value = p.value;
  }
  if (d.pipeline_parallel_size <= 1) {
    return WithCollectives(d, RooflineStepModel::Compile(d.graph, merged));
  }
  std::vector<std::shared_ptr<const StepTimeModel>> stages;
  stages.reserve(d.stage_graphs.size());
  for (size_t st = 0; st < d.stage_graphs.size(); ++st) {
    std::shared_ptr<const StepTimeModel> m =
        RooflineStepModel::Compile(d.stage_graphs[st], merged);
    if (!d.stage_collectives[st].empty()) {
      m = std::make_shared<TensorParallelStepModel>(std::move(m),
                                                    d.stage_collectives[st]);
    }
    stages.push_back(std::move(m));
  }
  return std::make_shared<PipelineStepModel>(std::move(stages), d.pipeline_transfer);
}

std::shared_ptr<const StepTimeModel> WithCollectives(
    const Deployment& d, std::shared_ptr<const StepTimeModel> rank_model) {
  if (d.collectives.empty()) return rank_model;
  return std::make_shared<TensorParallelStepModel>(std::move(rank_model), d.collectives);
}

}  // namespace servesim
