#include "experiments/capacity/cost.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"

namespace servesim {
namespace {

PriceOffer Offer(std::string device, std::string kind, double usd_per_hour,
                 double startup_s = 0, bool bills_when_stopped = false) {
  PriceOffer o;
  o.device = std::move(device);
  o.kind = std::move(kind);
  o.usd_per_hour = usd_per_hour;
  o.startup_s = startup_s;
  o.bills_when_stopped = bills_when_stopped;
  return o;
}

// Write-up A: cost per 1M output tokens = price / (throughput x 3600) x 1e6,
// T4 $0.736/h, L4 $1.1267/h (us-east-2 on-demand), 16 concurrent requests.
TEST(CostTest, UsdPerMillionTokensReproducesWriteUpA) {
  struct Cell {
    double price, tok_s, published;
  };
  const Cell cells[] = {
      {0.736, 786, 0.260}, {1.1267, 1257, 0.249},  // E2B
      {0.736, 488, 0.419}, {1.1267, 848, 0.369},   // E4B
      {0.736, 216, 0.945}, {1.1267, 412, 0.760},   // 12B
  };
  for (const Cell& c : cells) {
    // The write-up rounds the cost to 3 decimals and the derived throughput
    // to an integer, so the cost recomputed from the rounded throughput may
    // differ by the propagated rounding: 0.0005 + cost x 0.5 / tok_s.
    const double bound = 0.0005 + c.published * 0.5 / c.tok_s;
    EXPECT_NEAR(UsdPerMillionTokens(c.price, c.tok_s), c.published, bound)
        << c.price << " $/h at " << c.tok_s << " tok/s";
    // And backwards: the published cost gives the derived throughput.
    const double tok_s = c.price / (c.published * 3600) * 1e6;
    EXPECT_EQ(std::lround(tok_s), c.tok_s) << c.published;
  }
  // The headline example, exactly: 0.736 / (786 * 3600) * 1e6.
  EXPECT_DOUBLE_EQ(UsdPerMillionTokens(0.736, 786), 0.736 / (786.0 * 3600.0) * 1e6);
}

TEST(CostTest, ZeroThroughputCostsInfinity) {
  EXPECT_TRUE(std::isinf(UsdPerMillionTokens(1.0, 0)));
  EXPECT_TRUE(std::isinf(UsdPerMillionTokens(1.0, -5)));
}

// Write-up B: throughput per dollar-hour = output tok/s / $/h.
TEST(CostTest, TokensPerUsdHourReproducesWriteUpB) {
  // MI300X, 1,024 in / 128 out, 64 streams: 5,398.2 tok/s at $1.99/h -> 2,713.
  EXPECT_NEAR(TokensPerSecondPerUsdHour(5398.2, 1.99), 2713, 0.5);
  // 1 stream: 305.1 / 1.99 -> 153.
  EXPECT_NEAR(TokensPerSecondPerUsdHour(305.1, 1.99), 153, 0.5);
  // TPU v5e spot: 120 tok/s (derived) at $0.5779/h -> 208.
  EXPECT_NEAR(TokensPerSecondPerUsdHour(120, 0.5779), 208, 0.5);
  EXPECT_EQ(TokensPerSecondPerUsdHour(100, 0), 0);
}

TEST(CostTest, FleetPriceIsCountTimesPrice) {
  // 2 x L4 + 1 x T4 (SageMaker prices).
  EXPECT_DOUBLE_EQ(FleetUsdPerHour({{"l4", 2, 1.1267}, {"t4", 1, 0.736}}),
                   2 * 1.1267 + 0.736);
  EXPECT_EQ(FleetUsdPerHour({}), 0);
}

std::vector<PriceOffer> Offers() {
  return {Offer("mi300x", "on-demand", 1.99), Offer("tpu-v5e", "spot", 0.5779),
          Offer("tpu-v5e", "on-demand", 1.20)};
}

TEST(CostTest, SelectOfferPicksTheRequestedTier) {
  std::string note;
  auto o = SelectOffer(Offers(), "tpu-v5e", "spot", &note);
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->usd_per_hour, 0.5779);
  EXPECT_TRUE(note.empty());
}

TEST(CostTest, SelectOfferFallsBackToOnDemandWithANote) {
  std::string note;
  auto o = SelectOffer(Offers(), "mi300x", "spot", &note);
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->usd_per_hour, 1.99);
  EXPECT_NE(note.find("no spot offer"), std::string::npos) << note;
}

