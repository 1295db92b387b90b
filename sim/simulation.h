// The one simulation pipeline: how every caller turns replicas, a router
// name, a benchmark client and a request source into a finished run.
// RunExperiment (experiments/runner/: simulate, sweep, plan, the Python
// module) and SimulateBenchCell (calibration/: validate, calibrate) both
// call Simulate, so the API server's latency is added, the router made and
// the engine created and run one way; they differ only in what they pass in
// (docs/architecture.md, "One pipeline"). Thread-compatible.
#ifndef SERVESIM_SIM_SIMULATION_H_
#define SERVESIM_SIM_SIMULATION_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "sim/client.h"
#include "sim/engine.h"
#include "sim/request.h"
#include "sim/request_source.h"

namespace servesim {

// The API server's fixed latency per request (HTTP, tokenisation,
// detokenisation: a calibration profile's `api_overhead_ms`) in ns,
// rounded to the nearest (as the profiles were fitted); 0 for a value <= 0
// or NaN. REQUIRES: api_overhead_ms < 9e12 (a profile's value lies in its
// parameter's bounds).
TimeNs ApiOverheadNs(double api_overhead_ms);

// `client` as the engine runs it: its per-request overhead plus
// ApiOverheadNs(api_overhead_ms), since the API server's latency, like the
// client's own cost, delays each request's arrival at the scheduler and
// counts in its TTFT and latency.
ClientConfig WithApiOverhead(ClientConfig client, double api_overhead_ms);

struct SimulationSpec {
  std::vector<ReplicaConfig> replicas;  // step models must outlive the run
  std::string router;                   // MakeRouter name; "": round-robin
  ClientConfig client;                  // the benchmark client's own config
  double api_overhead_ms = 0;           // added by WithApiOverhead
  EngineOptions options;
  // What earlier requests on the same servers left in their prefix caches
  // (built with Scheduler::WarmPrefixCache): every replica's KV cache
  // starts as a copy (Engine::StartFromKvCache). Null: the caches start
  // cold.
  std::shared_ptr<const KvCache> initial_kv_cache;
};

// Makes the router, creates the engine with WithApiOverhead(spec.client,
// spec.api_overhead_ms), starts its KV caches from spec.initial_kv_cache
// when set and runs every request of `source`. Errors: those of
// MakeRouter, Engine::Create, Engine::StartFromKvCache and Engine::Run.
absl::StatusOr<std::unique_ptr<Engine>> Simulate(SimulationSpec spec,
                                                 RequestSource* source,
                                                 EngineObserver* observer = nullptr);

}  // namespace servesim

#endif  // SERVESIM_SIM_SIMULATION_H_
