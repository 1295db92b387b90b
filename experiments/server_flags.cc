#include "experiments/server_flags.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/text_format.h"
#include "hwmodels/parallelism.h"
#include "proto/text_format.h"
#include "sim/status_macros.h"

namespace servesim::cli {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

bool Given(const CLI::Option* o) { return o != nullptr && o->count() > 0; }

absl::Status MergeText(const std::string& text, const std::string& where,
                       proto::ExperimentConfig& config) {
  return ParseTextProto(text, where, &config, /*merge=*/true);
}

absl::Status OutOfRange(std::string_view flag, const std::string& value,
                        std::string_view range) {
  return absl::InvalidArgumentError(
      absl::StrFormat("%s: %s is out of range %s", flag, value, range));
}

}  // namespace

absl::StatusOr<double> ParseRequestRate(const std::string& text) {
  const std::string t = absl::AsciiStrToLower(text);
  if (t == "inf" || t == "infinity") return kInf;
  double v = 0;
  if (!absl::SimpleAtod(text, &v) || !std::isfinite(v) || v <= 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--request-rate: \"%s\" is not a positive number of requests/s or inf", text));
  }
  return v;
}

void ServerFlags::Register(CLI::App* cmd, bool with_calibration) {
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
                      "none | fp8 | w8a8 | w4a16 | w4a16-emb4 (default none)");
  dtype_ = cmd->add_option("--dtype", dtype_v_,
                           "auto | bf16 | fp16 (default auto: the device's, fp16 on t4)");
  max_model_len_ = cmd->add_option("--max-model-len", max_model_len_v_,
                                   "context length (default: the model's limit)");
  gpu_mem_ =
      cmd->add_option("--gpu-memory-utilization", gpu_mem_v_, "(0, 1], default 0.90");
  max_num_seqs_ = cmd->add_option("--max-num-seqs", max_num_seqs_v_,
                                  "default: vLLM's default for the device");
  max_num_batched_tokens_ =
      cmd->add_option("--max-num-batched-tokens", max_num_batched_tokens_v_,
                      "default: vLLM's default for the device");
  block_size_ =
      cmd->add_option("--block-size", block_size_v_, "KV block size, default 16");
  prefix_caching_ = cmd->add_flag("--enable-prefix-caching,!--no-enable-prefix-caching",
                                  prefix_caching_v_, "prefix caching (default on)");
  async_ = cmd->add_flag("--async-scheduling,!--no-async-scheduling", async_v_,
                         "async scheduling (default on)");
  tp_ = cmd->add_option("--tensor-parallel-size", tp_v_,
                        "chips one replica is split over (default 1)");
  pp_ = cmd->add_option("--pipeline-parallel-size", pp_v_,
                        "pipeline stages (default 1; above 1 not modelled yet)");
  dp_ = cmd->add_option("--data-parallel-size", dp_v_,
                        "engine replicas behind vLLM's DP balancer (default 1; above 1 "
                        "not modelled yet)");
  ep_ = cmd->add_flag("--enable-expert-parallel", ep_v_,
                      "expert parallelism for MoE (not modelled yet)");
  if (!with_calibration) return;
  calibration_ = cmd->add_option(
      "--calibration,--calibration-profile", calibration_v_,
      "calibration profile: a file from `servesim calibrate`, or a shipped one by name "
      "(calibration/profiles/NAME.textproto); default: the device's shipped profile");
}

