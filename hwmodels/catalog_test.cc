#include "hwmodels/catalog.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hwmodels/calibration_profile.h"
#include "hwmodels/catalog_priors.h"
#include "hwmodels/memory_planner.h"
#include "hwmodels/model_arch.h"
#include "hwmodels/step_model.h"

namespace servesim {
namespace {

using ::testing::HasSubstr;

TEST(CatalogTest, EveryDeviceFileParsesAndCitesSources) {
  const auto ids = DeviceIds();
  EXPECT_EQ(ids, (std::vector<std::string>{"a100-40gb", "a100-80gb", "a10g", "b200",
                                           "h100-pcie", "h100-sxm", "h200", "l4", "l40s",
                                           "mi250x", "mi300x", "mi325x", "t4", "tpu-v5e",
                                           "tpu-v5p", "tpu-v6e"}));
  for (const std::string& id : ids) {
    auto d = FindDevice(id);
    ASSERT_TRUE(d.ok()) << d.status();
    EXPECT_GT(d->peak_flops_fp16(), 0) << id;
    EXPECT_GT(d->bandwidth_bytes_per_s(), 0) << id;
    EXPECT_GT(d->usable_memory_gib(), 0) << id;
    EXPECT_FALSE(d->sources().empty()) << id;
    EXPECT_FALSE(d->weight_formats().empty()) << id;
    EXPECT_FALSE(d->usable_memory_rule().empty()) << id;
    EXPECT_TRUE(d->has_interconnect()) << id;
    EXPECT_EQ(d->origin(), "hwmodels/devices/" + id + ".textproto");
    EXPECT_TRUE(absl::StartsWith(d->content_hash(), "perf-fnv1a64:")) << id;
    EXPECT_TRUE(absl::StartsWith(d->file_hash(), "fnv1a64:")) << id;
  }
  // The five measured devices carry prices (the planner's defaults).
  for (const char* id : {"l4", "mi300x", "t4", "tpu-v5e", "tpu-v6e"})
    EXPECT_FALSE(FindDevice(id)->prices().empty()) << id;
}

// A copy of a shipped file with `from` replaced by `to` (the first match).
std::string DeviceTextWith(const std::string& id, const std::string& from,
                           const std::string& to) {
  std::string text = *DeviceFileText(id);
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

// Line (1-based) of the first occurrence of `needle` in `text`.
int LineOf(const std::string& text, const std::string& needle) {
  const size_t at = text.find(needle);
  return 1 + static_cast<int>(std::count(text.begin(), text.begin() + at, '\n'));
}

TEST(CatalogTest, BadDeviceFilesAreErrorsNamingFileLineAndField) {
  // Missing bandwidth.
  {
    const std::string text =
        DeviceTextWith("h100-sxm", "bandwidth_bytes_per_s: 3.35e12", "");
    auto d = ParseDeviceText(text, "my.textproto");
    ASSERT_FALSE(d.ok());
    EXPECT_THAT(d.status().message(),
                HasSubstr("my.textproto: field bandwidth_bytes_per_s is missing"));
  }
  // Present with 0 (proto3's "absent" value): its line and the value.
  {
    const std::string text = DeviceTextWith("h100-sxm", "bandwidth_bytes_per_s: 3.35e12",
                                            "bandwidth_bytes_per_s: 0");
    auto d = ParseDeviceText(text, "my.textproto");
    ASSERT_FALSE(d.ok());
    EXPECT_THAT(
        d.status().message(),
        HasSubstr(absl::StrCat("my.textproto:", LineOf(text, "bandwidth_bytes_per_s: 0"),
                               ": field bandwidth_bytes_per_s: 0 is out of range")));
  }
  // Negative memory: the line of the field.
  {
    const std::string text =
        DeviceTextWith("h100-sxm", "memory_bytes: 85899345920", "memory_bytes: -8e10");
    auto d = ParseDeviceText(text, "my.textproto");
    ASSERT_FALSE(d.ok());
    EXPECT_THAT(
        d.status().message(),
        HasSubstr(absl::StrCat("my.textproto:", LineOf(text, "memory_bytes: -8e10"),
                               ": field memory_bytes: -8e+10 is out of range")));
  }
  // A sustained clock above the boost clock.
  {
    const std::string text = DeviceTextWith("t4", "sustained_clock_ratio: 0.805",
                                            "sustained_clock_ratio: 1.5");
    auto d = ParseDeviceText(text, "t4x.textproto");
    ASSERT_FALSE(d.ok());
    EXPECT_THAT(d.status().message(),
                HasSubstr(absl::StrCat(
                    "t4x.textproto:", LineOf(text, "sustained_clock_ratio: 1.5"),
                    ": field sustained_clock_ratio: 1.5 is out of range "
                    "(allowed: fraction of the boost clock in [0.05, 1]")));
  }
  // A bandwidth or peak no device has (1 B/s put every step past the
  // simulator's clock and made the predictions faster, not slower), and an
  // interconnect below 1e8 B/s (1e-300 aborted a tensor-parallel run).
  {
    const std::string text = DeviceTextWith("h100-sxm", "bandwidth_bytes_per_s: 3.35e12",
                                            "bandwidth_bytes_per_s: 1");
    auto d = ParseDeviceText(text, "slow.textproto");
    ASSERT_FALSE(d.ok());
    EXPECT_THAT(d.status().message(),
                HasSubstr("field bandwidth_bytes_per_s: 1 is out of range (allowed: "
                          "bytes/s in [1e+09, 1e+14]"));
    const std::string ic = DeviceTextWith("h100-sxm", "bandwidth_bytes_per_s: 900e9",
                                          "bandwidth_bytes_per_s: 1e-300");
    d = ParseDeviceText(ic, "ic.textproto");
    ASSERT_FALSE(d.ok());
    EXPECT_THAT(d.status().message(),
                HasSubstr("bandwidth_bytes_per_s 1e-300, host_link_bytes_per_s"));
  }
  // Prices no rental has: a price of 1e-300 $/h printed $0.000 per 1M, a
  // negative device count was read as one, a month 99 was accepted.
  {
    const std::string from = "prices {";
    for (const auto& [field, says] : std::vector<std::pair<std::string, std::string>>{
             {"usd_per_hour: 1e-300 tier: \"spot\" provider: \"x\" }",
              "usd_per_hour 1e-300 is out of range (allowed: [0.0001, 10000])"},
             {"usd_per_hour: 1 num_devices: -4 tier: \"spot\" provider: \"x\" }",
              "num_devices -4 is out of range"},
             {"usd_per_hour: 1 tier: \"spot\" provider: \"x\" date: \"2026-99-99\" }",
              "date '2026-99-99' is not a date YYYY-MM-DD"}}) {
      const std::string text =
          DeviceTextWith("l4", from, absl::StrCat("prices { ", field, "\nprices {"));
      auto d = ParseDeviceText(text, "p.textproto");
      ASSERT_FALSE(d.ok()) << field;
      EXPECT_THAT(d.status().message(), HasSubstr(says)) << field;
    }
  }
  // A negative collective latency: named where the file is read (it was
  // accepted until --tensor-parallel-size > 1, then named no line).
  {
    const std::string text = DeviceTextWith("l4", "latency_s: 20e-6", "latency_s: -1");
    auto d = ParseDeviceText(text, "l4x.textproto");
    ASSERT_FALSE(d.ok());
    EXPECT_THAT(d.status().message(), HasSubstr("l4x.textproto:"));
    EXPECT_THAT(d.status().message(),
                HasSubstr("field interconnect: latency_s -1 is out of range (allowed: "
                          "seconds per collective in [0, 1])"));
  }
  // Link topology fields: a negative mesh, a bridge of one device.
  for (const auto& [field, says] : std::vector<std::pair<std::string, std::string>>{
           {"latency_s: 20e-6 mesh_links: -7",
            "mesh_links -7 is out of range (allowed: links per device in [0, 7]"},
           {"latency_s: 20e-6 mesh_links: 16",
            "mesh_links 16 is out of range (allowed: links per device in [0, 7], one to "
            "each other device of the node"},
           {"latency_s: 20e-6 link_group_max: 1",
            "link_group_max 1 is out of range (allowed: devices in [2, 65536]"}}) {
    const std::string text = DeviceTextWith("l4", "latency_s: 20e-6", field);
    auto d = ParseDeviceText(text, "l4x.textproto");
    ASSERT_FALSE(d.ok()) << field;
    EXPECT_THAT(d.status().message(), HasSubstr(says)) << field;
  }
  // An fp8 peak on a device without fp8 (Turing).
  {
    const std::string text =
        DeviceTextWith("t4", "peak_flops_fp8: 0", "peak_flops_fp8: 130e12");
    auto d = ParseDeviceText(text, "t4x.textproto");
    ASSERT_FALSE(d.ok());
    EXPECT_THAT(d.status().message(),
                HasSubstr(absl::StrCat("t4x.textproto:", LineOf(text, "peak_flops_fp8:"),
                                       ": field peak_flops_fp8")));
    EXPECT_THAT(d.status().message(), HasSubstr("turing hardware has no fp8"));
  }
  // fp8 listed as a dtype on a CDNA 2 device.
  {
    const std::string text =
        DeviceTextWith("mi250x", "dtypes: \"int8\"", "dtypes: \"int8\"\ndtypes: \"fp8\"");
    auto d = ParseDeviceText(text, "x.textproto");
    ASSERT_FALSE(d.ok());
    EXPECT_THAT(d.status().message(), HasSubstr("field dtypes: fp8 is listed but cdna2"));
  }
  // mxfp4 on a TPU: vLLM's mxfp4 MoE kernels are CUDA / ROCm only.
  {
    const std::string text =
        DeviceTextWith("tpu-v6e", "weight_formats: \"none\"",
                       "weight_formats: \"none\"\nweight_formats: \"mxfp4\"");
    auto d = ParseDeviceText(text, "tpu.textproto");
    ASSERT_FALSE(d.ok());
    EXPECT_THAT(d.status().message(), HasSubstr("field weight_formats"));
    EXPECT_THAT(d.status().message(),
                HasSubstr("mxfp4 MoE kernels are CUDA / ROCm only"));
  }
  // An unknown key.
  {
    const std::string text = DeviceTextWith("l4", "vendor: \"nvidia\"",
                                            "vendor: \"nvidia\"\nbandwith_bytes: 1");
    auto d = ParseDeviceText(text, "typo.textproto");
    ASSERT_FALSE(d.ok());
    EXPECT_THAT(
        d.status().message(),
        HasSubstr(absl::StrCat("typo.textproto:", LineOf(text, "bandwith_bytes"))));
    EXPECT_THAT(d.status().message(), HasSubstr("bandwith_bytes"));
  }
  // Marlin W4A16 claimed on an AMD device.
  {
    const std::string text =
        DeviceTextWith("mi300x", "weight_formats: \"w8a8\"",
                       "weight_formats: \"w8a8\"\nweight_formats: \"w4a16\"");
    auto d = ParseDeviceText(text, "x.textproto");
    ASSERT_FALSE(d.ok());
    EXPECT_THAT(d.status().message(), HasSubstr("Marlin W4A16 kernel is CUDA-only"));
  }
  // Usable memory above the physical memory.
  {
    const std::string text =
        DeviceTextWith("l40s", "usable_memory_gib: 44.40", "usable_memory_gib: 50");
    auto d = ParseDeviceText(text, "x.textproto");
    ASSERT_FALSE(d.ok());
    EXPECT_THAT(d.status().message(), HasSubstr("field usable_memory_gib: 50"));
  }
  // A file cannot claim the loader's fields.
  {
    const std::string text =
        DeviceTextWith("l4", "id: \"l4\"", "id: \"l4\"\ncontent_hash: \"x\"");
    auto d = ParseDeviceText(text, "x.textproto");
    ASSERT_FALSE(d.ok());
    EXPECT_THAT(d.status().message(), HasSubstr("field content_hash"));
  }
}

// The keys a device file may give a prior for are the step-parameter
// table's names (one list): every entry is accepted, with a kernel suffix
// for the per-kernel one, and an unknown key's error lists them all.
TEST(CatalogTest, PriorKeysAreTheStepParameterTable) {
  const std::string from = "param_priors { key: \"bw_eff_weights\" value: 0.86 }";
  for (const StepParameterSpec& p : StepParameterTable()) {
    const std::string key = p.when == StepParameterWhen::kQuantized
                                ? absl::StrCat(p.name, ".marlin")
                                : std::string(p.name);
    // The l4 file with its own entry for `key` (if any) left out and one
    // entry of value `v` in place of its bw_eff_weights line.
    const auto with_prior = [&](double v) {
      std::string text = *DeviceFileText("l4");
      const std::string own = absl::StrCat("param_priors { key: \"", key, "\" ");
      if (key != "bw_eff_weights") {
        for (size_t at = text.find(own); at != std::string::npos; at = text.find(own))
          text.erase(at, text.find('\n', at) - at);
      }
      text.replace(text.find(from), from.size(),
                   absl::StrCat("param_priors { key: \"", key, "\" value: ", v, " }"));
      return text;
    };
    auto d = ParseDeviceText(with_prior(std::max(p.lower, std::min(0.5, p.upper))),
                             "l4.textproto");
    EXPECT_TRUE(d.ok()) << key << ": " << d.status();
    // Outside the table's bounds (a host cost of 1e300 us put steps past the
    // simulator's clock and aborted it): an error with the allowed range.
    const double outside = std::isfinite(p.upper) ? p.upper * 10 + 1 : 1e300;
    auto bad = ParseDeviceText(with_prior(outside), "l4.textproto");
    ASSERT_FALSE(bad.ok()) << key;
    EXPECT_THAT(bad.status().message(),
                HasSubstr(absl::StrCat("'", key, "': ", outside,
                                       " is out of range (allowed: [", p.lower, ", ")))
        << key;
  }
  // A key given twice: a map keeps the last silently, so it is an error.
  {
    auto d = ParseDeviceText(
        DeviceTextWith("l4", from,
                       absl::StrCat(from,
                                    "\nparam_priors { key: \"bw_eff_weights\" value: "
                                    "0.5 }")),
        "l4.textproto");
    ASSERT_FALSE(d.ok());
    EXPECT_THAT(d.status().message(), HasSubstr("a key is given twice"));
  }
  for (const std::string bad :
       {"bw_eff_weight", "quant_kernel_eff", "quant_kernel_eff.dense"}) {
    const std::string text = DeviceTextWith(
        "l4", from, absl::StrCat("param_priors { key: \"", bad, "\" value: 0.5 }"));
    auto d = ParseDeviceText(text, "l4.textproto");
    ASSERT_FALSE(d.ok()) << bad;
    EXPECT_THAT(d.status().message(), HasSubstr(absl::StrCat("unknown key '", bad, "'")));
    for (const StepParameterSpec& p : StepParameterTable())
      EXPECT_THAT(d.status().message(), HasSubstr(p.name));
  }
}

TEST(CatalogTest, DeviceFileByPathLoadsWithItsContentHash) {
  const std::string text =
      DeviceTextWith("h100-sxm", "id: \"h100-sxm\"", "id: \"my-h100\"");
  const std::string path = ::testing::TempDir() + "/servesim_my_h100.textproto";
  std::ofstream(path, std::ios::binary) << text;
  auto d = FindDevice(path);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->id(), "my-h100");
  EXPECT_EQ(d->origin(), path);
  EXPECT_EQ(d->file_hash(), ContentHash(text));
  EXPECT_EQ(d->content_hash(), DevicePerformanceHash(*d));
  EXPECT_NE(d->content_hash(), FindDevice("h100-sxm")->content_hash());
  auto missing = FindDevice(::testing::TempDir() + "/nope.textproto");
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), HasSubstr("--device"));
  EXPECT_THAT(missing.status().message(), HasSubstr("not found"));
  std::remove(path.c_str());
}

