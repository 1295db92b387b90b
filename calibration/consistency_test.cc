#include "calibration/consistency.h"

#include "gtest/gtest.h"

namespace servesim {
namespace {

std::vector<ConsistencyFinding> Findings() {
  auto db =
      MeasurementDb::LoadDir(std::string(SERVESIM_SOURCE_DIR) + "/calibration/data");
  EXPECT_TRUE(db.ok()) << db.status();
  return CheckPublishedConsistency(*db);
}

const ConsistencyFinding* Find(const std::vector<ConsistencyFinding>& f,
                               const std::string& id) {
  for (const auto& x : f) {
    if (x.id == id) return &x;
  }
  return nullptr;
}

TEST(ConsistencyTest, FlagsTheTpuV6ePriceTheSecondTableImplies) {
  const auto f = Findings();
  const auto* c1 = Find(f, "tpu-v6e/on_demand_price_implied/c1");
  ASSERT_NE(c1, nullptr);
  EXPECT_FALSE(c1->consistent);
  EXPECT_NEAR(c1->recomputed, 2.69, 0.01);
}

TEST(ConsistencyTest, ImpliedTpuV5eOnDemandPriceIsAbout120) {
  const auto f = Findings();
  for (const char* id :
       {"tpu-v5e/on_demand_price_implied/c1", "tpu-v5e/on_demand_price_implied/c64"}) {
    const auto* x = Find(f, id);
    ASSERT_NE(x, nullptr) << id;
    EXPECT_TRUE(x->consistent) << id << " " << x->recomputed;
    EXPECT_NEAR(x->recomputed, 1.20, 0.01);
  }
}

TEST(ConsistencyTest, MeasuredMi300xTablesAddUp) {
  const auto f = Findings();
  for (const char* id :
       {"mi300x/tok_s_per_usd_hour/c1", "mi300x/tok_s_per_usd_hour/c64",
        "mi300x/total_throughput/in1024/c64", "mi300x/kv_pool_share/in8192/c64",
        "t4_l4/price_ratio", "t4_l4/16par_ratio/e2b", "t4/12b/kv_full_requests"}) {
    const auto* x = Find(f, id);
    ASSERT_NE(x, nullptr) << id;
    EXPECT_TRUE(x->consistent) << id << " published " << x->published << " recomputed "
                               << x->recomputed;
  }
}

TEST(ConsistencyTest, E2bCostPremiumFallsJustBelowThePublishedFivePercent) {
  const auto f = Findings();
  const auto* x = Find(f, "t4_l4/cost_premium_pct/e2b");
  ASSERT_NE(x, nullptr);
  EXPECT_NEAR(x->recomputed, 4.42, 0.01);
  EXPECT_FALSE(x->consistent);
}

}  // namespace
}  // namespace servesim