std::vector<CLI::Option*> ServerFlags::All() const {
  return {device_,
          model_,
          quantization_,
          dtype_,
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
  if (Given(max_model_len_)) {
    if (max_model_len_v_ < 1 || max_model_len_v_ > INT32_MAX) {
      return OutOfRange("--max-model-len", absl::StrCat(max_model_len_v_), "[1, 2^31)");
    }
    s.set_max_model_len(static_cast<int32_t>(max_model_len_v_));
  }
  if (Given(gpu_mem_)) s.set_gpu_memory_utilization(gpu_mem_v_);
  if (Given(max_num_seqs_)) {
    if (max_num_seqs_v_ < 1 || max_num_seqs_v_ > INT32_MAX) {
      return OutOfRange("--max-num-seqs", absl::StrCat(max_num_seqs_v_), "[1, 2^31)");
    }
    s.set_max_num_seqs(static_cast<int32_t>(max_num_seqs_v_));
  }
  if (Given(max_num_batched_tokens_)) {
    if (max_num_batched_tokens_v_ < 1 || max_num_batched_tokens_v_ > INT32_MAX) {
      return OutOfRange("--max-num-batched-tokens",
                        absl::StrCat(max_num_batched_tokens_v_), "[1, 2^31)");
    }
    s.set_max_num_batched_tokens(static_cast<int32_t>(max_num_batched_tokens_v_));
  }
  if (Given(block_size_)) {
    if (block_size_v_ < 1 || block_size_v_ > 1024) {
      return OutOfRange("--block-size", absl::StrCat(block_size_v_), "[1, 1024]");
    }
    s.set_block_size(static_cast<int32_t>(block_size_v_));
  }
  if (Given(prefix_caching_)) s.set_enable_prefix_caching(prefix_caching_v_);
  if (Given(async_)) s.set_async_scheduling(async_v_);
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
      return OutOfRange(z.flag, absl::StrCat(z.value),
                        absl::StrCat("[1, ", kMaxParallelSize, "]"));
    }
    (s.*z.set)(static_cast<int32_t>(z.value));
  }
  if (Given(ep_)) s.set_enable_expert_parallel(ep_v_);
  return absl::OkStatus();
}

void ExperimentFlags::RegisterClientFlags(CLI::App* cmd) {
  num_prompts_ =
      cmd->add_option("--num-prompts", num_prompts_v_, "requests to send (1000)");
  request_rate_ =
      cmd->add_option("--request-rate", request_rate_v_,
                      "requests/s or inf (default inf; with --trace: replay)");
  burstiness_ =
      cmd->add_option("--burstiness", burstiness_v_, "Gamma shape, 1 = Poisson");
  max_concurrency_ = cmd->add_option("--max-concurrency", max_concurrency_v_,
                                     "requests in flight at most (default unlimited)");
  input_len_ = cmd->add_option("--random-input-len", input_len_v_, "default 1024");
  output_len_ = cmd->add_option("--random-output-len", output_len_v_, "default 128");
  range_ratio_ =
      cmd->add_option("--random-range-ratio", range_ratio_v_, "[0, 1), default 0");
  seed_ = cmd->add_option("--seed", seed_v_, "random seed (default 0)");
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
                  "text-proto override merged on top, e.g. "
                  "'client { max_concurrency: 8 }' (repeatable)");
}

