// An experiment config (proto/experiment.proto) without the command line:
// its documented defaults (ApplyDefaults), its range checks (Validate:
// errors name the flag or field and the allowed range) and the plain
// structs it resolves to (ServerSpec, ClientConfig, RandomDatasetConfig).
// The CLI11 flags that fill a config are experiments/cli/server_flags.h.
#ifndef SERVESIM_EXPERIMENTS_RUNNER_CONFIG_H_
#define SERVESIM_EXPERIMENTS_RUNNER_CONFIG_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "hwmodels/server_spec.h"
#include "proto/experiment.pb.h"
#include "sim/client.h"
#include "sim/random_source.h"

namespace servesim {

// Fills unset fields with the defaults, whose one home is the initialisers
// of the structs a config resolves to: the server's from ServerSpec
// (hwmodels/server_spec.h: dtype auto, quantization none,
// gpu_memory_utilization 0.90, block_size 16, prefix caching on, async
// scheduling on), the client's from RandomDatasetConfig
// (sim/random_source.h: num_prompts 1000, random_input_len 1024,
// random_output_len 128) and ClientConfig (sim/client.h: burstiness 1,
// seed 0, request_rate inf); ignore_eos true.
void ApplyDefaults(proto::ExperimentConfig& config);
// The server part of ApplyDefaults.
void ApplyServerDefaults(proto::ServerConfig& server);

// Range checks; the message names the flag and the allowed range.
// Validate = ValidateRanges (each field on its own) + CheckRandomLengthsFit
// against an explicit max_model_len (a cell whose requests cannot fit is an
// infeasible experiment rather than a malformed one: sweeps record it).
absl::Status Validate(const proto::ExperimentConfig& config);
absl::Status ValidateRanges(const proto::ExperimentConfig& config);

// --block-size: a power of two in [1, 1024].
absl::Status CheckBlockSize(int64_t block_size);
// vLLM's SchedulerConfig rule max_num_batched_tokens >= max_num_seqs (0:
// default, not checked).
absl::Status CheckBatchLimits(int64_t max_num_seqs, int64_t max_num_batched_tokens);

// Most replicas one experiment simulates (all fleet groups together).
constexpr int64_t kMaxReplicas = 4096;

// Without a trace: the longest random request (input + output at the top
// of --random-range-ratio) must fit `max_model_len` (`limit_name` says
// which limit: "--max-model-len" or the model's own).
absl::Status CheckRandomLengthsFit(const proto::ClientConfig& client,
                                   int64_t max_model_len, std::string_view limit_name);

// Parses --request-rate: "inf" (any case) or a positive number.
absl::StatusOr<double> ParseRequestRate(const std::string& text);

// Plain structs from a validated config.
ServerSpec ToServerSpec(const proto::ServerConfig& server);
// With a trace, the trace's arrival times are replayed (a request_rate
// rescales the trace's timeline to that mean rate); otherwise the client's
// own arrival process (Gamma gaps at request_rate, or all at once) is used.
ClientConfig ToClientConfig(const proto::ClientConfig& client);
RandomDatasetConfig ToRandomDataset(const proto::ClientConfig& client);

// The config in text format (deterministic field order).
std::string ConfigToText(const proto::ExperimentConfig& config);

// "FIELD: VALUE is out of range RANGE" (InvalidArgument), the form of
// every range error of a config and its flags.
absl::Status OutOfRangeError(std::string_view field, const std::string& value,
                             std::string_view range);

}  // namespace servesim

#endif  // SERVESIM_EXPERIMENTS_RUNNER_CONFIG_H_
