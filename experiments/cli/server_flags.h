// The `vllm serve` and `vllm bench serve` flags of `servesim simulate` (and
// any subcommand that wants them), and the experiment config they resolve
// to (the config's defaults and checks: experiments/runner/config.h).
// Resolution order, later wins:
//   built-in defaults < --config FILE.textproto < each --set 'TEXT' (text
//   format merged on top, in order) < flags given explicitly on the line.
// Validate() checks ranges and returns errors naming the flag and the
// allowed range. Values then flow one way into plain structs (ServerSpec,
// ClientConfig, RandomDatasetConfig).
#ifndef SERVESIM_EXPERIMENTS_CLI_SERVER_FLAGS_H_
#define SERVESIM_EXPERIMENTS_CLI_SERVER_FLAGS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "experiments/runner/config.h"
#include "proto/experiment.pb.h"

namespace servesim::cli {

// --seed as every subcommand reads it: an integer in [0, 2^63) (vLLM's
// seeds are Python ints; negative or wider values would wrap or saturate
// silently, two distinct seeds becoming one). InvalidArgument naming
// --seed otherwise.
absl::StatusOr<uint64_t> ParseSeed(const std::string& text);

// The `vllm serve` flags: one vocabulary, one set of help texts and
// defaults (ServerSpec's initialisers, applied by ApplyDefaults) for every
// subcommand that takes a server: simulate, memory, calibrate, plan and
// sweep's base. Spelled as vllm serve spells them, with both --X and --no-X
// where vLLM has both. Not copyable (CLI11 holds pointers to the values).
class ServerFlags {
 public:
  ServerFlags() = default;
  ServerFlags(const ServerFlags&) = delete;
  ServerFlags& operator=(const ServerFlags&) = delete;

  // Registers --device --model --quantization --dtype --max-model-len
  // --gpu-memory-utilization --max-num-seqs --max-num-batched-tokens
  // --block-size --[no-]enable-prefix-caching --[no-]async-scheduling
  // --calibration --tensor-parallel-size --pipeline-parallel-size
  // --data-parallel-size --enable-expert-parallel on `cmd` (without
  // --calibration when `with_calibration` is false: `plan` takes it per
  // device, repeatable, as DEVICE=FILE).
  void Register(CLI::App* cmd, bool with_calibration = true);
  // Sets the field of every flag given on the command line; range errors
  // name the flag. Fields of flags not given are left as they are.
  absl::Status ApplyTo(proto::ServerConfig& server) const;
  // The names of the flags given on the command line ("--device", ...).
  std::vector<std::string> GivenNames() const;
  CLI::Option* device() const { return device_; }
  CLI::Option* model() const { return model_; }

  // Every flag Register adds, as --help lists them (first spelling).
  static std::vector<std::string> Names();

 private:
  std::vector<CLI::Option*> All() const;
  CLI::Option* device_ = nullptr;
  CLI::Option* model_ = nullptr;
  CLI::Option* quantization_ = nullptr;
  CLI::Option* dtype_ = nullptr;
  CLI::Option* kv_cache_dtype_ = nullptr;
  CLI::Option* max_model_len_ = nullptr;
  CLI::Option* gpu_mem_ = nullptr;
  CLI::Option* max_num_seqs_ = nullptr;
  CLI::Option* max_num_batched_tokens_ = nullptr;
  CLI::Option* block_size_ = nullptr;
  CLI::Option* prefix_caching_ = nullptr;
  CLI::Option* async_ = nullptr;
  CLI::Option* reserve_full_isl_ = nullptr;
  CLI::Option* calibration_ = nullptr;
  CLI::Option* tp_ = nullptr;
  CLI::Option* pp_ = nullptr;
  CLI::Option* dp_ = nullptr;
  CLI::Option* ep_ = nullptr;
  int64_t tp_v_ = 0, pp_v_ = 0, dp_v_ = 0;
  bool ep_v_ = false;
  std::string device_v_, model_v_, quantization_v_, dtype_v_, kv_cache_dtype_v_,
      calibration_v_;
  int64_t max_model_len_v_ = 0, max_num_seqs_v_ = 0, max_num_batched_tokens_v_ = 0,
          block_size_v_ = 0;
  double gpu_mem_v_ = 0;
  bool prefix_caching_v_ = true, async_v_ = true, reserve_full_isl_v_ = true;
};

// Binds the flags to a CLI11 subcommand and keeps their values. Register
// once, parse, then call Resolve(). Not copyable (CLI11 holds pointers).
class ExperimentFlags {
 public:
  ExperimentFlags() = default;
  ExperimentFlags(const ExperimentFlags&) = delete;
  ExperimentFlags& operator=(const ExperimentFlags&) = delete;

  // `vllm serve` flags (ServerFlags::Register).
  void RegisterServerFlags(CLI::App* cmd) { server_.Register(cmd); }
  // `vllm bench serve` flags: --num-prompts --request-rate --burstiness
  // --max-concurrency --random-input-len --random-output-len
  // --random-range-ratio --seed --ignore-eos --client-overhead-s --trace
  // --trace-format.
  void RegisterClientFlags(CLI::App* cmd);
  // --config FILE.textproto and repeated --set 'TEXT'.
  void RegisterConfigFlags(CLI::App* cmd);

  // Defaults < --config < --set < explicit flags; then Validate().
  absl::StatusOr<proto::ExperimentConfig> Resolve() const;
  // The --config path ("" when none).
  const std::string& config_path() const { return config_path_; }

 private:
  ServerFlags server_;
  // Client.
  CLI::Option* num_prompts_ = nullptr;
  CLI::Option* request_rate_ = nullptr;
  CLI::Option* burstiness_ = nullptr;
  CLI::Option* max_concurrency_ = nullptr;
  CLI::Option* input_len_ = nullptr;
  CLI::Option* output_len_ = nullptr;
  CLI::Option* range_ratio_ = nullptr;
  CLI::Option* seed_ = nullptr;
  CLI::Option* ignore_eos_ = nullptr;
  CLI::Option* overhead_ = nullptr;
  CLI::Option* trace_ = nullptr;
  CLI::Option* trace_format_ = nullptr;
  int64_t num_prompts_v_ = 0, max_concurrency_v_ = 0, input_len_v_ = 0, output_len_v_ = 0;
  std::string request_rate_v_, trace_v_, trace_format_v_;
  double burstiness_v_ = 0, range_ratio_v_ = 0, overhead_v_ = 0;
  std::string seed_v_;  // parsed by hand: CLI11 clamps integers that overflow
  bool ignore_eos_v_ = true;
  // Config.
  std::string config_path_;
  std::vector<std::string> sets_;
};

}  // namespace servesim::cli

#endif  // SERVESIM_EXPERIMENTS_CLI_SERVER_FLAGS_H_