TEST(CatalogTest, ContentHashIsFnv1a64) {
  // FNV-1a 64 test vectors: "" and "a".
  EXPECT_EQ(ContentHash(""), "fnv1a64:cbf29ce484222325");
  EXPECT_EQ(ContentHash("a"), "fnv1a64:af63dc4c8601ec8c");
}

TEST(CatalogTest, UnsupportedWeightFormatNamesDeviceAndAllowedFormats) {
  struct Case {
    const char* device;
    const char* format;
  };
  for (const Case& c :
       {Case{"tpu-v6e", "w4a16"}, Case{"mi300x", "w4a16"}, Case{"t4", "fp8"},
        Case{"tpu-v5e", "fp8"}, Case{"a100-80gb", "fp8"}, Case{"mi300x", "w4a16-emb4"}}) {
    auto d = FindDevice(c.device);
    ASSERT_TRUE(d.ok());
    absl::Status st = CheckWeightFormat(*d, c.format);
    ASSERT_FALSE(st.ok()) << c.device << " " << c.format;
    EXPECT_THAT(st.message(), HasSubstr(absl::StrCat("--quantization: ", c.format,
                                                     " is not supported on ", c.device)));
    EXPECT_THAT(
        st.message(),
        HasSubstr(absl::StrCat("allowed: ", absl::StrJoin(d->weight_formats(), ", "))));
  }
  EXPECT_TRUE(CheckWeightFormat(*FindDevice("l4"), "fp8").ok());
  EXPECT_TRUE(CheckWeightFormat(*FindDevice("t4"), "w4a16-emb4").ok());
  EXPECT_TRUE(CheckWeightFormat(*FindDevice("mi300x"), "fp8").ok());
}