TEST(CostTest, SelectOfferWithoutAnyOfferIsNotFound) {
  auto o = SelectOffer(Offers(), "t4", "on-demand");
  EXPECT_EQ(o.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(o.status().message().find("t4"), std::string::npos);
  EXPECT_NE(o.status().message().find("no on-demand price offer"), std::string::npos)
      << o.status();  // it read "no on-demand or on-demand"
  auto spot = SelectOffer(Offers(), "t4", "spot");
  EXPECT_NE(spot.status().message().find("no spot or on-demand price offer"),
            std::string::npos)
      << spot.status();
}

PriceOffer Listed(std::string device, std::string kind, double usd, std::string provider,
                  std::string region = "") {
  PriceOffer o = Offer(std::move(device), std::move(kind), usd);
  o.provider = std::move(provider);
  o.instance = o.provider + "-instance";
  o.region = std::move(region);
  return o;
}

// The L4's listed offers (hwmodels/devices/l4.textproto), SageMaker first.
std::vector<PriceOffer> L4Offers() {
  return {Listed("l4", "on-demand", 1.1267, "aws-sagemaker", "us-east-2"),
          Listed("l4", "on-demand", 0.8048, "aws-ec2", "us-east-2"),
          Listed("l4", "on-demand", 0.7045, "gce"),
          Listed("l4", "spot", 0.9412, "aws-ec2")};
}

TEST(CostTest, SelectOfferTakesTheCheapestOnDemandNotTheFirstListed) {
  std::string note = "stale";
  auto o = SelectOffer(L4Offers(), "l4", "on-demand", &note);
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->usd_per_hour, 0.7045);
  EXPECT_EQ(o->provider, "gce");
  EXPECT_TRUE(note.empty()) << note;
}

TEST(CostTest, SpotLosesToACheaperOnDemandOfferAndSaysSo) {
  std::string note;
  auto o = SelectOffer(L4Offers(), "l4", "spot", &note);
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->usd_per_hour, 0.7045);
  EXPECT_EQ(o->kind, "on-demand");
  EXPECT_NE(note.find("cheaper than any spot offer"), std::string::npos) << note;
}

TEST(CostTest, ProviderAndRegionFilterTheOffers) {
  std::string note;
  auto aws =
      SelectOffer(L4Offers(), "l4", "spot", &note, {.provider = "aws-ec2", .region = ""});
  ASSERT_TRUE(aws.ok());
  EXPECT_EQ(aws->usd_per_hour, 0.8048);  // on-demand EC2 still beats EC2 spot
  auto region = SelectOffer(L4Offers(), "l4", "on-demand", &note,
                            {.provider = "aws-sagemaker", .region = "us-east-2"});
  ASSERT_TRUE(region.ok());
  EXPECT_EQ(region->usd_per_hour, 1.1267);
  auto none = SelectOffer(L4Offers(), "l4", "on-demand", &note,
                          {.provider = "", .region = "eu-west-1"});
  EXPECT_EQ(none.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(none.status().message().find("in region eu-west-1"), std::string::npos)
      << none.status();
}

TEST(CostTest, EqualPricesGoToTheFirstListed) {
  const std::vector<PriceOffer> offers = {Listed("t4", "on-demand", 0.5, "a"),
                                          Listed("t4", "on-demand", 0.5, "b")};
  auto o = SelectOffer(offers, "t4", "on-demand");
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->provider, "a");
}