absl::StatusOr<proto::ExperimentConfig> ExperimentFlags::Resolve() const {
  proto::ExperimentConfig c;
  if (!config_path_.empty()) {
    if (std::error_code ec; std::filesystem::is_directory(config_path_, ec)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "--config: %s is a directory; give an ExperimentConfig text-proto file",
          config_path_));
    }
    std::ifstream in(config_path_);
    if (!in) {
      return absl::NotFoundError(
          absl::StrFormat("--config: cannot read %s", config_path_));
    }
    std::stringstream ss;
    ss << in.rdbuf();
    RETURN_IF_ERROR(MergeText(ss.str(), config_path_, c));
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
      return OutOfRange("--num-prompts", absl::StrCat(num_prompts_v_), "[1, 2^31)");
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
      return OutOfRange("--max-concurrency", absl::StrCat(max_concurrency_v_),
                        "[1, 2^31) (omit it for unlimited)");
    }
    cl.set_max_concurrency(static_cast<int32_t>(max_concurrency_v_));
  }
  if (Given(input_len_)) {
    if (input_len_v_ < 1 || input_len_v_ > INT32_MAX) {
      return OutOfRange("--random-input-len", absl::StrCat(input_len_v_), "[1, 2^31)");
    }
    cl.set_random_input_len(static_cast<int32_t>(input_len_v_));
  }
  if (Given(output_len_)) {
    if (output_len_v_ < 1 || output_len_v_ > INT32_MAX) {
      return OutOfRange("--random-output-len", absl::StrCat(output_len_v_), "[1, 2^31)");
    }
    cl.set_random_output_len(static_cast<int32_t>(output_len_v_));
  }
  if (Given(range_ratio_)) cl.set_random_range_ratio(range_ratio_v_);
  if (Given(seed_)) {
    int64_t seed = -1;
    if (!absl::SimpleAtoi(seed_v_, &seed) || seed < 0) {
      return OutOfRange("--seed", seed_v_, "[0, 2^63) (an integer)");
    }
    cl.set_seed(static_cast<uint64_t>(seed));
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

void ApplyServerDefaults(proto::ServerConfig& s) {
  const ServerSpec kDefault;  // the one home of the server defaults
  if (s.dtype().empty()) s.set_dtype(kDefault.dtype);
  if (s.quantization().empty()) s.set_quantization(kDefault.quantization);
  if (!s.has_gpu_memory_utilization())
    s.set_gpu_memory_utilization(kDefault.gpu_memory_utilization);
  if (!s.has_block_size()) s.set_block_size(kDefault.block_size);
  if (!s.has_enable_prefix_caching())
    s.set_enable_prefix_caching(kDefault.enable_prefix_caching);
  if (!s.has_async_scheduling()) s.set_async_scheduling(kDefault.async_scheduling);
}

void ApplyDefaults(proto::ExperimentConfig& c) {
  ApplyServerDefaults(*c.mutable_server());
  proto::ClientConfig& cl = *c.mutable_client();
  // With a trace, num_prompts 0 means every request of the trace.
  if (cl.num_prompts() == 0 && cl.trace().empty()) cl.set_num_prompts(1000);
  if (cl.random_input_len() == 0) cl.set_random_input_len(1024);
  if (cl.random_output_len() == 0) cl.set_random_output_len(128);
  if (!cl.has_burstiness()) cl.set_burstiness(1.0);
  if (!cl.has_seed()) cl.set_seed(0);
  if (!cl.has_ignore_eos()) cl.set_ignore_eos(true);
}

absl::Status ValidateServer(const proto::ServerConfig& s, const std::string& where) {
  if (s.device().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        where,
        "--device: required; an id of `servesim devices` (t4, l4, mi300x, tpu-v5e, "
        "tpu-v6e, h100-sxm, ...) or a device file path"));
  }
  if (s.model().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, "--model: required (e.g. gemma-4-e2b)"));
  }
  if (s.max_model_len() < 0) {
    return OutOfRange("--max-model-len", absl::StrCat(s.max_model_len()),
                      "[1, 2^31) (0: the model's limit)");
  }
  if (s.has_gpu_memory_utilization() &&
      !(s.gpu_memory_utilization() > 0 && s.gpu_memory_utilization() <= 1)) {
    return OutOfRange("--gpu-memory-utilization",
                      absl::StrCat(s.gpu_memory_utilization()), "(0, 1]");
  }
  if (s.max_num_seqs() < 0) {
    return OutOfRange("--max-num-seqs", absl::StrCat(s.max_num_seqs()),
                      "[1, 2^31) (0: default)");
  }
  if (s.max_num_batched_tokens() < 0) {
    return OutOfRange("--max-num-batched-tokens",
                      absl::StrCat(s.max_num_batched_tokens()), "[1, 2^31) (0: default)");
  }
  if (s.has_block_size()) RETURN_IF_ERROR(CheckBlockSize(s.block_size()));
  for (const auto& [value, flag] :
       {std::pair{s.tensor_parallel_size(), "--tensor-parallel-size"},
        std::pair{s.pipeline_parallel_size(), "--pipeline-parallel-size"},
        std::pair{s.data_parallel_size(), "--data-parallel-size"}}) {
    if (value < 0 || value > kMaxParallelSize) {
      return OutOfRange(absl::StrCat(where, flag), absl::StrCat(value),
                        absl::StrCat("[1, ", kMaxParallelSize, "] (0: 1)"));
    }
  }
  if (absl::Status st = CheckBatchLimits(s.max_num_seqs(), s.max_num_batched_tokens());
      !st.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(where, st.message()));
  }
  return absl::OkStatus();
}