TEST(CatalogTest, ModelTextProtoByPathLoadsAndBadOnesNameTheLine) {
  const std::string good = *ModelFileText("gemma-4-e2b");
  const std::string path = ::testing::TempDir() + "/servesim_my_model.textproto";
  std::ofstream(path, std::ios::binary) << good;
  auto m = FindModel(path);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->id(), "gemma-4-e2b");
  std::string bad = good;
  const size_t at = bad.find("hidden_size:");
  ASSERT_NE(at, std::string::npos);
  bad.replace(at, bad.find('\n', at) - at, "hidden_size: -5");
  auto b = ParseModelText(bad, "bad.textproto");
  ASSERT_FALSE(b.ok());
  EXPECT_THAT(
      b.status().message(),
      HasSubstr(absl::StrCat("bad.textproto:", LineOf(bad, "hidden_size: -5"), ": ")));
  EXPECT_THAT(b.status().message(), HasSubstr("hidden_size"));
  std::remove(path.c_str());
}

TEST(CatalogTest, DeviceNamesAreCaseInsensitiveWithAliases) {
  EXPECT_EQ(FindDevice("T4")->id(), "t4");
  EXPECT_EQ(FindDevice("v5e")->id(), "tpu-v5e");
  auto bad = FindDevice("h900");
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

// A model-wide window with no per-layer pattern (Mistral-7B-v0.1) is every
// layer's, as vLLM's Attention falls back to the model's sliding_window; it
// was modelled as full attention. use_sliding_window false (Qwen2/3) keeps
// full attention.
TEST(CatalogTest, AModelWideSlidingWindowAppliesToEveryLayer) {
  const std::string base = R"({"model_type": "mistral", "vocab_size": 32000,
    "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
    "num_key_value_heads": 8, "intermediate_size": 14336,
    "max_position_embeddings": 32768, "sliding_window": 4096)";
  auto desc = ImportHfConfig(base + "}", "mistral/config.json");
  ASSERT_TRUE(desc.ok()) << desc.status();
  auto m = ExpandModelArch(*desc);
  ASSERT_TRUE(m.ok()) << m.status();
  for (const LayerArch& l : m->layers) {
    EXPECT_TRUE(l.sliding);
    EXPECT_EQ(l.window, 4096);
  }
  auto off =
      ImportHfConfig(base + R"(, "use_sliding_window": false})", "qwen/config.json");
  ASSERT_TRUE(off.ok()) << off.status();
  auto full = ExpandModelArch(*off);
  ASSERT_TRUE(full.ok()) << full.status();
  for (const LayerArch& l : full->layers) EXPECT_FALSE(l.sliding);
}

