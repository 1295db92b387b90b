#include "sim/simulation.h"

#include <cmath>
#include <utility>

#include "sim/base/status_macros.h"
#include "sim/router.h"

namespace servesim {

TimeNs ApiOverheadNs(double api_overhead_ms) {
  if (!(api_overhead_ms > 0)) return 0;
  return static_cast<TimeNs>(std::llround(api_overhead_ms * 1e6));
}

ClientConfig WithApiOverhead(ClientConfig client, double api_overhead_ms) {
  client.client_overhead_ns += ApiOverheadNs(api_overhead_ms);
  return client;
}

absl::StatusOr<std::unique_ptr<Engine>> Simulate(SimulationSpec spec,
                                                 RequestSource* source,
                                                 EngineObserver* observer) {
  ASSIGN_OR_RETURN(std::unique_ptr<Router> router, MakeRouter(spec.router));
  ASSIGN_OR_RETURN(
      std::unique_ptr<Engine> engine,
      Engine::Create(std::move(spec.replicas), std::move(router),
                     WithApiOverhead(spec.client, spec.api_overhead_ms), spec.options));
  if (spec.initial_kv_cache != nullptr) {
    RETURN_IF_ERROR(engine->StartFromKvCache(*spec.initial_kv_cache));
  }
  RETURN_IF_ERROR(engine->Run(source, observer));
  return engine;
}

}  // namespace servesim
