#include "experiments/capacity/memory_fit.h"

#include "gtest/gtest.h"
#include "hwmodels/deployment.h"

namespace servesim {
namespace {

ServerSpec Spec(const char* device, const char* model, const char* quantization,
                int32_t max_model_len) {
  ServerSpec s;
  s.device = device;
  s.model = model;
  s.quantization = quantization;
  s.max_model_len = max_model_len;
  return s;
}

bool Fits(ServerSpec s, int32_t max_model_len) {
  s.max_model_len = max_model_len;
  absl::StatusOr<Deployment> d = BuildDeployment(s);
  EXPECT_TRUE(d.ok()) << d.status();
  return d.ok() && d->memory.fits;
}

// 31B W4A16 on an L4: the hybrid sliding-window layout needs far more KV per
// token of max_model_len at short lengths than at 128K, so the linear hint
// (the cache's tokens at 131072, "9288 tokens fit" when the issue was filed)
// overshot; the solved length is exact.
TEST(MemoryFitTest, LargestMaxModelLenIsExactOnAHybridLayout) {
  const ServerSpec s = Spec("l4", "gemma-4-31b", "w4a16", 131072);
  ASSERT_FALSE(Fits(s, 131072));
  const int64_t linear_hint = BuildDeployment(s).value().memory.kv_cache_tokens;
  absl::StatusOr<int32_t> n = LargestFittingMaxModelLen(s, 131071);
  ASSERT_TRUE(n.ok()) << n.status();
  ASSERT_GT(*n, 0);
  EXPECT_TRUE(Fits(s, *n));
  EXPECT_FALSE(Fits(s, *n + 1));
  EXPECT_LT(*n, linear_hint);  // the old linear hint does not fit
  EXPECT_FALSE(Fits(s, static_cast<int32_t>(linear_hint)));
  EXPECT_FALSE(Fits(s, 9288));
}

TEST(MemoryFitTest, UpperBoundIsReturnedWhenItFits) {
  const ServerSpec s = Spec("mi300x", "gemma-4-e2b", "none", 0);
  absl::StatusOr<int32_t> n = LargestFittingMaxModelLen(s, 8192);
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(*n, 8192);
}

TEST(MemoryFitTest, NoLengthFitsWhenTheWeightsDoNotLoad) {
  const ServerSpec s = Spec("t4", "gemma-4-31b", "none", 4096);
  absl::StatusOr<int32_t> n = LargestFittingMaxModelLen(s, 4095);
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(*n, 0);
}

// The fewest chips: planned at every size, not scaled from one chip's
// shortfall (the KV pool and the activation peak do not shrink with TP as
// the weights do).
TEST(MemoryFitTest, SmallestTensorParallelSizeIsTheFirstThePlannerAccepts) {
  const ServerSpec s = Spec("l4", "gemma-4-31b", "none", 8192);
  ASSERT_FALSE(Fits(s, 8192));
  const int32_t tp = SmallestFittingTensorParallelSize(s);
  ASSERT_GT(tp, 1);
  for (int32_t smaller = 1; smaller <= tp; ++smaller) {
    ServerSpec t = s;
    t.tensor_parallel_size = smaller;
    absl::StatusOr<Deployment> d = BuildDeployment(t);
    EXPECT_EQ(d.ok() && d->memory.fits, smaller == tp) << smaller;
  }
}

TEST(MemoryFitTest, QuantizationsThatFitAreThoseThePlannerAccepts) {
  const ServerSpec s = Spec("t4", "gemma-4-31b", "none", 4096);
  const std::vector<std::string> q = QuantizationsThatFit(s);
  for (const std::string& name : q) {
    ServerSpec t = s;
    t.quantization = name;
    EXPECT_TRUE(Fits(t, 4096)) << name;
    EXPECT_NE(name, "none");
  }
  // bf16 31B (62 GB) cannot load on a 16 GB T4; nor can fp8.
  for (const char* name : {"fp8", "w8a8"}) {
    EXPECT_EQ(std::find(q.begin(), q.end(), name), q.end()) << name;
  }
}

}  // namespace
}  // namespace servesim
