#include "hwmodels/model_arch.h"

#include "gtest/gtest.h"
#include "hwmodels/catalog.h"
#include "hwmodels/memory_planner.h"

namespace servesim {
namespace {

ModelArch Load(const std::string& id) {
  auto desc = FindModel(id);
  EXPECT_TRUE(desc.ok()) << desc.status();
  auto m = ExpandModelArch(*desc);
  EXPECT_TRUE(m.ok()) << m.status();
  return *m;
}

double LoadGib(const std::string& id, const std::string& q) {
  auto f = ResolveWeightFormat(q);
  EXPECT_TRUE(f.ok());
  return ComputeWeightBytes(Load(id), *f, 2).Total() / kBytesPerGib;
}

TEST(ModelArchTest, LayerTypesAndKvSharingFollowTheConfigs) {
  struct Case {
    const char* id;
    int layers, sliding, kv_sliding, kv_full;
  };
  for (const Case& c :
       {Case{"gemma-4-e2b", 35, 28, 12, 3}, Case{"gemma-4-e4b", 42, 35, 20, 4},
        Case{"gemma-4-12b", 48, 40, 40, 8}, Case{"gemma-4-26b-a4b", 30, 25, 25, 5},
        Case{"gemma-4-31b", 60, 50, 50, 10}}) {
    ModelArch m = Load(c.id);
    int sliding = 0, kv_s = 0, kv_f = 0;
    for (const LayerArch& l : m.layers) {
      sliding += l.sliding;
      if (l.holds_kv) (l.sliding ? kv_s : kv_f)++;
      EXPECT_EQ(l.head_dim, l.sliding ? 256 : 512) << c.id;
    }
    EXPECT_EQ(static_cast<int>(m.layers.size()), c.layers) << c.id;
    EXPECT_EQ(sliding, c.sliding) << c.id;
    EXPECT_EQ(kv_s, c.kv_sliding) << c.id;
    EXPECT_EQ(kv_f, c.kv_full) << c.id;
  }
}

TEST(ModelArchTest, E2bHasDoubleWideFfnInLayers15To34) {
  ModelArch m = Load("gemma-4-e2b");
  EXPECT_EQ(m.layers[14].intermediate_size, 6144);
  EXPECT_EQ(m.layers[15].intermediate_size, 12288);
  EXPECT_EQ(m.layers[34].intermediate_size, 12288);
}

TEST(ModelArchTest, KvBytesPerTokenMatchPublishedTable) {
  EXPECT_EQ(KvBytesPerToken(Load("gemma-4-e2b"), 2), 18432);
  EXPECT_EQ(KvBytesPerToken(Load("gemma-4-e4b"), 2), 57344);
  EXPECT_EQ(KvBytesPerToken(Load("gemma-4-12b"), 2), 344064);
  EXPECT_EQ(KvBytesPerToken(Load("gemma-4-26b-a4b"), 2), 225280);
  EXPECT_EQ(KvBytesPerToken(Load("gemma-4-31b"), 2), 901120);
}

TEST(ModelArchTest, TextParameterCountsWithinOnePercentOfPublished) {
  for (const char* id :
       {"gemma-4-e2b", "gemma-4-e4b", "gemma-4-12b", "gemma-4-26b-a4b", "gemma-4-31b"}) {
    ModelArch m = Load(id);
    const double text = CountParams(m).Text();
    EXPECT_NEAR(text, m.source.published_text_params(),
                0.01 * m.source.published_text_params())
        << id;
  }
  // Without per-layer embeddings: E2B 2.30 B, E4B 4.70 B; PLE tables 2.35 / 2.82 B.
  const ParamCounts e2b = CountParams(Load("gemma-4-e2b"));
  EXPECT_NEAR(e2b.Text() - e2b.per_layer_embedding, 2.30e9, 0.01 * 2.30e9);
  EXPECT_NEAR(e2b.per_layer_embedding, 2.35e9, 0.01 * 2.35e9);
  const ParamCounts e4b = CountParams(Load("gemma-4-e4b"));
  EXPECT_NEAR(e4b.per_layer_embedding, 2.82e9, 0.01 * 2.82e9);
  // 26B A4B: 3.81 B active (top-8 of 128 experts).
  const ModelArch moe = Load("gemma-4-26b-a4b");
  const ParamCounts c = CountParams(moe);
  const double active = c.Text() - c.experts * (1.0 - 8.0 / 128.0);
  EXPECT_NEAR(active, 3.81e9, 0.02 * 3.81e9);
}

TEST(ModelArchTest, Bf16LoadsWithinTwoPercentOfPublished) {
  EXPECT_NEAR(LoadGib("gemma-4-e2b", "none"), 9.42, 0.02 * 9.42);
  EXPECT_NEAR(LoadGib("gemma-4-12b", "none"), 22.2, 0.02 * 22.2);
  EXPECT_NEAR(LoadGib("gemma-4-26b-a4b", "none"), 47.0, 0.02 * 47.0);
  EXPECT_NEAR(LoadGib("gemma-4-31b", "none"), 57.2, 0.02 * 57.2);
  // E4B's "~14.0 GiB" matches its text decoder alone; with the vision and
  // audio encoders that vLLM also loads the estimate is 14.8 GiB.
  auto f = ResolveWeightFormat("none");
  const WeightBytes e4b = ComputeWeightBytes(Load("gemma-4-e4b"), *f, 2);
  EXPECT_NEAR((e4b.Total() - e4b.encoders) / kBytesPerGib, 14.0, 0.02 * 14.0);
}

TEST(ModelArchTest, FourBitLoadsWithinThreePercentOfPublished) {
  EXPECT_NEAR(LoadGib("gemma-4-12b", "w4a16-emb4"), 7.36, 0.03 * 7.36);
  EXPECT_NEAR(LoadGib("gemma-4-26b-a4b", "w4a16-emb4"), 14.2, 0.03 * 14.2);
}

TEST(ModelArchTest, LinearBytesCountGroupScales) {
  WeightFormat f = *ResolveWeightFormat("w4a16");
  f.group_size = 128;
  // 1024 x 256 weights at 4 bits + 2 groups per row x 1024 rows x 2 B.
  EXPECT_DOUBLE_EQ(LinearBytes(f, 256.0 * 1024, 256, 2), 256.0 * 1024 / 2 + 1024 * 2 * 2);
  f.group_size = 0;
  EXPECT_DOUBLE_EQ(LinearBytes(f, 256.0 * 1024, 256, 2), 256.0 * 1024 / 2 + 1024 * 2);
  EXPECT_DOUBLE_EQ(LinearBytes(*ResolveWeightFormat("none"), 1000, 10, 2), 2000);
}

TEST(ModelArchTest, UnknownQuantizationNamesFlagAndAllowedValues) {
  auto f = ResolveWeightFormat("gptq");
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("--quantization"), std::string::npos);
  EXPECT_NE(f.status().message().find("w4a16-emb4"), std::string::npos);
}

TEST(ModelArchTest, RejectsFfnRunsNotCoveringAllLayers) {
  auto desc = FindModel("gemma-4-12b");
  ASSERT_TRUE(desc.ok());
  desc->mutable_ffn_runs(0)->set_count(47);
  auto m = ExpandModelArch(*desc);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("ffn_runs"), std::string::npos);
}

}  // namespace
}  // namespace servesim
