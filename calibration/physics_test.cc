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

}  // namespace
}  // namespace servesim
