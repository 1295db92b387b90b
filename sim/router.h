// Routers pick the replica for each request reaching the fleet. Pluggable:
// implement Router (sim/router_aware.h has the KV/prefix-aware ones).
// Routers are stateful (round-robin) but deterministic; thread-compatible.
#ifndef SERVESIM_SIM_ROUTER_H_
#define SERVESIM_SIM_ROUTER_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "absl/status/statusor.h"
#include "sim/request.h"
#include "sim/scheduler.h"

namespace servesim {

class Router {
 public:
  virtual ~Router() = default;
  // Returns the index of the replica (in [0, replicas.size())) that gets
  // `request`. The schedulers show load (num_outstanding, num_waiting,
  // kv().num_free_blocks(), ...). REQUIRES: replicas is non-empty.
  virtual int32_t Route(const RequestSpec& request,
                        std::span<const Scheduler* const> replicas) = 0;
  virtual std::string Name() const = 0;
};

// Replica 0, 1, 2, ... in turn.
class RoundRobinRouter : public Router {
 public:
  int32_t Route(const RequestSpec& request,
                std::span<const Scheduler* const> replicas) override;
  std::string Name() const override { return "round-robin"; }

 private:
  int64_t next_ = 0;
};

// The replica with the fewest requests in flight (waiting + running);
// ties go to the lowest index.
class LeastOutstandingRouter : public Router {
 public:
  int32_t Route(const RequestSpec& request,
                std::span<const Scheduler* const> replicas) override;
  std::string Name() const override { return "least-outstanding"; }
};

// vLLM's data-parallel load balancer (V1 DPLBAsyncMPClient): the engine
// with the lowest 4 x waiting + running requests; ties go to the lowest
// index. vLLM reads these counts from its coordinator (up to ~100 ms stale,
// corrected by the client's own count of what it just sent); here they are
// exact.
class VllmDataParallelRouter : public Router {
 public:
  int32_t Route(const RequestSpec& request,
                std::span<const Scheduler* const> replicas) override;
  std::string Name() const override { return "vllm-dp"; }
};

// Every router by name: "round-robin" (also ""), "least-outstanding",
// "vllm-dp", "kv-aware", "prefix-aware" (the last two in
// sim/router_aware.h); an unknown name is an error listing the allowed
// values.
absl::StatusOr<std::unique_ptr<Router>> MakeRouter(const std::string& name);

}  // namespace servesim

#endif  // SERVESIM_SIM_ROUTER_H_