absl::Status Validate(const proto::ExperimentConfig& c) {
  RETURN_IF_ERROR(ValidateRanges(c));
  if (c.server().max_model_len() > 0) {
    RETURN_IF_ERROR(
        CheckRandomLengthsFit(c.client(), c.server().max_model_len(), "--max-model-len"));
  }
  return absl::OkStatus();
}

absl::Status ValidateRanges(const proto::ExperimentConfig& c) {
  const proto::ServerConfig& s = c.server();
  if (c.fleet().replicas_size() > 0) {
    int64_t total_replicas = 0;
    for (int i = 0; i < c.fleet().replicas_size(); ++i) {
      const proto::FleetReplica& fr = c.fleet().replicas(i);
      RETURN_IF_ERROR(
          ValidateServer(fr.server(), absl::StrFormat("fleet.replicas[%d]: ", i)));
      if (fr.count() < 0 || fr.count() > kMaxReplicas) {
        return OutOfRange(absl::StrFormat("fleet.replicas[%d].count", i),
                          absl::StrCat(fr.count()),
                          absl::StrCat("[1, ", kMaxReplicas, "] (0: 1)"));
      }
      total_replicas += std::max<int64_t>(1, fr.count());
    }
    if (total_replicas > kMaxReplicas) {
      return OutOfRange("fleet.replicas: total count", absl::StrCat(total_replicas),
                        absl::StrCat("[1, ", kMaxReplicas, "]"));
    }
  } else {
    RETURN_IF_ERROR(ValidateServer(s, ""));
  }
  const proto::ClientConfig& cl = c.client();
  if (cl.num_prompts() < (cl.trace().empty() ? 1 : 0)) {
    return OutOfRange("--num-prompts", absl::StrCat(cl.num_prompts()), "[1, 2^31)");
  }
  if (std::isnan(cl.request_rate()) || cl.request_rate() < 0) {
    return OutOfRange("--request-rate", absl::StrCat(cl.request_rate()),
                      "(0, inf] requests/s (0 or omitted: inf, or replay with --trace)");
  }
  if (!(cl.burstiness() > 0) || std::isinf(cl.burstiness())) {
    return OutOfRange("--burstiness", absl::StrCat(cl.burstiness()), "(0, inf)");
  }
  if (cl.max_concurrency() < 0) {
    return OutOfRange("--max-concurrency", absl::StrCat(cl.max_concurrency()),
                      "[1, 2^31) (0 or omitted: unlimited)");
  }
  if (cl.random_input_len() < 1) {
    return OutOfRange("--random-input-len", absl::StrCat(cl.random_input_len()),
                      "[1, 2^31)");
  }
  if (cl.random_output_len() < 1) {
    return OutOfRange("--random-output-len", absl::StrCat(cl.random_output_len()),
                      "[1, 2^31)");
  }
  if (!(cl.random_range_ratio() >= 0 && cl.random_range_ratio() < 1)) {
    return OutOfRange("--random-range-ratio", absl::StrCat(cl.random_range_ratio()),
                      "[0, 1)");
  }
  if (!(cl.client_overhead_s() >= 0 && cl.client_overhead_s() <= 1e6)) {
    return OutOfRange("--client-overhead-s", absl::StrCat(cl.client_overhead_s()),
                      "[0, 1e6] s");
  }
  if (!cl.trace_format().empty() && cl.trace().empty()) {
    return absl::InvalidArgumentError("--trace-format: given without --trace");
  }
  return absl::OkStatus();
}

absl::Status CheckBlockSize(int64_t block_size) {
  if (block_size < 1 || block_size > 1024 || (block_size & (block_size - 1)) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--block-size: ", block_size,
        " is not allowed; allowed: a power of two in [1, 1024] (vLLM's CUDA choices: 1, "
        "8, 16, 32, 64, 128)"));
  }
  return absl::OkStatus();
}

