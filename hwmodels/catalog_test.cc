#include "hwmodels/catalog.h"

#include <cstdio>
#include <fstream>
#include <string>

#include "gtest/gtest.h"
#include "hwmodels/memory_planner.h"
#include "hwmodels/model_arch.h"

namespace servesim {
namespace {

TEST(CatalogTest, EveryDeviceFileParsesAndCitesSources) {
  const auto ids = DeviceIds();
  EXPECT_EQ(ids, (std::vector<std::string>{"l4", "mi300x", "t4", "tpu-v5e", "tpu-v6e"}));
  for (const std::string& id : ids) {
    auto d = FindDevice(id);
    ASSERT_TRUE(d.ok()) << d.status();
    EXPECT_GT(d->peak_flops_fp16(), 0) << id;
    EXPECT_GT(d->bandwidth_bytes_per_s(), 0) << id;
    EXPECT_GT(d->usable_memory_gib(), 0) << id;
    EXPECT_FALSE(d->prices().empty()) << id;
    EXPECT_FALSE(d->sources().empty()) << id;
  }
}

TEST(CatalogTest, DeviceNamesAreCaseInsensitiveWithAliases) {
  EXPECT_EQ(FindDevice("T4")->id(), "t4");
  EXPECT_EQ(FindDevice("v5e")->id(), "tpu-v5e");
  auto bad = FindDevice("h100");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("--device"), std::string::npos);
  EXPECT_NE(bad.status().message().find("tpu-v6e"), std::string::npos);
}

TEST(CatalogTest, DevicesCarryPublishedPricesAndStartup) {
  auto t4 = FindDevice("t4");
  EXPECT_DOUBLE_EQ(t4->prices(0).usd_per_hour(), 0.736);
  EXPECT_DOUBLE_EQ(t4->startup_to_ready_s(), 13.2 * 60);
  auto mi = FindDevice("mi300x");
  EXPECT_DOUBLE_EQ(mi->startup_to_ready_s(), 160);
  EXPECT_TRUE(mi->prices(0).stopped_keeps_billing());
  EXPECT_FALSE(t4->supports_bf16());
  EXPECT_EQ(t4->default_dtype(), "fp16");
}

TEST(CatalogTest, HuggingFaceIdsResolveCaseInsensitivelyWithOptionalIt) {
  for (const char* n :
       {"google/gemma-4-E2B-it", "google/gemma-4-e2b", "GEMMA-4-E2B", "gemma-4-e2b-it"}) {
    auto m = FindModel(n);
    ASSERT_TRUE(m.ok()) << n << ": " << m.status();
    EXPECT_EQ(m->id(), "gemma-4-e2b") << n;
  }
  EXPECT_EQ(FindModel("google/gemma-4-26B-A4B-it")->id(), "gemma-4-26b-a4b");
  auto bad = FindModel("llama-3-8b");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("--model"), std::string::npos);
}

TEST(CatalogTest, ImportsLlamaStyleConfigJson) {
  const std::string json = R"({
    "architectures": ["LlamaForCausalLM"], "model_type": "llama",
    "vocab_size": 128256, "hidden_size": 4096, "num_hidden_layers": 32,
    "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336,
    "max_position_embeddings": 131072, "tie_word_embeddings": false })";
  auto desc = ImportHfConfig(json, "llama/config.json");
  ASSERT_TRUE(desc.ok()) << desc.status();
  auto m = ExpandModelArch(*desc);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->layers.size(), 32u);
  EXPECT_FALSE(m->layers[0].sliding);
  EXPECT_EQ(m->layers[0].head_dim, 128);
  // Llama-3-8B: 8.03 B parameters.
  EXPECT_NEAR(CountParams(*m).Text(), 8.03e9, 0.01 * 8.03e9);
  EXPECT_EQ(KvBytesPerToken(*m, 2), 32 * 2 * 8 * 128 * 2);
}

// Imported models are named after their folder, or after the repository
// for a Hugging Face cache snapshot (whose folder is a commit hash).
TEST(CatalogTest, ImportedModelIdComesFromFolderOrCachedRepository) {
  const std::string json = R"({"model_type": "llama", "vocab_size": 1000,
    "hidden_size": 256, "num_hidden_layers": 2, "num_attention_heads": 4,
    "num_key_value_heads": 2, "intermediate_size": 512})";
  auto plain = ImportHfConfig(json, "/data/my-llama/config.json");
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(plain->id(), "import:my-llama");
  auto cached = ImportHfConfig(
      json,
      "/home/u/.cache/huggingface/hub/models--meta-llama--Llama-3.1-8B/snapshots/"
      "0e9e39f249a16976918f6564b8830bc894c89659/config.json");
  ASSERT_TRUE(cached.ok()) << cached.status();
  EXPECT_EQ(cached->id(), "import:meta-llama/Llama-3.1-8B");
}

