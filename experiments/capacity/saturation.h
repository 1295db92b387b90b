// Whether a finite open-loop run fell behind the rate it was offered (a
// queue that grows for the whole run), the rule plan and the interval
// draws share.
#ifndef SERVESIM_EXPERIMENTS_CAPACITY_SATURATION_H_
#define SERVESIM_EXPERIMENTS_CAPACITY_SATURATION_H_

#include <cmath>
#include <optional>

namespace servesim {

struct Saturation {
  bool falls_behind = false;
  // The growing queue is the client's (--max-concurrency holds requests
  // back), not the server's.
  bool at_client = false;
};

// A run that sent `num_prompts` requests (the run's own count: a whole
// trace leaves the config's at 0) offered at `offered` req/s that served
// `served` req/s. vLLM's request_throughput divides by the whole benchmark,
// drain included, so a short run whose last requests decode long answers
// reads low without any queue. A server that keeps up has no growing
// queue; one serving mu < 0.9 lambda leaves its last arrival waiting
// T (lambda / mu - 1) > T / 9 after the T = N / lambda seconds of
// arrivals. So a rate under 0.9 x offered counts only when the p99
// queueing delay is past T / 9 (or unknown: nullopt or not finite). That
// queue may be the client's: with --max-concurrency, requests wait at its
// semaphore, where vLLM's latencies (and the server's queueing) do not see
// them, so the p99 client wait counts the same way when reported.
// An infinite or non-positive offered rate (a burst, or a closed loop)
// never falls behind.
inline Saturation FallsBehind(double offered, double num_prompts, double served,
                              std::optional<double> p99_queue_ms,
                              std::optional<double> p99_client_wait_ms) {
  Saturation s;
  if (!(offered > 0) || !std::isfinite(offered) || !(served < 0.9 * offered)) return s;
  const double arrivals_s = num_prompts / offered;
  const auto grows = [&](double ms) {
    return !std::isfinite(ms) || ms / 1e3 > arrivals_s / 9;
  };
  s.at_client =
      p99_client_wait_ms.has_value() && arrivals_s > 0 && grows(*p99_client_wait_ms);
  s.falls_behind = !p99_queue_ms.has_value() || !(arrivals_s > 0) ||
                   grows(*p99_queue_ms) || s.at_client;
  return s;
}

}  // namespace servesim

#endif  // SERVESIM_EXPERIMENTS_CAPACITY_SATURATION_H_
