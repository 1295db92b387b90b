// Cost arithmetic for capacity what-ifs: price offers per device, $/h of a
// fleet, $ per 1M tokens at a simulated throughput, throughput per $/h, and
// the daily bill of an endpoint that is idle part of the day (start-up time
// charged as paid idle time; a stopped instance that keeps billing).
// Pure functions on plain structs; thread-safe.
#ifndef SERVESIM_EXPERIMENTS_CAPACITY_COST_H_
#define SERVESIM_EXPERIMENTS_CAPACITY_COST_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/hwmodels.pb.h"

namespace servesim {

// One published price for one device (one accelerator / one instance).
struct PriceOffer {
  std::string device;  // "t4", "l4", "mi300x", "tpu-v5e", "tpu-v6e"
  std::string kind;    // "on-demand" | "spot" | "commit-1y" | "commit-3y"
  double usd_per_hour = 0;
  std::string provider;  // "aws-sagemaker", "gce", "digitalocean", ...
  std::string instance;  // "ml.g4dn.xlarge", ...
  std::string region;    // "us-east-2", ...
  std::string date;      // when the price was seen, YYYY-MM-DD
  std::string source;    // write-up / table / cell, or a price page
  // Endpoint creation to ready, charged as paid idle time on every start
  // (13.2 min to InService on the SageMaker T4; 160 s on the MI300X).
  double startup_s = 0;
  // A stopped-but-not-deleted instance keeps billing (DigitalOcean droplet).
  bool bills_when_stopped = false;
  // Devices the instance holds (a multi-chip instance or TPU slice).
  int num_devices = 1;
};

// The device's price offers (proto tier -> kind; startup_to_ready_s and
// stopped_keeps_billing copied to every offer).
std::vector<PriceOffer> OffersFromDevice(const proto::Device& device);

// Which offers a price request accepts besides its tier.
struct OfferFilter {
  std::string provider;  // empty: any; else PriceOffer::provider exactly
  std::string region;    // empty: any; else PriceOffer::region exactly
};

// The price the fleet pays for `device` at tier `kind`, by one rule: among
// the device's offers with a price > 0 that pass `filter`, those of `kind`
// and, since on-demand terms are never worse than spot or a commitment,
// the on-demand ones too; the cheapest wins, ties to the first listed.
// `*note` (when given) says when the winner is not of `kind` ("no spot
// offer for t4; on-demand used" or "on-demand is cheaper than any spot
// offer for l4"); else it is cleared. NotFound, naming the device, tier and
// filter, when no offer qualifies.
// Only single-device offers are considered.
absl::StatusOr<PriceOffer> SelectOffer(const std::vector<PriceOffer>& offers,
                                       std::string_view device, std::string_view kind,
                                       std::string* note = nullptr,
                                       const OfferFilter& filter = {});
// The same among the offers of exactly `num_devices` devices (the instance
// a replica of --tensor-parallel-size num_devices runs on).
absl::StatusOr<PriceOffer> SelectOfferForDevices(const std::vector<PriceOffer>& offers,
                                                 std::string_view device,
                                                 std::string_view kind, int num_devices,
                                                 std::string* note = nullptr,
                                                 const OfferFilter& filter = {});

// A user's own price for `device` (--price-usd-per-hour DEVICE=X): kind
// "user", provider "user", instance "--price-usd-per-hour"; start-up time
// and stopped billing copied from `like` (the device's offers) when given.
PriceOffer UserOffer(std::string_view device, double usd_per_hour,
                     const PriceOffer* like = nullptr);

// "gce g2-standard-4 on-demand $0.7045/h" (region after the instance when set).
std::string OfferLabel(const PriceOffer& offer);

// $ per 1M tokens = price / (tokens_per_s x 3600) x 1e6 (write-up A's
// formula). +inf when tokens_per_s <= 0.
double UsdPerMillionTokens(double usd_per_hour, double tokens_per_s);
// Output tok/s per $/h (write-up B's per-dollar table). 0 when price <= 0.
double TokensPerSecondPerUsdHour(double tokens_per_s, double usd_per_hour);

// One group of identical replicas of a fleet.
struct FleetPart {
  std::string device;
  int count = 1;
  double usd_per_hour = 0;         // per replica
  int tensor_parallel_size = 1;    // chips per replica: TP x PP x DP (an instance
  int pipeline_parallel_size = 1;  // of that many); PP and DP are the base
  int data_parallel_size = 1;      // server's, labels only (not searched)
};
// Sum of count x price.
double FleetUsdPerHour(const std::vector<FleetPart>& parts);

// How an endpoint is run over the day.
enum class IdlePolicy {
  kAlwaysOn,  // billed 24 h
  kStop,      // stopped in idle hours (still billed where bills_when_stopped)
  kDelete,    // deleted in idle hours, recreated before each busy stretch
};

// 24 hourly request rates (req/s), hour 0 first; the day wraps around.
struct TrafficProfile {
  std::vector<double> requests_per_s;
  double output_tokens_per_request = 0;
  double input_tokens_per_request = 0;
};

struct DailyCost {
  double busy_hours = 0;     // hours with traffic
  double starts = 0;         // endpoint starts per day (busy stretches)
  double startup_hours = 0;  // paid idle time while starting
  double billed_hours = 0;
  double usd_per_day = 0;
  double output_tokens_per_day = 0;
  double usd_per_million_output_tokens = 0;  // +inf without traffic
};

// Daily bill of one endpoint of `replicas` instances under `profile`.
// REQUIRES: profile.requests_per_s.size() == 24 (InvalidArgument otherwise),
// rates >= 0. Each maximal run of busy hours (wrapping midnight) is one start
// under kStop/kDelete; each start adds offer.startup_s of billed time (a
// day with traffic in all 24 hours never stops, so no start).
absl::StatusOr<DailyCost> DailyEndpointCost(const PriceOffer& offer, int replicas,
                                            const TrafficProfile& profile,
                                            IdlePolicy policy);

std::string_view IdlePolicyName(IdlePolicy policy);

}  // namespace servesim

#endif  // SERVESIM_EXPERIMENTS_CAPACITY_COST_H_
