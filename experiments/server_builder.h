// TEMPORARY stand-in until the hwmodels-backed builder replaces the body of
// BuildServer (hwmodels/deployment.h BuildDeployment): turns a ServerSpec
// into what one simulated replica needs.
// Now: validates the device and model names, fills vLLM's scheduler
// defaults, a fixed generous KV spec (E2B-like: one full-attention group of
// 16-token blocks, four sliding groups of 32-token blocks, window 512) and
// an analytic step model with made-up coefficients. Numbers from it are
// NOT predictions; its provenance says so.
#ifndef SERVESIM_EXPERIMENTS_SERVER_BUILDER_H_
#define SERVESIM_EXPERIMENTS_SERVER_BUILDER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "hwmodels/server_spec.h"
#include "sim/server_config.h"
#include "sim/step_time_model.h"

namespace servesim::cli {

struct ServerBuild {
  SchedulerConfig scheduler;
  KvCacheSpec kv_cache;
  std::shared_ptr<const StepTimeModel> step_model;
  std::string provenance;
};

// Errors name the flag and the allowed values.
absl::StatusOr<ServerBuild> BuildServer(const ServerSpec& spec);

}  // namespace servesim::cli

#endif  // SERVESIM_EXPERIMENTS_SERVER_BUILDER_H_