// `vllm serve /path/to/model` takes the model's folder: its config.json is
// the model; a folder without one is an error naming it.
TEST(CatalogTest, ModelFolderMeansItsConfigJson) {
  const std::string dir = ::testing::TempDir() + "/servesim_model_folder";
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/config.json")
      << R"({"model_type": "qwen2", "vocab_size": 151936, "hidden_size": 896,
      "num_hidden_layers": 24, "num_attention_heads": 14, "num_key_value_heads": 2,
      "intermediate_size": 4864, "tie_word_embeddings": true,
      "max_position_embeddings": 32768})";
  auto folder = FindModel(dir);
  ASSERT_TRUE(folder.ok()) << folder.status();
  auto file = FindModel(dir + "/config.json");
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(folder->SerializeAsString(), file->SerializeAsString());
  EXPECT_EQ(folder->num_layers(), 24);
  auto text = ModelFileText(dir);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_NE(text->find("qwen2"), std::string::npos);
  std::filesystem::remove(dir + "/config.json");
  auto empty = FindModel(dir);
  EXPECT_EQ(empty.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(empty.status().message().find("--model " + dir +
                                          ": is a directory without a config.json"),
            std::string::npos)
      << empty.status();
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
  // Where: protobuf quoted 20 characters around the spot, across lines.
  auto comma = ImportHfConfig(
      "{\n  \"model_type\": \"llama\",\n  \"num_attention_heads\": 32,,\n}\n",
      "z/config.json");
  ASSERT_FALSE(comma.ok());
  EXPECT_EQ(comma.status().message(),
            "--model z/config.json:3:29: not valid JSON: Expected an object key or }.");
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

// A dimension of the wrong type, a fraction or a value out of range was
// read as its default or truncated (num_key_value_heads "8" as 32 heads,
// "128" experts as a dense model); layer kinds without attention were
// modelled as full attention; a 4-bit GPTQ checkpoint loaded as 16-bit;
// deep nesting ran for minutes. Each is now an error naming the field.
TEST(CatalogTest, ImportRefusesWrongTypesFractionsAndUnmodelledLayers) {
  const std::string ok_fields =
      R"("vocab_size": 32000, "hidden_size": 4096, "num_hidden_layers": 4,
         "num_attention_heads": 32, "model_type": "llama")";
  auto with = [&](const std::string& extra) {
    const std::string width = absl::StrContains(extra, "intermediate_size")
                                  ? std::string()
                                  : std::string(R"("intermediate_size": 11008, )");
    return ImportHfConfig("{" + ok_fields + ", " + width + extra + "}", "z/config.json");
  };
  struct Case {
    std::string extra, says;
  };
  for (const Case& c : std::vector<Case>{
           {R"("num_key_value_heads": "8")",
            "field num_key_value_heads: a string, not a number (allowed: an integer in "
            "[1, 1e+07], or null/absent)"},
           {R"("num_key_value_heads": 2.5)",
            "field num_key_value_heads: 2.5 is out of range"},
           {R"("num_local_experts": "8", "num_experts_per_tok": 2)",
            "field num_local_experts: a string"},
           {R"("num_local_experts": 8, "num_experts_per_tok": 9)",
            "field num_experts_per_tok: 9 is missing or out of range for an MoE model "
            "(allowed: [1, num_experts 8])"},
           {R"("max_position_embeddings": "131072")",
            "field max_position_embeddings: a string"},
           {R"("sliding_window": -4)", "field sliding_window: -4 is out of range"},
           {R"("tie_word_embeddings": "true")",
            "field tie_word_embeddings: a string, not a boolean (allowed: true, false"},
           {R"("intermediate_size": [11008, 0.5, 11008, 11008])",
            "field intermediate_size[1]: 0.5 is out of range"},
           {R"("num_global_key_value_heads": 64)",
            "field num_global_key_value_heads: 64 must divide num_attention_heads 32"},
           {R"("layer_types": ["full_attention", "linear_attention", "full_attention",
                               "full_attention"])",
            "field layer_types[1]: 'linear_attention' is not modelled (allowed: "
            "'sliding_attention', 'full_attention')"},
           {R"("x": )" + std::string(40, '[') + std::string(40, ']'),
            "z/config.json:2: JSON nested deeper than 32 levels"}}) {
    auto m = with(c.extra);
    ASSERT_FALSE(m.ok()) << c.extra;
    EXPECT_THAT(m.status().message(), HasSubstr(c.says)) << c.extra;
    EXPECT_THAT(m.status().message(), HasSubstr("z/config.json")) << c.extra;
  }
  // A config that would not expand is named at import, by its JSON keys.
  auto tiny = ImportHfConfig(
      R"({"vocab_size": 100, "hidden_size": 16, "num_hidden_layers": 2,
          "num_attention_heads": 32, "intermediate_size": 64})",
      "t/config.json");
  EXPECT_THAT(tiny.status().message(),
              HasSubstr("t/config.json: field num_attention_heads: 32 is more than "
                        "hidden_size 16 with no head_dim given"));
  // The shapes real configs use still import: null for an absent value,
  // whole numbers written as 8.0, per-layer widths, both layer kinds.
  EXPECT_TRUE(with(R"("num_key_value_heads": 8.0, "sliding_window": null,
                       "layer_types": ["sliding_attention", "full_attention",
                                       "sliding_attention", "full_attention"])")
                  .ok());
  // A quantization format servesim does not model by name is recorded as
  // such (the deployment then asks for the matching --quantization).
  auto gptq = with(R"("quantization_config": {"quant_method": "gptq", "bits": 4})");
  ASSERT_TRUE(gptq.ok()) << gptq.status();
  EXPECT_EQ(gptq->checkpoint_quantization(),
            std::string(kUnmodelledQuantPrefix) + "gptq");
}