absl::Status CheckBatchLimits(int64_t max_num_seqs, int64_t max_num_batched_tokens) {
  if (max_num_seqs > 0 && max_num_batched_tokens > 0 &&
      max_num_batched_tokens < max_num_seqs) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--max-num-batched-tokens: %d is smaller than --max-num-seqs %d (vLLM requires "
        "max_num_batched_tokens >= max_num_seqs)",
        max_num_batched_tokens, max_num_seqs));
  }
  return absl::OkStatus();
}

absl::Status CheckRandomLengthsFit(const proto::ClientConfig& cl, int64_t max_model_len,
                                   std::string_view limit_name) {
  if (!cl.trace().empty()) return absl::OkStatus();
  const double r = cl.random_range_ratio();
  const int64_t max_in = static_cast<int64_t>(std::ceil(cl.random_input_len() * (1 + r)));
  const int64_t max_out =
      static_cast<int64_t>(std::ceil(cl.random_output_len() * (1 + r)));
  if (max_in + max_out > max_model_len) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--random-input-len + --random-output-len: up to %d + %d = %d tokens (with "
        "--random-range-ratio %g) exceeds %s %d; allowed: at most %d in total",
        max_in, max_out, max_in + max_out, r, limit_name, max_model_len, max_model_len));
  }
  return absl::OkStatus();
}

ServerSpec ToServerSpec(const proto::ServerConfig& server) {
  proto::ServerConfig s = server;
  ApplyServerDefaults(s);
  ServerSpec spec;
  spec.device = s.device();
  spec.model = s.model();
  spec.dtype = s.dtype();
  spec.quantization = s.quantization();
  spec.max_model_len = s.max_model_len();
  spec.gpu_memory_utilization = s.gpu_memory_utilization();
  spec.max_num_seqs = s.max_num_seqs();
  spec.max_num_batched_tokens = s.max_num_batched_tokens();
  spec.block_size = s.block_size();
  spec.enable_prefix_caching = s.enable_prefix_caching();
  spec.async_scheduling = s.async_scheduling();
  spec.calibration_profile = s.calibration_profile();
  spec.tensor_parallel_size = std::max(1, s.tensor_parallel_size());
  spec.pipeline_parallel_size = std::max(1, s.pipeline_parallel_size());
  spec.data_parallel_size = std::max(1, s.data_parallel_size());
  spec.enable_expert_parallel = s.enable_expert_parallel();
  return spec;
}

ClientConfig ToClientConfig(const proto::ClientConfig& cl) {
  ClientConfig c;
  // A trace's own arrival times are replayed; a request_rate rescales that
  // timeline (OpenRequestSource) rather than replacing it.
  c.replay_arrivals = !cl.trace().empty();
  c.request_rate = cl.request_rate() > 0 ? cl.request_rate() : kInf;
  c.burstiness = cl.has_burstiness() ? cl.burstiness() : 1.0;
  c.max_concurrency = cl.max_concurrency();
  c.client_overhead_ns = static_cast<TimeNs>(std::llround(cl.client_overhead_s() * 1e9));
  c.seed = cl.has_seed() ? cl.seed() : 0;
  return c;
}

RandomDatasetConfig ToRandomDataset(const proto::ClientConfig& cl) {
  RandomDatasetConfig d;
  d.num_prompts = cl.num_prompts() > 0 ? cl.num_prompts() : 1000;
  d.input_len = cl.random_input_len() > 0 ? cl.random_input_len() : 1024;
  d.output_len = cl.random_output_len() > 0 ? cl.random_output_len() : 128;
  d.range_ratio = cl.random_range_ratio();
  d.seed = cl.has_seed() ? cl.seed() : 0;
  return d;
}

std::string ConfigToText(const proto::ExperimentConfig& config) {
  std::string out;
  google::protobuf::TextFormat::Printer printer;
  printer.PrintToString(config, &out);
  return out;
}

}  // namespace servesim::cli
