#include "calibration/physics.h"

#include "gtest/gtest.h"
#include "hwmodels/deployment.h"

namespace servesim {
namespace {

Deployment V5eE2b() {
  ServerSpec spec;
  spec.device = "tpu-v5e";
  spec.model = "gemma-4-e2b";
  spec.max_model_len = 16384;
  auto d = BuildDeployment(spec);
  EXPECT_TRUE(d.ok()) << d.status();
  return *d;
}

// The floor is the FLOPs at peak: 2 x (active weights) per token at least.
TEST(PhysicsTest, PrefillFloorIsAtLeastTheWeightFlopsAtPeak) {
  const Deployment d = V5eE2b();
  const double t = FreshPrefillFloorS(d, 8192);
  // E2B computes with ~2 B weights per token (the per-layer embeddings are
  // lookups): 2 x 2e9 x 8,192 / 197e12 = 0.166 s; attention adds a little.
  EXPECT_GT(t, 0.10);
  EXPECT_LT(t, 0.40);
  EXPECT_NEAR(FreshPrefillFloorS(d, 1024) * 8, t, 0.2 * t);  // ~linear in length
}

// Closed loop of c identical prompts sent at once: the least mean is
// T (c + 1) / 2 (one after another); later requests need T each.
TEST(PhysicsTest, MeanTtftFloorOfAClosedLoop) {
  const Deployment d = V5eE2b();
  const double t_ms = 1e3 * FreshPrefillFloorS(d, 8192);
  EXPECT_DOUBLE_EQ(MeanTtftFloorMs(d, 1, 8, 8192), t_ms);
  EXPECT_DOUBLE_EQ(MeanTtftFloorMs(d, 4, 8, 8192), t_ms * (10.0 + 4.0) / 8.0);
  EXPECT_DOUBLE_EQ(MeanTtftFloorMs(d, 16, 32, 8192), t_ms * (136.0 + 16.0) / 32.0);
}

// The TPU v5e cells the data README flags: 4 and 16 x 8,192 (mean TTFT
// 97.7 / 730.4 ms); 1 and 64 x 8,192 (296.7 / 9,222.7 ms) are possible.
TEST(PhysicsTest, FlagsTheV5eCellsFasterThanFreshPrefill) {
  const Deployment d = V5eE2b();
  EXPECT_NE(ImpossibleTtftReason(d, 4, 8, 8192, 97.71), "");
  EXPECT_NE(ImpossibleTtftReason(d, 16, 32, 8192, 730.36), "");
  EXPECT_EQ(ImpossibleTtftReason(d, 1, 8, 8192, 296.65), "");
  EXPECT_EQ(ImpossibleTtftReason(d, 64, 128, 8192, 9222.65), "");
  EXPECT_EQ(ImpossibleTtftReason(d, 64, 128, 128, 330.29), "");
  const std::string why = ImpossibleTtftReason(d, 4, 8, 8192, 97.71);
  EXPECT_NE(why.find("97.7 ms"), std::string::npos) << why;
  EXPECT_NE(why.find("prefix-cache"), std::string::npos) << why;
}

// The warm-up rule on the measured cells: the EC2 L4 at 1 and 4 streams
// (mean 256.4 / 168.4 ms against medians 101.3 / 93.4, one 1.27 s request)
// and TPU v5e 1 x 128 (45.2 vs 15.9 ms) are caught; cells whose skew comes
// from queueing (TPU v6e 32 streams, v5e 16 x 128) and cells with mean near
// median (MI300X 64 x 8,192) are not.
TEST(PhysicsTest, WarmupRuleCatchesOneOffFirstRequests) {
  EXPECT_NE(WarmupOutlierReason(8, 256.43, 101.34, 1270.12), "");
  EXPECT_NE(WarmupOutlierReason(8, 168.40, 93.39, 410.06), "");
  EXPECT_NE(WarmupOutlierReason(8, 45.22, 15.90, 234.01), "");
  EXPECT_EQ(WarmupOutlierReason(64, 86.56, 56.81, 215.87), "");
  EXPECT_EQ(WarmupOutlierReason(32, 199.35, 160.58, 297.99), "");
  EXPECT_EQ(WarmupOutlierReason(128, 4701.87, 4678.05, 8915.07), "");
  EXPECT_EQ(WarmupOutlierReason(8, 13.23, 12.97, 15.66), "");
  // A missing median or p99 (0) or no prompts: no verdict.
  EXPECT_EQ(WarmupOutlierReason(8, 256.43, 0, 1270.12), "");
  EXPECT_EQ(WarmupOutlierReason(8, 256.43, 101.34, 0), "");
  EXPECT_EQ(WarmupOutlierReason(0, 256.43, 101.34, 1270.12), "");
  const std::string why = WarmupOutlierReason(8, 256.43, 101.34, 1270.12);
  EXPECT_NE(why.find("2.53x"), std::string::npos) << why;
}

}  // namespace
}  // namespace servesim