// Published totals (model cards): Mixtral-8x7B 46.7 B, Qwen3-30B-A3B 30.5 B,
// Qwen1.5-MoE-A2.7B 14.3 B, gpt-oss-20b 20.9 B; configs as on the Hub.
TEST(CatalogTest, ImportsMoeConfigsOfMixtralQwenAndGptOss) {
  struct Case {
    const char* name;
    std::string json;
    double params;
    int dense_width;
    int expert_width;
  };
  std::string gpt_types;
  for (int i = 0; i < 24; ++i)
    gpt_types += std::string(i ? "," : "") +
                 (i % 2 == 0 ? "\"sliding_attention\"" : "\"full_attention\"");
  const Case cases[] = {
      {"mixtral",
       R"({"model_type": "mixtral", "vocab_size": 32000, "hidden_size": 4096,
           "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
           "intermediate_size": 14336, "num_local_experts": 8, "num_experts_per_tok": 2,
           "sliding_window": null, "tie_word_embeddings": false,
           "max_position_embeddings": 32768})",
       46.7e9, 0, 14336},
      {"qwen3_moe",
       R"({"model_type": "qwen3_moe", "vocab_size": 151936, "hidden_size": 2048,
           "num_hidden_layers": 48, "num_attention_heads": 32, "num_key_value_heads": 4,
           "head_dim": 128, "intermediate_size": 6144, "moe_intermediate_size": 768,
           "num_experts": 128, "num_experts_per_tok": 8, "decoder_sparse_step": 1,
           "mlp_only_layers": [], "tie_word_embeddings": false,
           "use_sliding_window": false, "max_position_embeddings": 40960})",
       30.5e9, 0, 768},
      {"qwen2_moe",
       R"({"model_type": "qwen2_moe", "vocab_size": 151936, "hidden_size": 2048,
           "num_hidden_layers": 24, "num_attention_heads": 16, "num_key_value_heads": 16,
           "intermediate_size": 5632, "moe_intermediate_size": 1408,
           "shared_expert_intermediate_size": 5632, "num_experts": 60,
           "num_experts_per_tok": 4, "tie_word_embeddings": false,
           "max_position_embeddings": 8192})",
       14.3e9, 5632, 1408},
      {"gpt_oss",
       R"({"model_type": "gpt_oss", "vocab_size": 201088, "hidden_size": 2880,
           "num_hidden_layers": 24, "num_attention_heads": 64, "num_key_value_heads": 8,
           "head_dim": 64, "intermediate_size": 2880, "num_local_experts": 32,
           "experts_per_token": 4, "num_experts_per_tok": 4, "sliding_window": 128,
           "tie_word_embeddings": false, "max_position_embeddings": 131072,
           "layer_types": [)" +
           gpt_types + "]}",
       20.9e9, 0, 2880},
  };
  for (const Case& c : cases) {
    auto desc = ImportHfConfig(c.json, std::string(c.name) + "/config.json");
    ASSERT_TRUE(desc.ok()) << c.name << ": " << desc.status();
    auto m = ExpandModelArch(*desc);
    ASSERT_TRUE(m.ok()) << c.name << ": " << m.status();
    EXPECT_NEAR(CountParams(*m).Text(), c.params, 0.01 * c.params) << c.name;
    EXPECT_EQ(m->layers[0].intermediate_size, c.dense_width) << c.name;
    EXPECT_EQ(m->expert_intermediate_size, c.expert_width) << c.name;
  }
  // gpt-oss: alternating 128-token sliding and full layers.
  auto g = ExpandModelArch(*ImportHfConfig(cases[3].json, "g/config.json"));
  ASSERT_TRUE(g.ok());
  EXPECT_TRUE(g->layers[0].sliding);
  EXPECT_EQ(g->layers[0].window, 128);
  EXPECT_FALSE(g->layers[1].sliding);
}

