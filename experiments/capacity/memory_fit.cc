#include "experiments/capacity/memory_fit.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "experiments/runner/config.h"
#include "hwmodels/deployment.h"
#include "hwmodels/parallelism.h"
#include "sim/base/status_macros.h"

namespace servesim {
namespace {

absl::StatusOr<bool> FitsAt(ServerSpec spec, int32_t max_model_len) {
  spec.max_model_len = max_model_len;
  ASSIGN_OR_RETURN(Deployment d, BuildDeployment(spec));
  return d.memory.fits;
}

}  // namespace

absl::StatusOr<int32_t> LargestFittingMaxModelLen(const ServerSpec& spec, int32_t upper) {
  if (upper < 1) return 0;
  ASSIGN_OR_RETURN(bool fits_one, FitsAt(spec, 1));
  if (!fits_one) return 0;
  ASSIGN_OR_RETURN(bool fits_upper, FitsAt(spec, upper));
  if (fits_upper) return upper;
  int32_t lo = 1, hi = upper;  // fits at lo, not at hi
  while (hi - lo > 1) {
    const int32_t mid = lo + (hi - lo) / 2;
    ASSIGN_OR_RETURN(bool fits, FitsAt(spec, mid));
    (fits ? lo : hi) = mid;
  }
  return lo;
}

int32_t SmallestFittingTensorParallelSize(const ServerSpec& spec) {
  for (int32_t tp = std::max(spec.tensor_parallel_size, 1) + 1; tp <= kMaxParallelSize;
       ++tp) {
    ServerSpec s = spec;
    s.tensor_parallel_size = tp;
    absl::StatusOr<Deployment> d = BuildDeployment(s);
    if (d.ok() && d->memory.fits) return tp;
  }
  return 0;
}

std::vector<std::string> QuantizationsThatFit(const ServerSpec& spec) {
  std::vector<std::string> out;
  for (const char* q : {"none", "fp8", "w8a8", "w4a16", "w4a16-emb4"}) {
    if (spec.quantization == q) continue;
    ServerSpec s = spec;
    s.quantization = q;
    absl::StatusOr<Deployment> d = BuildDeployment(s);
    if (d.ok() && d->memory.fits) out.emplace_back(q);
  }
  return out;
}

absl::StatusOr<FitHint> WhatFits(const ServerSpec& spec, int32_t resolved_max_model_len) {
  FitHint hint;
  ASSIGN_OR_RETURN(hint.largest_max_model_len,
                   LargestFittingMaxModelLen(spec, resolved_max_model_len - 1));
  ServerSpec at_len = spec;
  at_len.max_model_len = resolved_max_model_len;
  hint.quantizations = QuantizationsThatFit(at_len);
  hint.tensor_parallel_size = SmallestFittingTensorParallelSize(at_len);
  return hint;
}

std::string FitHintText(const FitHint& hint) {
  std::vector<std::string> parts;
  if (hint.tensor_parallel_size > 0) {
    parts.push_back(absl::StrCat("fits on ", hint.tensor_parallel_size,
                                 " chips: --tensor-parallel-size ",
                                 hint.tensor_parallel_size, " (the fewest)"));
  }
  if (hint.largest_max_model_len > 0) {
    parts.push_back(
        absl::StrCat("--max-model-len ", hint.largest_max_model_len, " (the largest)"));
  }
  if (!hint.quantizations.empty()) {
    parts.push_back(
        absl::StrCat("--quantization ", absl::StrJoin(hint.quantizations, " | ")));
  }
  if (parts.empty()) {
    return "nothing fits with one setting changed (no --tensor-parallel-size, "
           "--max-model-len or --quantization)";
  }
  return absl::StrCat("what fits, all else kept: ", absl::StrJoin(parts, "; "));
}

absl::Status WithFitHint(const absl::Status& status,
                         const proto::ExperimentConfig& config) {
  if (!absl::IsResourceExhausted(status)) return status;
  std::vector<proto::ServerConfig> servers;
  if (config.fleet().replicas_size() == 0) servers.push_back(config.server());
  for (const proto::FleetReplica& r : config.fleet().replicas()) {
    servers.push_back(r.server());
  }
  std::vector<std::string> hints;
  std::vector<std::string> seen;
  for (const proto::ServerConfig& server : servers) {
    proto::ExperimentConfig tmp;
    *tmp.mutable_server() = server;
    ApplyDefaults(tmp);
    std::string key = tmp.server().SerializeAsString();
    if (std::find(seen.begin(), seen.end(), key) != seen.end()) continue;
    seen.push_back(std::move(key));
    const ServerSpec spec = ToServerSpec(tmp.server());
    absl::StatusOr<Deployment> d = BuildDeployment(spec);
    if (!d.ok() || d->memory.fits) continue;
    absl::StatusOr<FitHint> hint = WhatFits(spec, d->scheduler.max_model_len);
    if (!hint.ok()) continue;
    hints.push_back(absl::StrCat(servers.size() > 1
                                     ? absl::StrCat("for ", tmp.server().model(), " on ",
                                                    tmp.server().device(), ", ")
                                     : std::string(),
                                 FitHintText(*hint)));
  }
  if (hints.empty()) return status;
  return absl::ResourceExhaustedError(
      absl::StrCat(status.message(), "; ", absl::StrJoin(hints, "; ")));
}

PointRunner WithFitHints(PointRunner runner) {
  auto inner = std::move(runner.run);
  runner.run =
      [inner = std::move(inner)](
          const proto::ExperimentConfig& c) -> absl::StatusOr<std::vector<double>> {
    absl::StatusOr<std::vector<double>> r = inner(c);
    if (!r.ok()) return WithFitHint(r.status(), c);
    return r;
  };
  return runner;
}

}  // namespace servesim
