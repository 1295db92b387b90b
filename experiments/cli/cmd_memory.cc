// servesim memory: vLLM's memory plan for one replica: weights, non-torch,
// activation peak, graph memory, KV cache GiB / blocks / tokens and the
// maximum concurrency, or why it does not fit and what would: the largest
// max_model_len that fits (solved with the planner) and the quantizations
// that fit. Exit 0 when it fits, 4 (kExitDoesNotFit, as `simulate` for the
// same deployment) when it does not, 2 for bad flags.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "experiments/capacity/memory_fit.h"
#include "experiments/cli/cli.h"
#include "experiments/cli/server_flags.h"
#include "hwmodels/deployment.h"
#include "sim/base/json_writer.h"

namespace servesim::cli {
namespace {

constexpr double kNotGiven = -1e300;  // CLI11 cannot tell NaN given from NaN unset

struct MemoryFlags {
  ServerFlags server;
  // NaN: not given.
  double measured_weights_gib = kNotGiven;
  double measured_non_torch_gib = kNotGiven;
  double measured_activation_gib = kNotGiven;
  double measured_cuda_graph_gib = kNotGiven;
  double measured_kv_cache_gib = kNotGiven;
  bool json = false;
};

// What would fit when the deployment does not (empty when it fits).
struct FitHints {
  int32_t largest_max_model_len = 0;  // 0: no length fits
  std::vector<std::string> quantizations;
  int32_t tensor_parallel_size = 0;  // the smallest that fits; 0: none
};

// A measured value given on the command line must be a finite number of
// GiB in [0, 100000].
absl::StatusOr<std::optional<double>> Opt(double v, const char* flag) {
  if (v == kNotGiven) return std::optional<double>();
  if (!(v >= 0 && v <= 1e5)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: %g is out of range [0, 100000] GiB", flag, v));
  }
  return std::optional<double>(v + 0.0);  // -0 reads as 0 (it printed "-0.00 GiB")
}

void PrintJson(const Deployment& d, const FitHints& hints) {
  const MemoryPlan& m = d.memory;
  JsonWriter w(2);
  w.BeginObject();
  w.KV("fits", m.fits);
  w.KV("reason", m.reason);
  if (!m.fits) {
    w.KV("largest_fitting_max_model_len", int64_t{hints.largest_max_model_len});
    w.Key("quantizations_that_fit").BeginArray();
    for (const std::string& q : hints.quantizations) w.String(q);
    w.EndArray();
    w.KV("smallest_fitting_tensor_parallel_size", int64_t{hints.tensor_parallel_size});
  }
  w.KV("device", d.device.id());
  if (!d.uncalibrated_note.empty()) w.KV("uncalibrated", d.uncalibrated_note);
  w.KV("model", d.model.id);
  w.KV("quantization", d.format.id);
  w.KV("dtype", d.dtype);
  w.KV("max_model_len", d.scheduler.max_model_len);
  w.KV("max_num_batched_tokens", d.scheduler.max_num_batched_tokens);
  w.KV("max_num_seqs", d.scheduler.max_num_seqs);
  w.KV("async_scheduling", d.scheduler.async_scheduling);
  w.KV("gpu_memory_utilization", d.spec.gpu_memory_utilization);
  // Per rank when tensor_parallel_size > 1 (every rank holds the same shards).
  w.KV("tensor_parallel_size", d.tensor_parallel_size);
  if (d.expert_parallel_size > 1) {
    // The fullest rank's experts (hwmodels/parallelism.h ExpertsPerRank).
    w.KV("expert_parallel_size", d.expert_parallel_size);
    w.KV("experts_per_rank",
         int64_t{ExpertsPerRank(d.model.num_experts, d.expert_parallel_size)});
  }
  w.KV("pipeline_parallel_size", d.pipeline_parallel_size);
  if (d.pipeline_parallel_size > 1) {
    // Every stage's own plan; the fields below are the limiting stage's.
    w.Key("stages").BeginArray();
    for (size_t st = 0; st < d.stage_memory.size(); ++st) {
      const MemoryPlan& sm = d.stage_memory[st];
      w.BeginObject();
      w.KV("first_layer", int64_t{d.stage_layers[st].first});
      w.KV("end_layer", int64_t{d.stage_layers[st].second});
      w.KV("weights_gib", sm.weights_gib);
      w.KV("non_torch_gib", sm.non_torch_gib);
      w.KV("activation_gib", sm.activation_gib);
      w.KV("kv_cache_gib", sm.kv_cache_gib);
      w.KV("kv_block_bytes", sm.kv_block_bytes);
      w.KV("num_blocks", sm.num_blocks);
      w.KV("fits", sm.fits);
      w.EndObject();
    }
    w.EndArray();
  }
  w.KV("total_gib", m.total_gib);
  w.KV("requested_gib", m.requested_gib);
  w.KV("weights_gib", m.weights_gib);
  w.KV("non_torch_gib", m.non_torch_gib);
  w.KV("activation_gib", m.activation_gib);
  w.KV("cuda_graph_gib", m.cuda_graph_gib);
  w.KV("cuda_graph_subtracted", m.cuda_graph_subtracted);
  w.KV("kv_cache_gib", m.kv_cache_gib);
  w.KV("kv_block_bytes", m.kv_block_bytes);
  w.KV("num_blocks", m.num_blocks);
  w.KV("blocks_per_request", m.blocks_per_request);
  w.KV("kv_cache_tokens", m.kv_cache_tokens);
  w.KV("max_concurrency", m.max_concurrency);
  w.KV("sources", m.sources);
  w.KV("accounting", m.accounting);
  w.Key("kv_groups").BeginArray();
  for (const KvGroupSpec& g : d.kv_cache.groups) {
    w.BeginObject();
    w.KV("block_size_tokens", g.block_size_tokens);
    w.KV("sliding_window", g.sliding_window);
    w.KV("num_layers", g.num_layers);
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  std::printf("%s\n", w.str().c_str());
}

void PrintText(const Deployment& d, const FitHints& hints) {
  const MemoryPlan& m = d.memory;
  const SchedulerConfig& s = d.scheduler;
  std::printf(
      "%s (%s, %s) on %s: max_model_len %d, max_num_batched_tokens %d, max_num_seqs %d, "
      "%s\n",
      d.model.id.c_str(), d.format.id.c_str(), d.dtype.c_str(), d.device.id().c_str(),
      s.max_model_len, s.max_num_batched_tokens, s.max_num_seqs,
      s.async_scheduling ? "async scheduling" : "sync scheduling");
  if (d.tensor_parallel_size > 1 || !d.collectives.empty()) {
    std::printf(
        "  per rank of tensor parallel %d (each of the %d %s holds the same shards; the "
        "KV "
        "pool is the minimum over ranks)\n",
        d.tensor_parallel_size, d.tensor_parallel_size, d.device.id().c_str());
    std::printf("  KV heads          %s\n",
                DescribeKvHeadSplit(d.model, d.tensor_parallel_size).c_str());
    if (d.pipeline_parallel_size > 1) {
      for (size_t st = 0; st < d.stage_collectives.size(); ++st) {
        if (d.stage_collectives[st].empty()) continue;
        std::printf("  collectives       stage %zu: %s over %s\n", st,
                    d.stage_collectives[st].Describe().c_str(),
                    d.collective_link.c_str());
      }
    } else {
      std::printf("  collectives       %s over %s\n", d.collectives.Describe().c_str(),
                  d.collective_link.c_str());
    }
    if (d.model.num_experts > 0) {
      std::printf(
          "  experts           %s\n",
          DescribeExpertSplit(d.model, d.tensor_parallel_size, d.expert_parallel_size)
              .c_str());
    }
  }
  if (d.pipeline_parallel_size > 1) {
    std::printf(
        "  pipeline parallel %d: stages of %d chip(s) each; layers by vLLM's "
        "get_pp_indices; each stage plans its own memory (per rank), the KV pool is the "
        "fewest blocks over stages; %.4g ns + %.4g ns/token per stage-to-stage "
        "transfer\n",
        d.pipeline_parallel_size, d.tensor_parallel_size, d.pipeline_transfer.step_ns,
        d.pipeline_transfer.token_ns);
    for (size_t st = 0; st < d.stage_memory.size(); ++st) {
      const MemoryPlan& sm = d.stage_memory[st];
      const bool first = st == 0, last = st + 1 == d.stage_memory.size();
      std::printf(
          "  stage %zu (layers %d-%d%s%s): weights %.2f GiB, non-torch %.2f GiB, "
          "activation %.2f GiB, KV %.2f GiB = %lld blocks of %lld B%s\n",
          st, d.stage_layers[st].first, d.stage_layers[st].second - 1,
          first ? ", embedding" : "", last ? ", LM head" : "", sm.weights_gib,
          sm.non_torch_gib, sm.activation_gib, sm.kv_cache_gib,
          static_cast<long long>(sm.num_blocks),
          static_cast<long long>(sm.kv_block_bytes), sm.fits ? "" : " (does not fit)");
    }
    std::printf("  the lines below are the stage that sets the pool\n");
  }
  std::printf("  usable memory     %8.2f GiB x %.2f = %.2f GiB requested\n", m.total_gib,
              d.spec.gpu_memory_utilization, m.requested_gib);
  std::printf("  weights           %8.2f GiB\n", m.weights_gib);
  std::printf("  non-torch memory  %8.2f GiB\n", m.non_torch_gib);
  std::printf("  activation peak   %8.2f GiB\n", m.activation_gib);
  std::printf(
      "  graph capture     %8.2f GiB (%s)\n", m.cuda_graph_gib,
      m.cuda_graph_subtracted ? "subtracted" : "logged, not subtracted by these builds");
  std::printf("  KV cache          %8.2f GiB = %lld blocks of %lld B in %zu groups\n",
              m.kv_cache_gib, static_cast<long long>(m.num_blocks),
              static_cast<long long>(m.kv_block_bytes), d.kv_cache.groups.size());
  std::printf("  sources           %s\n", m.sources.c_str());
  std::printf("  accounting        %s\n", m.accounting.c_str());
  if (!m.fits) {
    std::printf("DOES NOT FIT: %s\n", m.reason.c_str());
    if (hints.largest_max_model_len > 0) {
      std::printf(
          "  fits with --max-model-len %d (the largest that fits, all else kept)\n",
          hints.largest_max_model_len);
    } else {
      std::printf("  no --max-model-len fits with these settings\n");
    }
    if (!hints.quantizations.empty()) {
      std::printf("  fits at max_model_len %d with --quantization %s\n", s.max_model_len,
                  absl::StrJoin(hints.quantizations, " | ").c_str());
    }
    if (hints.tensor_parallel_size > 0) {
      std::printf(
          "  fits on %d chips: --tensor-parallel-size %d (the smallest that fits, all "
          "else kept)\n",
          hints.tensor_parallel_size * d.pipeline_parallel_size,
          hints.tensor_parallel_size);
    }
    return;
  }
  std::printf("GPU KV cache size: %lld tokens\n",
              static_cast<long long>(m.kv_cache_tokens));
  std::printf(
      "Maximum concurrency for %d tokens per request: %.2fx (%lld blocks per request)\n",
      s.max_model_len, m.max_concurrency, static_cast<long long>(m.blocks_per_request));
}

int RunMemory(const MemoryFlags& f) {
  auto fail = [](const absl::Status& st) {
    std::fprintf(stderr, "servesim memory: error: %s\n",
                 std::string(st.message()).c_str());
    return kExitBadInput;
  };
  proto::ServerConfig server;
  if (absl::Status st = f.server.ApplyTo(server); !st.ok()) return fail(st);
  ServerSpec spec = ToServerSpec(server);
  const struct {
    double value;
    const char* flag;
    std::optional<double>* out;
  } measured[] = {
      {f.measured_weights_gib, "--measured-weights-gib", &spec.measured_weights_gib},
      {f.measured_non_torch_gib, "--measured-non-torch-gib",
       &spec.measured_non_torch_gib},
      {f.measured_activation_gib, "--measured-activation-gib",
       &spec.measured_activation_peak_gib},
      {f.measured_cuda_graph_gib, "--measured-cuda-graph-gib",
       &spec.measured_cuda_graph_gib},
      {f.measured_kv_cache_gib, "--measured-kv-cache-gib", &spec.measured_kv_cache_gib},
  };
  for (const auto& m : measured) {
    absl::StatusOr<std::optional<double>> v = Opt(m.value, m.flag);
    if (!v.ok()) return fail(v.status());
    *m.out = *v;
  }
  if (absl::Status st = CheckBlockSize(spec.block_size); !st.ok()) return fail(st);
  if (absl::Status st = CheckBatchLimits(spec.max_num_seqs, spec.max_num_batched_tokens);
      !st.ok()) {
    return fail(st);
  }
  auto d = BuildDeployment(spec);
  if (!d.ok()) return fail(d.status());
  if (!d->uncalibrated_note.empty())
    std::fprintf(stderr, "servesim memory: note: %s\n", d->uncalibrated_note.c_str());
  if (spec.measured_kv_cache_gib && *spec.measured_kv_cache_gib > d->memory.total_gib) {
    return fail(absl::InvalidArgumentError(absl::StrFormat(
        "--measured-kv-cache-gib: %g is out of range [0, %.2f] GiB (the usable memory of "
        "%s)",
        *spec.measured_kv_cache_gib, d->memory.total_gib, d->device.id())));
  }
  FitHints hints;
  if (!d->memory.fits) {
    absl::StatusOr<int32_t> len =
        LargestFittingMaxModelLen(spec, d->scheduler.max_model_len - 1);
    if (!len.ok()) return fail(len.status());
    hints.largest_max_model_len = *len;
    ServerSpec at_len = spec;
    at_len.max_model_len = d->scheduler.max_model_len;
    hints.quantizations = QuantizationsThatFit(at_len);
    hints.tensor_parallel_size = SmallestFittingTensorParallelSize(at_len);
  }
  if (f.json) {
    PrintJson(*d, hints);
  } else {
    PrintText(*d, hints);
  }
  return d->memory.fits ? kExitOk : kExitDoesNotFit;
}

}  // namespace

void RegisterMemoryCommand(CLI::App& app, int* exit_code) {
  auto f = std::make_shared<MemoryFlags>();
  CLI::App* cmd = app.add_subcommand(
      "memory",
      "vLLM's memory plan for one replica: weights, non-torch, activation peak, KV cache "
      "GiB / blocks / tokens and maximum concurrency, or why it does not fit.");
  f->server.Register(cmd);
  f->server.device()->required();
  f->server.model()->required();
  cmd->add_option("--measured-weights-gib", f->measured_weights_gib,
                  "from the server log");
  cmd->add_option("--measured-non-torch-gib", f->measured_non_torch_gib,
                  "from the server log");
  cmd->add_option("--measured-activation-gib", f->measured_activation_gib,
                  "from the server log");
  cmd->add_option("--measured-cuda-graph-gib", f->measured_cuda_graph_gib,
                  "from the server log");
  cmd->add_option(
      "--measured-kv-cache-gib", f->measured_kv_cache_gib,
      "available KV cache memory from the server log (replaces the estimate)");
  cmd->add_flag("--json", f->json, "one JSON object instead of the table");
  cmd->callback([f, exit_code] { *exit_code = RunMemory(*f); });
}

}  // namespace servesim::cli
