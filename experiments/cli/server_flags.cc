#include "experiments/cli/server_flags.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "experiments/cli/cli.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/text_format.h"
#include "hwmodels/parallelism.h"
#include "hwmodels/server_spec.h"
#include "proto/text_format.h"
#include "sim/base/read_file.h"
#include "sim/base/status_macros.h"
#include "sim/client.h"
#include "sim/random_source.h"

namespace servesim::cli {

absl::StatusOr<uint64_t> ParseSeed(const std::string& text) {
  int64_t seed = -1;
  if (!absl::SimpleAtoi(text, &seed) || seed < 0) {
    return OutOfRangeError("--seed", text, "[0, 2^63) (an integer)");
  }
  return static_cast<uint64_t>(seed);
}
namespace {

bool Given(const CLI::Option* o) { return o != nullptr && o->count() > 0; }

// Merges `text` over `config` (a later --set wins, an explicit 0 or false
// included). Parsed on its own first: a field one text gives twice is an
// error, as in a --config file (merging took the last silently).
absl::Status MergeText(const std::string& text, const std::string& where,
                       proto::ExperimentConfig& config) {
  proto::ExperimentConfig alone;
  RETURN_IF_ERROR(ParseTextProto(text, where, &alone));
  return ParseTextProto(text, where, &config, /*merge=*/true);
}

}  // namespace

void ServerFlags::Register(CLI::App* cmd, bool with_calibration) {
  const ServerSpec kServer;  // the one home of the server defaults
  device_ =
      cmd->add_option("--device", device_v_,
                      "an id of `servesim devices` (t4, l4, mi300x, h100-sxm, ...) or a "
                      "device file path");
  model_ = cmd->add_option(
      "--model", model_v_,
      "gemma-4-e2b | gemma-4-e4b | gemma-4-12b | gemma-4-26b-a4b | gemma-4-31b, a "
      "Hugging Face id, or a config.json path");
  quantization_ =
      cmd->add_option("--quantization,-q", quantization_v_,
                      absl::StrCat("none | fp8 | w8a8 | w4a16 | w4a16-emb4 | mxfp4 "
                                   "(default ",
                                   kServer.quantization,
                                   "; none: the checkpoint's own format when its "
                                   "config.json declares one)"));
  dtype_ = cmd->add_option("--dtype", dtype_v_,
                           absl::StrCat("auto | bf16 | fp16 (default ", kServer.dtype,
                                        "; auto: the device's, fp16 on t4)"));
  kv_cache_dtype_ = cmd->add_option(
      "--kv-cache-dtype", kv_cache_dtype_v_,
      absl::StrCat("auto | fp8 | fp8_e4m3 | fp8_e5m2 (default ", kServer.kv_cache_dtype,
                   ": the model dtype; fp8 halves the KV bytes, on devices with fp8)"));
  max_model_len_ = cmd->add_option("--max-model-len", max_model_len_v_,
                                   "context length (default: the model's limit)");
  gpu_mem_ = cmd->add_option("--gpu-memory-utilization", gpu_mem_v_,
                             WithDefault("(0, 1]", kServer.gpu_memory_utilization));
  max_num_seqs_ = cmd->add_option("--max-num-seqs", max_num_seqs_v_,
                                  "default: vLLM's default for the device");
  max_num_batched_tokens_ =
      cmd->add_option("--max-num-batched-tokens", max_num_batched_tokens_v_,
                      "default: vLLM's default for the device");
  block_size_ = cmd->add_option("--block-size", block_size_v_,
                                WithDefault("KV block size", kServer.block_size));
  prefix_caching_ = cmd->add_flag(
      "--enable-prefix-caching,!--no-enable-prefix-caching", prefix_caching_v_,
      WithDefault("prefix caching", OnOff(kServer.enable_prefix_caching)));
  async_ =
      cmd->add_flag("--async-scheduling,!--no-async-scheduling", async_v_,
                    WithDefault("async scheduling", OnOff(kServer.async_scheduling)));
  reserve_full_isl_ = cmd->add_flag(
      "--scheduler-reserve-full-isl,!--no-scheduler-reserve-full-isl",
      reserve_full_isl_v_,
      WithDefault("admit a waiting request only when its whole prompt fits the free "
                  "KV blocks (vLLM's default since spring 2026)",
                  OnOff(kServer.scheduler_reserve_full_isl)));
  tp_ = cmd->add_option(
      "--tensor-parallel-size", tp_v_,
      WithDefault("chips one replica is split over", kServer.tensor_parallel_size));
  pp_ =
      cmd->add_option("--pipeline-parallel-size", pp_v_,
                      WithDefault("pipeline stages, each of --tensor-parallel-size chips",
                                  kServer.pipeline_parallel_size));
  dp_ = cmd->add_option("--data-parallel-size", dp_v_,
                        absl::StrCat("engines behind vLLM's DP load balancer, each of\n"
                                     "--tensor-parallel-size chips (default ",
                                     kServer.data_parallel_size,
                                     "; MoE: with\n"
                                     "--enable-expert-parallel, in lock-step)"));
  ep_ = cmd->add_flag("--enable-expert-parallel", ep_v_,
                      "expert parallelism for MoE: whole experts spread\n"
                      "over the TP x DP ranks");
  if (!with_calibration) return;
  calibration_ = cmd->add_option(
      "--calibration,--calibration-profile", calibration_v_,
      "calibration profile: a file from `servesim calibrate`, or a shipped one by name "
      "(l4, l4@vllm-0.28.0, ...: calibration/profiles/NAME.textproto); default: the "
      "device's shipped profile");
}

std::vector<CLI::Option*> ServerFlags::All() const {
  return {device_,
          model_,
          quantization_,
          dtype_,
          kv_cache_dtype_,
          max_model_len_,
          gpu_mem_,
          max_num_seqs_,
          max_num_batched_tokens_,
          block_size_,
          prefix_caching_,
          async_,
          calibration_,
          tp_,
          pp_,
          dp_,
          ep_};
}

std::vector<std::string> ServerFlags::Names() {
  CLI::App app;
  ServerFlags f;
  f.Register(&app);
  std::vector<std::string> out;
  for (const CLI::Option* o : f.All()) {
    if (o != nullptr) out.push_back(o->get_name());
  }
  return out;
}

std::vector<std::string> ServerFlags::GivenNames() const {
  std::vector<std::string> out;
  for (const CLI::Option* o : All()) {
    if (Given(o)) out.push_back(o->get_name());
  }
  return out;
}

absl::Status ServerFlags::ApplyTo(proto::ServerConfig& s) const {
  if (Given(device_)) s.set_device(device_v_);
  if (Given(model_)) s.set_model(model_v_);
  if (Given(quantization_)) s.set_quantization(quantization_v_);
  if (Given(dtype_)) s.set_dtype(dtype_v_);
  if (Given(kv_cache_dtype_)) s.set_kv_cache_dtype(kv_cache_dtype_v_);
  if (Given(max_model_len_)) {
    if (max_model_len_v_ < 1 || max_model_len_v_ > INT32_MAX) {
      return OutOfRangeError("--max-model-len", absl::StrCat(max_model_len_v_),
                             "[1, 2^31)");
    }
    s.set_max_model_len(static_cast<int32_t>(max_model_len_v_));
  }
  if (Given(gpu_mem_)) s.set_gpu_memory_utilization(gpu_mem_v_);
  if (Given(max_num_seqs_)) {
    if (max_num_seqs_v_ < 1 || max_num_seqs_v_ > INT32_MAX) {
      return OutOfRangeError("--max-num-seqs", absl::StrCat(max_num_seqs_v_),
                             "[1, 2^31)");
    }
    s.set_max_num_seqs(static_cast<int32_t>(max_num_seqs_v_));
  }
  if (Given(max_num_batched_tokens_)) {
    if (max_num_batched_tokens_v_ < 1 || max_num_batched_tokens_v_ > INT32_MAX) {
      return OutOfRangeError("--max-num-batched-tokens",
                             absl::StrCat(max_num_batched_tokens_v_), "[1, 2^31)");
    }
    s.set_max_num_batched_tokens(static_cast<int32_t>(max_num_batched_tokens_v_));
  }
  if (Given(block_size_)) {
    if (block_size_v_ < 1 || block_size_v_ > 1024) {
      return OutOfRangeError("--block-size", absl::StrCat(block_size_v_), "[1, 1024]");
    }
    s.set_block_size(static_cast<int32_t>(block_size_v_));
  }
  if (Given(prefix_caching_)) s.set_enable_prefix_caching(prefix_caching_v_);
  if (Given(async_)) s.set_async_scheduling(async_v_);
  if (Given(reserve_full_isl_)) s.set_scheduler_reserve_full_isl(reserve_full_isl_v_);
  if (Given(calibration_)) s.set_calibration_profile(calibration_v_);
  const struct {
    const CLI::Option* opt;
    int64_t value;
    const char* flag;
    void (proto::ServerConfig::*set)(int32_t);
  } sizes[] = {
      {tp_, tp_v_, "--tensor-parallel-size",
       &proto::ServerConfig::set_tensor_parallel_size},
      {pp_, pp_v_, "--pipeline-parallel-size",
       &proto::ServerConfig::set_pipeline_parallel_size},
      {dp_, dp_v_, "--data-parallel-size", &proto::ServerConfig::set_data_parallel_size},
  };
  for (const auto& z : sizes) {
    if (!Given(z.opt)) continue;
    if (z.value < 1 || z.value > kMaxParallelSize) {
      return OutOfRangeError(z.flag, absl::StrCat(z.value),
                             absl::StrCat("[1, ", kMaxParallelSize, "]"));
    }
    (s.*z.set)(static_cast<int32_t>(z.value));
  }
  if (Given(ep_)) s.set_enable_expert_parallel(ep_v_);
  return absl::OkStatus();
}

void ExperimentFlags::RegisterClientFlags(CLI::App* cmd) {
  // The one home of the client defaults (ApplyDefaults reads the same).
  const RandomDatasetConfig kData;
  const ClientConfig kClient;
  num_prompts_ = cmd->add_option("--num-prompts", num_prompts_v_,
                                 WithDefault("requests to send", kData.num_prompts));
  request_rate_ =
      cmd->add_option("--request-rate", request_rate_v_,
                      absl::StrCat("requests/s or inf (default ", kClient.request_rate,
                                   "; with --trace: replay)"));
  burstiness_ = cmd->add_option(
      "--burstiness", burstiness_v_,
      WithDefault("Gamma shape in [0.001, 1000], 1 = Poisson", kClient.burstiness));
  max_concurrency_ = cmd->add_option("--max-concurrency", max_concurrency_v_,
                                     "requests in flight at most (default unlimited)");
  input_len_ = cmd->add_option("--random-input-len", input_len_v_,
                               WithDefault("", kData.input_len));
  output_len_ = cmd->add_option("--random-output-len", output_len_v_,
                                WithDefault("", kData.output_len));
  range_ratio_ = cmd->add_option("--random-range-ratio", range_ratio_v_,
                                 WithDefault("[0, 1)", kData.range_ratio));
  seed_ = cmd->add_option("--seed", seed_v_, WithDefault("random seed", kClient.seed));
  ignore_eos_ = cmd->add_flag("--ignore-eos", ignore_eos_v_,
                              "outputs have exactly the asked length (always so here)");
  overhead_ =
      cmd->add_option("--client-overhead-s", overhead_v_,
                      "fixed client cost per request before it reaches the server");
  trace_ =
      cmd->add_option("--trace", trace_v_, "replay this trace instead of random prompts");
  trace_format_ = cmd->add_option("--trace-format", trace_format_v_, "default: detect");
}

void ExperimentFlags::RegisterConfigFlags(CLI::App* cmd) {
  cmd->add_option("--config", config_path_, "experiment config (text proto)");
  cmd->add_option("--set", sets_,
                  "text-proto override merged on top of --config, e.g. "
                  "'client { max_concurrency: 8 }' (repeatable; a later one over an "
                  "earlier one; a field a command-line flag also sets takes the flag's "
                  "value)");
}

absl::StatusOr<proto::ExperimentConfig> ExperimentFlags::Resolve() const {
  proto::ExperimentConfig c;
  if (!config_path_.empty()) {
    ASSIGN_OR_RETURN(const std::string text, ReadTextFile(config_path_, "--config"));
    // Parsed, not merged: a field the file gives twice is an error naming
    // its line (merging took the last silently); --set merges on top.
    RETURN_IF_ERROR(ParseTextProto(text, config_path_, &c));
  }
  for (size_t i = 0; i < sets_.size(); ++i) {
    RETURN_IF_ERROR(MergeText(sets_[i], absl::StrFormat("--set #%d", i + 1), c));
  }
  // A fleet config names each replica's server: a single-server flag would be
  // silently ignored.
  if (c.fleet().replicas_size() > 0) {
    if (const std::vector<std::string> given = server_.GivenNames(); !given.empty()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: the config defines a fleet (fleet.replicas); set it in each replica's "
          "server instead",
          given.front()));
    }
  }
  RETURN_IF_ERROR(server_.ApplyTo(*c.mutable_server()));

  proto::ClientConfig& cl = *c.mutable_client();
  if (Given(num_prompts_)) {
    if (num_prompts_v_ < 1 || num_prompts_v_ > INT32_MAX) {
      return OutOfRangeError("--num-prompts", absl::StrCat(num_prompts_v_), "[1, 2^31)");
    }
    cl.set_num_prompts(static_cast<int32_t>(num_prompts_v_));
  }
  if (Given(request_rate_)) {
    ASSIGN_OR_RETURN(double rate, ParseRequestRate(request_rate_v_));
    cl.set_request_rate(rate);
  }
  if (Given(burstiness_)) cl.set_burstiness(burstiness_v_);
  if (Given(max_concurrency_)) {
    if (max_concurrency_v_ < 1 || max_concurrency_v_ > INT32_MAX) {
      return OutOfRangeError("--max-concurrency", absl::StrCat(max_concurrency_v_),
                             "[1, 2^31) (omit it for unlimited)");
    }
    cl.set_max_concurrency(static_cast<int32_t>(max_concurrency_v_));
  }
  if (Given(input_len_)) {
    if (input_len_v_ < 1 || input_len_v_ > INT32_MAX) {
      return OutOfRangeError("--random-input-len", absl::StrCat(input_len_v_),
                             "[1, 2^31)");
    }
    cl.set_random_input_len(static_cast<int32_t>(input_len_v_));
  }
  if (Given(output_len_)) {
    if (output_len_v_ < 1 || output_len_v_ > INT32_MAX) {
      return OutOfRangeError("--random-output-len", absl::StrCat(output_len_v_),
                             "[1, 2^31)");
    }
    cl.set_random_output_len(static_cast<int32_t>(output_len_v_));
  }
  if (Given(range_ratio_)) cl.set_random_range_ratio(range_ratio_v_);
  if (Given(seed_)) {
    ASSIGN_OR_RETURN(const uint64_t seed, ParseSeed(seed_v_));
    cl.set_seed(seed);
  }
  if (Given(ignore_eos_)) cl.set_ignore_eos(ignore_eos_v_);
  if (Given(overhead_)) cl.set_client_overhead_s(overhead_v_);
  if (Given(trace_)) {
    if (trace_v_.empty()) {
      return absl::InvalidArgumentError("--trace: empty path; give a trace file");
    }
    cl.set_trace(trace_v_);
  }
  if (Given(trace_format_)) cl.set_trace_format(trace_format_v_);
  if (!cl.trace().empty()) {
    // The trace gives the lengths and the arrival process (a --request-rate
    // only rescales its timeline): these flags would be silently ignored.
    for (CLI::Option* o : {input_len_, output_len_, range_ratio_, burstiness_}) {
      if (Given(o)) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "%s: does not apply with --trace (the trace gives the lengths and arrival "
            "times; --request-rate rescales them)",
            o->get_name()));
      }
    }
  }
  ApplyDefaults(c);
  RETURN_IF_ERROR(Validate(c));
  return c;
}

}  // namespace servesim::cli