TEST(CatalogTest, UnsupportedArchitecturesNameModelTypeAndField) {
  auto mla = ImportHfConfig(
      R"({"model_type": "deepseek_v3", "vocab_size": 129280, "hidden_size": 7168,
          "num_hidden_layers": 61, "num_attention_heads": 128, "num_key_value_heads": 128,
          "intermediate_size": 18432, "kv_lora_rank": 512, "n_routed_experts": 256,
          "num_experts_per_tok": 8, "moe_intermediate_size": 2048})",
      "ds/config.json");
  // MLA without its rope / nope / v head sizes names the missing field.
  ASSERT_FALSE(mla.ok());
  EXPECT_THAT(mla.status().message(), HasSubstr("field qk_rope_head_dim is missing"));
  // MLA is modelled for DeepSeek's model types only.
  auto other_mla = ImportHfConfig(
      R"({"model_type": "llama", "vocab_size": 1000, "hidden_size": 256,
          "num_hidden_layers": 4, "num_attention_heads": 4, "intermediate_size": 512,
          "kv_lora_rank": 64, "qk_rope_head_dim": 16})",
      "l/config.json");
  ASSERT_FALSE(other_mla.ok());
  EXPECT_THAT(other_mla.status().message(),
              HasSubstr("model_type 'llama': field kv_lora_rank"));
  auto sparse = ImportHfConfig(
      R"({"model_type": "qwen2_moe", "vocab_size": 1000, "hidden_size": 256,
          "num_hidden_layers": 4, "num_attention_heads": 4, "intermediate_size": 512,
          "moe_intermediate_size": 128, "num_experts": 8, "num_experts_per_tok": 2,
          "mlp_only_layers": [0]})",
      "q/config.json");
  ASSERT_FALSE(sparse.ok());
  EXPECT_THAT(sparse.status().message(), HasSubstr("field mlp_only_layers"));
  auto mamba =
      ImportHfConfig(R"({"model_type": "mamba", "vocab_size": 1000})", "m/config.json");
  ASSERT_FALSE(mamba.ok());
  EXPECT_THAT(mamba.status().message(), HasSubstr("field model_type: 'mamba'"));
}