TEST(CatalogTest, ImportsGemma4StyleConfigWithTextConfigAndLayerTypes) {
  std::string types;
  for (int i = 0; i < 12; ++i)
    types += (i ? "," : "") +
             std::string((i + 1) % 6 ? "\"sliding_attention\"" : "\"full_attention\"");
  const std::string json = R"({"model_type": "gemma4", "text_config": {
    "model_type": "gemma4_text", "vocab_size": 262144, "hidden_size": 1024,
    "num_hidden_layers": 12, "num_attention_heads": 8, "num_key_value_heads": 2,
    "head_dim": 256, "global_head_dim": 512, "num_global_key_value_heads": 1,
    "sliding_window": 512, "intermediate_size": 4096, "num_kv_shared_layers": 4,
    "hidden_size_per_layer_input": 128, "tie_word_embeddings": true,
    "layer_types": [)" + types +
                           "]}}";
  auto desc = ImportHfConfig(json, "tiny/config.json");
  ASSERT_TRUE(desc.ok()) << desc.status();
  auto m = ExpandModelArch(*desc);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_TRUE(m->layers[0].sliding);
  EXPECT_FALSE(m->layers[5].sliding);
  EXPECT_EQ(m->layers[5].head_dim, 512);
  EXPECT_EQ(m->layers[5].num_kv_heads, 1);
  EXPECT_EQ(m->layers[0].window, 512);
  EXPECT_FALSE(m->layers[8].holds_kv);
  EXPECT_TRUE(m->layers[7].holds_kv);
  EXPECT_EQ(m->per_layer_embedding_dim, 128);
}

TEST(CatalogTest, ConfigJsonPathIsAcceptedAsModel) {
  const std::string path = ::testing::TempDir() + "/servesim_qwen_config.json";
  {
    std::ofstream out(path);
    out << R"({"model_type": "qwen2", "vocab_size": 151936, "hidden_size": 896,
      "num_hidden_layers": 24, "num_attention_heads": 14, "num_key_value_heads": 2,
      "intermediate_size": 4864, "tie_word_embeddings": true, "sliding_window": 32768,
      "use_sliding_window": false, "max_position_embeddings": 32768})";
  }
  auto m = FindModel(path);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->num_layers(), 24);
  EXPECT_EQ(m->sliding_window(), 0);
  std::remove(path.c_str());
}

TEST(CatalogTest, ImportErrorsNameTheFileAndField) {
  auto bad = ImportHfConfig(R"({"hidden_size": 10})", "x/config.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("x/config.json"), std::string::npos);
  EXPECT_NE(bad.status().message().find("vocab_size"), std::string::npos);
  auto missing = FindModel("/nonexistent/config.json");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("not found"), std::string::npos);
  auto notjson = ImportHfConfig("{", "y/config.json");
  ASSERT_FALSE(notjson.ok());
  EXPECT_NE(notjson.status().message().find("y/config.json"), std::string::npos);
}

TEST(CatalogTest, ImportRejectsInconsistentOrUnsupportedConfigs) {
  const std::string ok_fields =
      R"("vocab_size": 32000, "hidden_size": 4096, "num_hidden_layers": 32,
         "num_attention_heads": 32, "intermediate_size": 11008)";
  auto with = [&](const std::string& extra) {
    return ImportHfConfig("{" + ok_fields + ", " + extra + "}", "z/config.json");
  };
  EXPECT_TRUE(with(R"("model_type": "llama", "num_key_value_heads": 8)").ok());
  EXPECT_NE(with(R"("model_type": "llama", "num_key_value_heads": 5)")
                .status()
                .message()
                .find("must divide num_attention_heads 32"),
            std::string::npos);
  EXPECT_NE(with(R"("model_type": "mamba")").status().message().find("not supported"),
            std::string::npos);
  EXPECT_NE(with(R"("model_type": "llama", "max_position_embeddings": 0)")
                .status()
                .message()
                .find("max_position_embeddings"),
            std::string::npos);
  auto huge = ImportHfConfig(
      R"({"vocab_size": 32000, "hidden_size": 1e12, "num_hidden_layers": 32,
          "num_attention_heads": 32})",
      "z/config.json");
  EXPECT_NE(huge.status().message().find("hidden_size: 1e+12 is out of range"),
            std::string::npos)
      << huge.status();
}

}  // namespace
}  // namespace servesim
