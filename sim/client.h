// The benchmark client, with `vllm bench serve` semantics: decides when
// each request of a RequestSource is meant to be sent.
//  - request_rate = inf: every request wants to start at time 0; with
//    max_concurrency N this is a closed loop of N requests in flight.
//  - finite request_rate: Gamma-distributed gaps (shape = burstiness,
//    scale = 1 / (rate * burstiness); burstiness 1 = Poisson), the first
//    request at time 0, drawn from StreamSeed(seed, kArrivals).
//  - replay: the source's arrival_ns are the intended send times.
// The concurrency semaphore (FIFO, so requests go out in source order) and
// the per-request client overhead (a fixed delay between send and arrival
// at the server, counted in TTFT and latency) are applied by the Engine.
// Thread-compatible; borrows the source, which must outlive it.
#ifndef SERVESIM_SIM_CLIENT_H_
#define SERVESIM_SIM_CLIENT_H_

#include <cstdint>
#include <limits>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "sim/base/random.h"
#include "sim/request_source.h"

namespace servesim {

struct ClientConfig {
  // Requests per second; +infinity: all at once (closed loop with
  // max_concurrency).
  double request_rate = std::numeric_limits<double>::infinity();
  double burstiness = 1.0;
  int32_t max_concurrency = 0;  // 0: unlimited
  bool replay_arrivals = false;
  TimeNs client_overhead_ns = 0;
  uint64_t seed = 0;
};

// Errors name the flag and the allowed range.
absl::Status ValidateClientConfig(const ClientConfig& config);

class Client {
 public:
  // REQUIRES: ValidateClientConfig(config).ok().
  Client(const ClientConfig& config, RequestSource* source);
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // The next request and when it is meant to be sent; false at the end.
  // Errors from the source pass through; a replayed arrival earlier than
  // the previous one is an error naming the record.
  absl::StatusOr<bool> Next(RequestSpec& out, TimeNs* intended_ns);
  const ClientConfig& config() const { return config_; }
  std::string Describe() const;

 private:
  ClientConfig config_;
  RequestSource* source_;
  Rng rng_;
  double next_s_ = 0;  // open loop: intended time of the next request
  TimeNs last_intended_ns_ = 0;
  int64_t count_ = 0;
};

}  // namespace servesim

#endif  // SERVESIM_SIM_CLIENT_H_