TEST(CostTest, UserOfferKeepsTheDevicesStartupAndIsLabelled) {
  const PriceOffer like = Offer("t4", "on-demand", 0.736, 792, true);
  const PriceOffer u = UserOffer("t4", 0.31, &like);
  EXPECT_EQ(u.usd_per_hour, 0.31);
  EXPECT_EQ(u.kind, "user");
  EXPECT_EQ(u.startup_s, 792);
  EXPECT_TRUE(u.bills_when_stopped);
  EXPECT_EQ(OfferLabel(u), "user --price-usd-per-hour user $0.31/h");
  EXPECT_EQ(OfferLabel(L4Offers()[0]),
            "aws-sagemaker aws-sagemaker-instance us-east-2 "
            "on-demand $1.1267/h");
}

TEST(CostTest, OffersFromDeviceCopiesTierStartupAndStoppedBilling) {
  proto::Device d;
  d.set_id("mi300x");
  d.set_startup_to_ready_s(160);
  auto* p = d.add_prices();
  p->set_tier("on-demand");
  p->set_usd_per_hour(1.99);
  p->set_stopped_keeps_billing(true);
  auto offers = OffersFromDevice(d);
  ASSERT_EQ(offers.size(), 1u);
  EXPECT_EQ(offers[0].device, "mi300x");
  EXPECT_EQ(offers[0].kind, "on-demand");
  EXPECT_EQ(offers[0].startup_s, 160);
  EXPECT_TRUE(offers[0].bills_when_stopped);
}

TEST(CostTest, TensorParallelReplicaIsPricedAtItsMultiChipInstance) {
  proto::Device d;
  d.set_id("l4");
  auto* one = d.add_prices();
  one->set_tier("on-demand");
  one->set_instance("g6.xlarge");
  one->set_usd_per_hour(0.8048);
  auto* four = d.add_prices();
  four->set_tier("on-demand");
  four->set_instance("g6.12xlarge");
  four->set_num_devices(4);
  four->set_usd_per_hour(4.6016);
  const std::vector<PriceOffer> offers = OffersFromDevice(d);
  auto single = SelectOffer(offers, "l4", "on-demand");
  ASSERT_TRUE(single.ok()) << single.status();
  EXPECT_EQ(single->instance, "g6.xlarge");
  auto tp4 = SelectOfferForDevices(offers, "l4", "on-demand", 4);
  ASSERT_TRUE(tp4.ok()) << tp4.status();
  EXPECT_EQ(tp4->instance, "g6.12xlarge");
  EXPECT_EQ(tp4->num_devices, 4);
  EXPECT_EQ(tp4->usd_per_hour, 4.6016);
  auto tp2 = SelectOfferForDevices(offers, "l4", "on-demand", 2);
  EXPECT_EQ(tp2.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(tp2.status().message().find("an instance of 2 devices"), std::string::npos)
      << tp2.status();
}

TrafficProfile BusinessHours() {
  // 9:00-17:00 at 2 req/s, idle otherwise; 256 output tokens per request.
  TrafficProfile t;
  t.requests_per_s.assign(24, 0.0);
  for (int h = 9; h < 17; ++h) t.requests_per_s[h] = 2.0;
  t.output_tokens_per_request = 256;
  return t;
}

TEST(CostTest, AlwaysOnBillsTheWholeDay) {
  PriceOffer t4 = Offer("t4", "on-demand", 0.736);
  auto c = DailyEndpointCost(t4, 1, BusinessHours(), IdlePolicy::kAlwaysOn);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->billed_hours, 24);
  EXPECT_DOUBLE_EQ(c->usd_per_day, 24 * 0.736);
  const double tokens = 8 * 3600 * 2.0 * 256;
  EXPECT_DOUBLE_EQ(c->output_tokens_per_day, tokens);
  EXPECT_DOUBLE_EQ(c->usd_per_million_output_tokens, 24 * 0.736 / tokens * 1e6);
}