// --calibration NAME: a shipped profile by its bare name (the help's form),
// the same as its full name; an unknown bare name lists the shipped ones.
TEST(CatalogTest, ShippedProfileByBareName) {
  auto bare = ResolveCalibrationProfile("l4@vllm-0.28.0", "l4");
  ASSERT_TRUE(bare.ok()) << bare.status();
  auto full =
      ResolveCalibrationProfile("calibration/profiles/l4@vllm-0.28.0.textproto", "l4");
  ASSERT_TRUE(full.ok()) << full.status();
  EXPECT_TRUE(bare->shipped);
  EXPECT_EQ(bare->origin, full->origin);
  EXPECT_EQ(bare->profile.SerializeAsString(), full->profile.SerializeAsString());
  EXPECT_EQ(bare->profile.software_build(), "vllm-0.28.0");
  auto unknown = ResolveCalibrationProfile("l5", "l4");
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(
      unknown.status().message(),
      HasSubstr("--calibration l5: no such file, and no shipped profile of that name "
                "(shipped: l4, l4@vllm-0.28.0, mi300x, t4, tpu-v5e, tpu-v6e;"));
}

// The calibrated value of `key` on shipped device `id`: the shipped
// profile's fit where it fits the key, else the device file's prior.
double CalibratedValue(const std::string& id, const std::string& key) {
  auto prof = ResolveCalibrationProfile("", id);
  EXPECT_TRUE(prof.ok() && prof->found) << id;
  for (const auto& p : prof->profile.parameters())
    if (p.name() == key) return p.value();
  return FindDevice(id)->param_priors().at(key);
}

