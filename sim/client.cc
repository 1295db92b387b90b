#include "sim/client.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace servesim {

absl::Status ValidateClientConfig(const ClientConfig& c) {
  if (!(c.request_rate > 0)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--request-rate: %g is out of range (0, inf] (use inf for all at once)",
        c.request_rate));
  }
  // The Gamma shape of the gaps: 1 Poisson, below 1 burstier. Outside
  // [0.001, 1000] the gaps are all one value or all zero but one, and a
  // denormal shape made NaN arrival times (as `trace generate` bounds it).
  if (!(c.burstiness >= 1e-3 && c.burstiness <= 1e3)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--burstiness: %g is out of range [0.001, 1000]", c.burstiness));
  }
  if (c.max_concurrency < 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--max-concurrency: %d is out of range [1, 2^31) (omit for unlimited)",
        c.max_concurrency));
  }
  if (c.client_overhead_ns < 0 || c.client_overhead_ns > 1'000'000 * kNsPerMs * 1000) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--client-overhead-s: %g is out of range [0, 1e6] s",
                        c.client_overhead_ns / 1e9));
  }
  return absl::OkStatus();
}

Client::Client(const ClientConfig& config, RequestSource* source)
    : config_(config),
      source_(source),
      rng_(StreamSeed(config.seed, RngStream::kArrivals)) {}

absl::StatusOr<bool> Client::Next(RequestSpec& out, TimeNs* intended_ns) {
  absl::StatusOr<bool> more = source_->Next(out);
  if (!more.ok() || !*more) return more;
  TimeNs t = 0;
  if (config_.replay_arrivals) {
    t = out.arrival_ns;
    if (t < 0 || t > kMaxArrivalNs) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: record %d: arrival %d ns is out of range [0, 2^62] ns (~146 years; a "
          "rate scaling too small saturates the timeline)",
          source_->Describe(), count_, t));
    }
    if (t < last_intended_ns_) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: record %d: arrival %d ns is earlier than the previous "
                          "record's %d ns (arrivals "
                          "must be nondecreasing)",
                          source_->Describe(), count_, t, last_intended_ns_));
    }
  } else if (!std::isinf(config_.request_rate)) {
    if (!(next_s_ * 1e9 <= static_cast<double>(kMaxArrivalNs))) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "--request-rate %g: request %d would arrive at %g s, past the simulator's "
          "horizon of 2^62 ns (~146 years); use a higher rate or fewer prompts",
          config_.request_rate, count_, next_s_));
    }
    t = static_cast<TimeNs>(std::llround(next_s_ * 1e9));
    const double theta = 1.0 / (config_.request_rate * config_.burstiness);
    next_s_ += rng_.Gamma(config_.burstiness, theta);
  }
  last_intended_ns_ = t;
  ++count_;
  *intended_ns = t;
  return true;
}

std::string Client::Describe() const {
  std::string arrivals;
  if (config_.replay_arrivals) {
    arrivals = "replayed arrival times";
  } else if (std::isinf(config_.request_rate)) {
    arrivals = "request_rate=inf (all at t=0)";
  } else {
    arrivals = absl::StrFormat("request_rate=%g/s gamma gaps burstiness=%g",
                               config_.request_rate, config_.burstiness);
  }
  return absl::StrFormat(
      "client: %s, max_concurrency=%s, client_overhead=%gs, seed=%d; source: %s",
      arrivals,
      config_.max_concurrency > 0 ? absl::StrCat(config_.max_concurrency)
                                  : std::string("unlimited"),
      config_.client_overhead_ns / 1e9, config_.seed, source_->Describe());
}

}  // namespace servesim