TEST(CostTest, DeleteWhenIdleChargesStartupAsPaidIdleTime) {
  // SageMaker T4: 13.2 minutes from creation to InService.
  PriceOffer t4 = Offer("t4", "on-demand", 0.736, 13.2 * 60);
  auto c = DailyEndpointCost(t4, 2, BusinessHours(), IdlePolicy::kDelete);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->starts, 1);
  EXPECT_DOUBLE_EQ(c->startup_hours, 0.22);
  EXPECT_DOUBLE_EQ(c->billed_hours, 8.22);
  EXPECT_DOUBLE_EQ(c->usd_per_day, 8.22 * 0.736 * 2);
}

TEST(CostTest, StoppedDropletKeepsBilling) {
  // DigitalOcean MI300X: a stopped droplet bills; only deletion stops it.
  PriceOffer mi = Offer("mi300x", "on-demand", 1.99, 160, true);
  auto stopped = DailyEndpointCost(mi, 1, BusinessHours(), IdlePolicy::kStop);
  auto deleted = DailyEndpointCost(mi, 1, BusinessHours(), IdlePolicy::kDelete);
  ASSERT_TRUE(stopped.ok());
  ASSERT_TRUE(deleted.ok());
  EXPECT_EQ(stopped->billed_hours, 24);
  EXPECT_DOUBLE_EQ(deleted->billed_hours, 8 + 160.0 / 3600);
}

TEST(CostTest, BusyStretchAcrossMidnightIsOneStart) {
  TrafficProfile t;
  t.requests_per_s.assign(24, 0.0);
  t.requests_per_s[23] = 1;
  t.requests_per_s[0] = 1;
  t.requests_per_s[12] = 1;
  t.output_tokens_per_request = 100;
  PriceOffer o = Offer("x", "on-demand", 1, 360);
  auto c = DailyEndpointCost(o, 1, t, IdlePolicy::kDelete);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->starts, 2);
  EXPECT_DOUBLE_EQ(c->billed_hours, 3 + 2 * 0.1);
}

TEST(CostTest, TrafficAllDayNeverRestarts) {
  TrafficProfile t;
  t.requests_per_s.assign(24, 1.0);
  PriceOffer o = Offer("x", "on-demand", 1, 3600);
  auto c = DailyEndpointCost(o, 1, t, IdlePolicy::kDelete);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->starts, 0);
  EXPECT_EQ(c->billed_hours, 24);
}

TEST(CostTest, ProfileMustHave24NonNegativeHours) {
  TrafficProfile t;
  t.requests_per_s.assign(23, 1.0);
  PriceOffer o = Offer("x", "on-demand", 1);
  EXPECT_EQ(DailyEndpointCost(o, 1, t, IdlePolicy::kAlwaysOn).status().code(),
            absl::StatusCode::kInvalidArgument);
  t.requests_per_s.assign(24, 1.0);
  t.requests_per_s[5] = -1;
  auto c = DailyEndpointCost(o, 1, t, IdlePolicy::kAlwaysOn);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(c.status().message().find("hour 5"), std::string::npos);
}

// Write-up A's claim: a mostly idle always-on endpoint is cheaper on the T4.
TEST(CostTest, MostlyIdleEndpointIsCheaperOnT4) {
  TrafficProfile light;
  light.requests_per_s.assign(24, 0.0);
  light.requests_per_s[10] = 0.05;
  light.output_tokens_per_request = 256;
  PriceOffer t4 = Offer("t4", "on-demand", 0.736);
  PriceOffer l4 = Offer("l4", "on-demand", 1.1267);
  auto ct4 = DailyEndpointCost(t4, 1, light, IdlePolicy::kAlwaysOn);
  auto cl4 = DailyEndpointCost(l4, 1, light, IdlePolicy::kAlwaysOn);
  ASSERT_TRUE(ct4.ok() && cl4.ok());
  EXPECT_LT(ct4->usd_per_million_output_tokens, cl4->usd_per_million_output_tokens);
}

}  // namespace
}  // namespace servesim