// The median over every shipped profile that fits `key` (all vendors).
double MedianFitted(const std::string& key) {
  std::vector<double> v;
  for (const std::string& name : ShippedProfileNames()) {
    auto prof = ResolveCalibrationProfile(name, "");
    EXPECT_TRUE(prof.ok() && prof->found) << name;
    for (const auto& p : prof->profile.parameters())
      if (p.name() == key) v.push_back(p.value());
  }
  EXPECT_FALSE(v.empty()) << key;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

TEST(CatalogPriorsTest, UncalibratedDevicesTakeTheirPriorsByRuleFromCalibratedOnes) {
  EXPECT_TRUE(IsCalibratedDevice(*FindDevice("t4")));
  EXPECT_FALSE(IsCalibratedDevice(*FindDevice("h100-sxm")));
  auto h100 = DerivePriorsByRule(*FindDevice("h100-sxm"));
  ASSERT_TRUE(h100.ok()) << h100.status();
  EXPECT_EQ(h100->from, (std::vector<std::string>{"l4", "t4"}));
  // Times and counts: the vendor's mean.
  for (const char* key : {"device_step_us", "host_step_us"}) {
    EXPECT_DOUBLE_EQ(h100->device.param_priors().at(key),
                     (CalibratedValue("l4", key) + CalibratedValue("t4", key)) / 2)
        << key;
  }
  // Efficiencies and the shape constant some profile fits: the median of
  // every profile's fit, validate's leave-one-device-out rule (the vendor
  // mean took the T4's Turing-patched 0.20 into the H100's 0.41).
  EXPECT_EQ(h100->median_keys, (std::vector<std::string>{
                                   "bw_eff_weights", "flops_eff_gemm", "gemm_w_half"}));
  EXPECT_EQ(h100->median_from,
            (std::vector<std::string>{"l4", "mi300x", "t4", "tpu-v5e", "tpu-v6e"}));
  for (const char* key : {"flops_eff_gemm", "bw_eff_weights", "gemm_w_half"}) {
    EXPECT_DOUBLE_EQ(h100->device.param_priors().at(key), MedianFitted(key)) << key;
  }
  EXPECT_GT(h100->device.param_priors().at("flops_eff_gemm"), 0.55);
  EXPECT_TRUE(TransfersAcrossDevices("flops_eff_gemm"));
  EXPECT_TRUE(TransfersAcrossDevices("gemm_w_half"));
  EXPECT_FALSE(TransfersAcrossDevices("host_step_us"));
  EXPECT_FALSE(TransfersAcrossDevices("api_overhead_ms"));
  // Kernel efficiencies: the class's device priors, not a profile's fit.
  const std::string marlin = "quant_kernel_eff.marlin";
  EXPECT_DOUBLE_EQ(h100->device.param_priors().at(marlin),
                   (FindDevice("l4")->param_priors().at(marlin) +
                    FindDevice("t4")->param_priors().at(marlin)) /
                       2);
  // Not every NVIDIA device has the no-split-KV attention term: none here.
  EXPECT_FALSE(h100->device.param_priors().contains("attn_unit_gbs"));
  EXPECT_THAT(h100->note, HasSubstr("device h100-sxm"));
  // The expected error is the leave-one-device-out error of every device
  // the rule drew on, read from their shipped profiles.
  EXPECT_THAT(h100->note, HasSubstr("expected error: throughput "));
  EXPECT_THAT(h100->note,
              HasSubstr("leave-one-device-out MAPE of `servesim validate`: each of l4, "
                        "mi300x, t4, tpu-v5e, tpu-v6e predicted from the other devices"));
  EXPECT_EQ(LeaveOneDeviceOutError({}), "");
  EXPECT_THAT(h100->note, HasSubstr("--device h100-sxm --bench"));

  // MI325X: from MI300X alone, with its fitted attention unit bandwidth and
  // its own compute units.
  auto mi = DerivePriorsByRule(*FindDevice("mi325x"));
  ASSERT_TRUE(mi.ok()) << mi.status();
  EXPECT_EQ(mi->from, (std::vector<std::string>{"mi300x"}));
  EXPECT_DOUBLE_EQ(mi->device.param_priors().at("attn_unit_gbs"),
                   CalibratedValue("mi300x", "attn_unit_gbs"));
  EXPECT_DOUBLE_EQ(mi->device.param_priors().at("attn_units"), 304);
  EXPECT_DOUBLE_EQ(mi->device.non_torch_gib(), FindDevice("mi300x")->non_torch_gib());

  // TPU v5p from v5e and v6e.
  auto v5p = DerivePriorsByRule(*FindDevice("tpu-v5p"));
  ASSERT_TRUE(v5p.ok());
  EXPECT_EQ(v5p->from, (std::vector<std::string>{"tpu-v5e", "tpu-v6e"}));

  // A prior the file sets itself wins over the rule.
  proto::Device own = *FindDevice("h100-sxm");
  (*own.mutable_param_priors())["flops_eff_gemm"] = 0.3;
  auto kept = DerivePriorsByRule(own);
  ASSERT_TRUE(kept.ok());
  EXPECT_DOUBLE_EQ(kept->device.param_priors().at("flops_eff_gemm"), 0.3);
  // A copy of a shipped file with a comment and its own price is the same
  // hardware: still calibrated (its bytes differ). One that says something
  // else about the hardware is not.
  std::string text = *DeviceFileText("t4") + "\n# edited\n";
  const size_t price = text.find("usd_per_hour: 0.736");
  ASSERT_NE(price, std::string::npos);
  text.replace(price, 19, "usd_per_hour: 0.5");
  auto copy = ParseDeviceText(text, "t4-copy.textproto");
  ASSERT_TRUE(copy.ok()) << copy.status();
  EXPECT_NE(copy->file_hash(), FindDevice("t4")->file_hash());
  EXPECT_EQ(copy->content_hash(), FindDevice("t4")->content_hash());
  EXPECT_TRUE(IsCalibratedDevice(*copy));
  const size_t bw = text.find("bandwidth_bytes_per_s: 320e9");
  ASSERT_NE(bw, std::string::npos);
  text.replace(bw, 28, "bandwidth_bytes_per_s: 300e9");
  auto other = ParseDeviceText(text, "t4-other.textproto");
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_NE(other->content_hash(), FindDevice("t4")->content_hash());
  EXPECT_FALSE(IsCalibratedDevice(*other));
}

}  // namespace
}  // namespace servesim
