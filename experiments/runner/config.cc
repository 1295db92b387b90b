#include "experiments/runner/config.h"

#include <cmath>
#include <limits>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "google/protobuf/text_format.h"
#include "hwmodels/parallelism.h"
#include "sim/base/status_macros.h"

namespace servesim {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

}  // namespace

absl::Status OutOfRangeError(std::string_view field, const std::string& value,
                             std::string_view range) {
  return absl::InvalidArgumentError(
      absl::StrFormat("%s: %s is out of range %s", field, value, range));
}

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
  // The one home of the client defaults: the initialisers of the structs
  // the config resolves to.
  const RandomDatasetConfig kData;
  const ClientConfig kClient;
  // With a trace, num_prompts 0 means every request of the trace.
  // An explicit 0 is kept for ValidateRanges to refuse (or, with a trace,
  // for num_prompts, to mean all of it).
  if (!cl.has_num_prompts() && cl.trace().empty())
    cl.set_num_prompts(static_cast<int32_t>(kData.num_prompts));
  if (!cl.has_random_input_len()) cl.set_random_input_len(kData.input_len);
  if (!cl.has_random_output_len()) cl.set_random_output_len(kData.output_len);
  if (!cl.has_burstiness()) cl.set_burstiness(kClient.burstiness);
  if (!cl.has_seed()) cl.set_seed(kClient.seed);
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
    return OutOfRangeError("--max-model-len", absl::StrCat(s.max_model_len()),
                           "[1, 2^31) (0: the model's limit)");
  }
  if (s.has_gpu_memory_utilization() &&
      !(s.gpu_memory_utilization() > 0 && s.gpu_memory_utilization() <= 1)) {
    return OutOfRangeError("--gpu-memory-utilization",
                           absl::StrCat(s.gpu_memory_utilization()), "(0, 1]");
  }
  if (s.max_num_seqs() < 0) {
    return OutOfRangeError("--max-num-seqs", absl::StrCat(s.max_num_seqs()),
                           "[1, 2^31) (0: default)");
  }
  if (s.max_num_batched_tokens() < 0) {
    return OutOfRangeError("--max-num-batched-tokens",
                           absl::StrCat(s.max_num_batched_tokens()),
                           "[1, 2^31) (0: default)");
  }
  if (s.has_block_size()) RETURN_IF_ERROR(CheckBlockSize(s.block_size()));
  for (const auto& [value, flag] :
       {std::pair{s.tensor_parallel_size(), "--tensor-parallel-size"},
        std::pair{s.pipeline_parallel_size(), "--pipeline-parallel-size"},
        std::pair{s.data_parallel_size(), "--data-parallel-size"}}) {
    if (value < 0 || value > kMaxParallelSize) {
      return OutOfRangeError(absl::StrCat(where, flag), absl::StrCat(value),
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
        return OutOfRangeError(absl::StrFormat("fleet.replicas[%d].count", i),
                               absl::StrCat(fr.count()),
                               absl::StrCat("[1, ", kMaxReplicas, "] (0: 1)"));
      }
      total_replicas += std::max<int64_t>(1, fr.count());
    }
    if (total_replicas > kMaxReplicas) {
      return OutOfRangeError("fleet.replicas: total count", absl::StrCat(total_replicas),
                             absl::StrCat("[1, ", kMaxReplicas, "]"));
    }
  } else {
    RETURN_IF_ERROR(ValidateServer(s, ""));
  }
  const proto::ClientConfig& cl = c.client();
  if (cl.num_prompts() < (cl.trace().empty() ? 1 : 0)) {
    return OutOfRangeError("--num-prompts", absl::StrCat(cl.num_prompts()), "[1, 2^31)");
  }
  if (std::isnan(cl.request_rate()) || cl.request_rate() < 0) {
    return OutOfRangeError(
        "--request-rate", absl::StrCat(cl.request_rate()),
        "(0, inf] requests/s (0 or omitted: inf, or replay with --trace)");
  }
  if (!(cl.burstiness() >= 1e-3 && cl.burstiness() <= 1e3)) {
    return OutOfRangeError("--burstiness", absl::StrCat(cl.burstiness()),
                           "[0.001, 1000]");
  }
  if (cl.max_concurrency() < 0) {
    return OutOfRangeError("--max-concurrency", absl::StrCat(cl.max_concurrency()),
                           "[1, 2^31) (0 or omitted: unlimited)");
  }
  if (cl.random_input_len() < 1) {
    return OutOfRangeError("--random-input-len", absl::StrCat(cl.random_input_len()),
                           "[1, 2^31)");
  }
  if (cl.random_output_len() < 1) {
    return OutOfRangeError("--random-output-len", absl::StrCat(cl.random_output_len()),
                           "[1, 2^31)");
  }
  if (!(cl.random_range_ratio() >= 0 && cl.random_range_ratio() < 1)) {
    return OutOfRangeError("--random-range-ratio", absl::StrCat(cl.random_range_ratio()),
                           "[0, 1)");
  }
  if (!(cl.client_overhead_s() >= 0 && cl.client_overhead_s() <= 1e6)) {
    return OutOfRangeError("--client-overhead-s", absl::StrCat(cl.client_overhead_s()),
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
  if (!s.kv_cache_dtype().empty()) spec.kv_cache_dtype = s.kv_cache_dtype();
  spec.max_model_len = s.max_model_len();
  spec.gpu_memory_utilization = s.gpu_memory_utilization();
  spec.max_num_seqs = s.max_num_seqs();
  spec.max_num_batched_tokens = s.max_num_batched_tokens();
  spec.block_size = s.block_size();
  spec.enable_prefix_caching = s.enable_prefix_caching();
  spec.async_scheduling = s.async_scheduling();
  if (s.has_scheduler_reserve_full_isl())
    spec.scheduler_reserve_full_isl = s.scheduler_reserve_full_isl();
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
  if (cl.has_burstiness()) c.burstiness = cl.burstiness();
  c.max_concurrency = cl.max_concurrency();
  c.client_overhead_ns = static_cast<TimeNs>(std::llround(cl.client_overhead_s() * 1e9));
  if (cl.has_seed()) c.seed = cl.seed();
  return c;
}

RandomDatasetConfig ToRandomDataset(const proto::ClientConfig& cl) {
  RandomDatasetConfig d;  // unset fields keep its initialisers (ApplyDefaults')
  if (cl.num_prompts() > 0) d.num_prompts = cl.num_prompts();
  if (cl.random_input_len() > 0) d.input_len = cl.random_input_len();
  if (cl.random_output_len() > 0) d.output_len = cl.random_output_len();
  d.range_ratio = cl.random_range_ratio();
  if (cl.has_seed()) d.seed = cl.seed();
  return d;
}

std::string ConfigToText(const proto::ExperimentConfig& config) {
  std::string out;
  google::protobuf::TextFormat::Printer printer;
  printer.PrintToString(config, &out);
  return out;
}

}  // namespace servesim
