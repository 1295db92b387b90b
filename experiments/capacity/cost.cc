#include "experiments/capacity/cost.h"

#include <algorithm>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace servesim {
namespace {
// The installed Abseil has its own string_view (not std::string_view).
absl::string_view A(std::string_view s) { return {s.data(), s.size()}; }
}  // namespace

std::vector<PriceOffer> OffersFromDevice(const proto::Device& device) {
  std::vector<PriceOffer> out;
  for (const proto::PriceOffer& p : device.prices()) {
    PriceOffer o;
    o.device = device.id();
    o.kind = p.tier();
    o.usd_per_hour = p.usd_per_hour();
    o.provider = p.provider();
    o.instance = p.instance();
    o.region = p.region();
    o.date = p.date();
    o.source = p.source();
    o.startup_s = device.has_startup_to_ready_s() ? device.startup_to_ready_s() : 0;
    o.bills_when_stopped = p.has_stopped_keeps_billing() && p.stopped_keeps_billing();
    o.num_devices = std::max(1, p.num_devices());
    out.push_back(std::move(o));
  }
  return out;
}

absl::StatusOr<PriceOffer> SelectOffer(const std::vector<PriceOffer>& offers,
                                       std::string_view device, std::string_view kind,
                                       std::string* note, const OfferFilter& filter) {
  return SelectOfferForDevices(offers, device, kind, 1, note, filter);
}

absl::StatusOr<PriceOffer> SelectOfferForDevices(const std::vector<PriceOffer>& offers,
                                                 std::string_view device,
                                                 std::string_view kind, int num_devices,
                                                 std::string* note,
                                                 const OfferFilter& filter) {
  const PriceOffer* best = nullptr;
  bool has_kind = false;
  for (const PriceOffer& o : offers) {
    if (o.device != device || !(o.usd_per_hour > 0) || o.num_devices != num_devices)
      continue;
    if (!filter.provider.empty() && o.provider != filter.provider) continue;
    if (!filter.region.empty() && o.region != filter.region) continue;
    if (o.kind != kind && o.kind != "on-demand") continue;
    has_kind = has_kind || o.kind == kind;
    if (best == nullptr || o.usd_per_hour < best->usd_per_hour) best = &o;
  }
  std::string filter_text;
  if (!filter.provider.empty())
    absl::StrAppend(&filter_text, " from provider ", filter.provider);
  if (!filter.region.empty()) absl::StrAppend(&filter_text, " in region ", filter.region);
  if (num_devices != 1)
    absl::StrAppend(&filter_text, " for an instance of ", num_devices, " devices");
  if (best == nullptr) {
    return absl::NotFoundError(absl::StrCat(
        "no ", kind == "on-demand" ? "on-demand" : absl::StrCat(A(kind), " or on-demand"),
        " price offer", filter_text, " for device '", A(device), "'"));
  }
  if (note != nullptr) {
    note->clear();
    if (best->kind != kind) {
      *note = has_kind ? absl::StrCat("on-demand is cheaper than any ", A(kind), " offer",
                                      filter_text, " for ", A(device))
                       : absl::StrCat("no ", A(kind), " offer", filter_text, " for ",
                                      A(device), "; on-demand used");
    }
  }
  return *best;
}

PriceOffer UserOffer(std::string_view device, double usd_per_hour,
                     const PriceOffer* like) {
  PriceOffer o;
  o.device = std::string(device);
  o.kind = "user";
  o.usd_per_hour = usd_per_hour;
  o.provider = "user";
  o.instance = "--price-usd-per-hour";
  o.source = "--price-usd-per-hour";
  if (like != nullptr) {
    o.startup_s = like->startup_s;
    o.bills_when_stopped = like->bills_when_stopped;
  }
  return o;
}

std::string OfferLabel(const PriceOffer& o) {
  std::string s = o.provider;
  if (!o.instance.empty()) absl::StrAppend(&s, s.empty() ? "" : " ", o.instance);
  if (!o.region.empty()) absl::StrAppend(&s, " ", o.region);
  absl::StrAppend(&s, " ", o.kind, " $", absl::StrFormat("%g", o.usd_per_hour), "/h");
  return s;
}

double UsdPerMillionTokens(double usd_per_hour, double tokens_per_s) {
  if (!(tokens_per_s > 0)) return std::numeric_limits<double>::infinity();
  return usd_per_hour / (tokens_per_s * 3600.0) * 1e6;
}

double TokensPerSecondPerUsdHour(double tokens_per_s, double usd_per_hour) {
  if (!(usd_per_hour > 0)) return 0;
  return tokens_per_s / usd_per_hour;
}

double FleetUsdPerHour(const std::vector<FleetPart>& parts) {
  double sum = 0;
  for (const FleetPart& p : parts) sum += p.count * p.usd_per_hour;
  return sum;
}

std::string_view IdlePolicyName(IdlePolicy policy) {
  switch (policy) {
    case IdlePolicy::kAlwaysOn:
      return "always-on";
    case IdlePolicy::kStop:
      return "stop-when-idle";
    case IdlePolicy::kDelete:
      return "delete-when-idle";
  }
  return "?";
}

absl::StatusOr<DailyCost> DailyEndpointCost(const PriceOffer& offer, int replicas,
                                            const TrafficProfile& profile,
                                            IdlePolicy policy) {
  if (profile.requests_per_s.size() != 24) {
    return absl::InvalidArgumentError(
        absl::StrCat("traffic profile: ", profile.requests_per_s.size(),
                     " hourly rates given; exactly 24 (hour 0..23) are required"));
  }
  if (replicas < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("replicas: ", replicas, " is not a positive count"));
  }
  DailyCost c;
  bool busy[24];
  for (int h = 0; h < 24; ++h) {
    const double r = profile.requests_per_s[h];
    if (!(r >= 0)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "traffic profile: hour ", h, ": rate ", r, " is not a rate >= 0 req/s"));
    }
    busy[h] = r > 0;
    if (busy[h]) c.busy_hours += 1;
    c.output_tokens_per_day += r * 3600.0 * profile.output_tokens_per_request;
  }
  // Busy stretches: hours h busy with h-1 (mod 24) idle.
  for (int h = 0; h < 24; ++h) {
    if (busy[h] && !busy[(h + 23) % 24]) c.starts += 1;
  }
  switch (policy) {
    case IdlePolicy::kAlwaysOn:
      c.starts = 0;
      c.billed_hours = 24;
      break;
    case IdlePolicy::kStop:
    case IdlePolicy::kDelete:
      c.startup_hours = c.starts * offer.startup_s / 3600.0;
      if (policy == IdlePolicy::kStop && offer.bills_when_stopped) {
        c.billed_hours = 24;  // stopped still bills; start-up overlaps paid time
      } else {
        c.billed_hours = std::min(24.0, c.busy_hours + c.startup_hours);
      }
      break;
  }
  c.usd_per_day = c.billed_hours * offer.usd_per_hour * replicas;
  c.usd_per_million_output_tokens = c.output_tokens_per_day > 0
                                        ? c.usd_per_day / c.output_tokens_per_day * 1e6
                                        : std::numeric_limits<double>::infinity();
  return c;
}

}  // namespace servesim
