// Memory plans checked against vLLM KV-cache figures published outside the
// write-ups: each test quotes its source and log lines, runs the
// planner with the logged settings on the shipped datasheet device file and
// the model's public config.json (data/models/, sources in data/README.md),
// and compares the pieces the log gives.
//
// What servesim claims for logged KV capacities (docs/validation.md and
// memory_planner_test.cc): from the logged KV memory the token count is
// within 1%; from the server flags alone (estimated weights, non-torch
// memory and activation peak) within 3% on the calibrated devices. These
// pairs are on uncalibrated devices (H100 SXM, A100 80GB: usable memory
// the CUDA-reported total, non-torch memory and activation factors by
// rule), so a miss of the 3% bound is a finding, kept here as the measured
// range with its cause, not a widened tolerance.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hwmodels/deployment.h"
#include "hwmodels/memory_planner.h"
#include "hwmodels/model_arch.h"
#include "hwmodels/parallelism.h"
#include "sim/base/int_math.h"

namespace servesim {
namespace {

std::string ModelConfig(const char* name) {
  return std::string(SERVESIM_DATA_DIR) + "/models/" + name + "/config.json";
}

double RelErr(double got, double want) { return (got - want) / want; }

// --- Pair 1 and 2: Meta-Llama-3-8B on H100 80GB, TP1 and TP2 ------------
// Source: vllm-project/vllm pull request #10511 ("[core] overhaul memory
// profiling and fix backward compatibility"), comment by youkaichao,
// 2024-12-14, https://github.com/vllm-project/vllm/pull/10511 (vLLM V0
// engine, main branch of 2024-12-13, between 0.6.4 and 0.6.5; default
// flags: max_model_len 8,192 from the config, no chunked prefill so the
// profiling step runs max_num_batched_tokens = 8,192 tokens, max_num_seqs
// 256, block size 16, gpu_memory_utilization 0.90):
//   $ vllm serve meta-llama/Meta-Llama-3-8B
//   total_gpu_memory     79.22GiB
//   gpu_memory_utilization       0.90
//   the current vLLM instance can use    71.29GiB
//   model weights take   14.96GiB
//   non_torch_memory     1.79GiB
//   PyTorch activation peak memory       1.26GiB
//   available_kv_cache_memory    53.29GiB
//   $ vllm serve meta-llama/Meta-Llama-3-8B -tp 2
//   total_gpu_memory     79.22GiB
//   the current vLLM instance can use    71.29GiB
//   model weights take   7.48GiB
//   non_torch_memory     3.58GiB
//   PyTorch activation peak memory       1.26GiB
//   available_kv_cache_memory    (the stored copy of the comment breaks
//                                 off here; V0's rule gives 71.29 - 7.48
//                                 - 3.58 - 1.26 = 58.97 GiB)
// Llama-3-8B holds 32 x 2 x 8 x 128 x 2 B = 128 KiB of KV per token, so
// 53.29 GiB is 27,284 blocks of 16 tokens = 436,544 tokens (+-40 for the
// log's 0.01 GiB rounding); at TP2 each rank holds 4 KV heads (64 KiB per
// token): 58.97 GiB = 60,385 blocks = 966,160 tokens.
ServerSpec Llama3On(int32_t tp) {
  ServerSpec s;
  s.device = "h100-sxm";
  s.model = ModelConfig("meta-llama-3-8b");
  s.max_model_len = 8192;
  s.max_num_batched_tokens = 8192;
  s.max_num_seqs = 256;
  s.gpu_memory_utilization = 0.90;
  s.async_scheduling = false;  // V0
  s.tensor_parallel_size = tp;
  return s;
}

constexpr int64_t kLlama3Tp1Tokens = 436544;
constexpr int64_t kLlama3Tp2Tokens = 966160;

TEST(PublishedKvTest, Llama3On8bH100LoggedKvMemoryGivesTheLoggedTokens) {
  for (auto [tp, kv_gib, tokens] :
       {std::tuple<int32_t, double, int64_t>{1, 53.29, kLlama3Tp1Tokens},
        {2, 58.97, kLlama3Tp2Tokens}}) {
    ServerSpec s = Llama3On(tp);
    s.measured_kv_cache_gib = kv_gib;
    auto d = BuildDeployment(s);
    ASSERT_TRUE(d.ok()) << d.status();
    EXPECT_EQ(d->memory.kv_block_bytes, int64_t{16} * 32 * 2 * (8 / tp) * 128 * 2) << tp;
    EXPECT_NEAR(static_cast<double>(d->memory.kv_cache_tokens), tokens, 0.01 * tokens)
        << "tp " << tp;
  }
}

TEST(PublishedKvTest, Llama3On8bH100WeightsMatchTheLog) {
  for (auto [tp, weights] : {std::pair<int32_t, double>{1, 14.96}, {2, 7.48}}) {
    auto d = BuildDeployment(Llama3On(tp));
    ASSERT_TRUE(d.ok()) << d.status();
    EXPECT_NEAR(d->memory.weights_gib, weights, 0.01 * weights) << "tp " << tp;
  }
}

// From the server flags alone the planner takes usable memory from the
// H100 file (79.22 GiB, the CUDA-reported total of this very log), non-torch
// memory 0.42 GiB (the mean of the calibrated NVIDIA devices; V0 logged
// 1.79) plus, at TP2, the TP group's communication buffers (+1.79 GiB per
// rank: TensorParallelNonTorchGib, a rule taken from this log's TP1/TP2
// pair, so TP2 is its fit point, not an independent check), and the
// activation peak (3.10 / 2.18 GiB from the V1-fitted factor against V0's
// logged 1.26). Before the usable-memory and TP rules: TP1 437,456 tokens
// (+0.21%), TP2 1,012,576 (+4.80%). Now TP1 52.82 GiB, 432,672 tokens
// (-0.89%); TP2 59.43 GiB, 973,664 tokens (+0.78%): within the 3% claim.
TEST(PublishedKvTest, Llama3On8bH100FromFlagsAlone) {
  auto tp1 = BuildDeployment(Llama3On(1));
  ASSERT_TRUE(tp1.ok()) << tp1.status();
  EXPECT_DOUBLE_EQ(tp1->memory.total_gib, 79.22);
  EXPECT_NEAR(static_cast<double>(tp1->memory.kv_cache_tokens), kLlama3Tp1Tokens,
              0.03 * kLlama3Tp1Tokens);
  EXPECT_NEAR(tp1->memory.kv_cache_gib, 53.29, 0.03 * 53.29);
  auto tp2 = BuildDeployment(Llama3On(2));
  ASSERT_TRUE(tp2.ok()) << tp2.status();
  EXPECT_NEAR(tp2->memory.non_torch_gib - tp1->memory.non_torch_gib, 3.58 - 1.79, 1e-9);
  EXPECT_NEAR(static_cast<double>(tp2->memory.kv_cache_tokens), kLlama3Tp2Tokens,
              0.03 * kLlama3Tp2Tokens);
}

// --- Pair 3: Qwen3-235B-A22B-FP8 on 4x H100 80GB, TP4 --------------------
// Source: vllm-project/vllm issue #21348 ("[Performance]: KV Cache Size
// Comparison vLLM vs SGLang"), MMuzzammil1, 2025-07-22,
// https://github.com/vllm-project/vllm/issues/21348 (V1 engine; the
// version is not stated, the date puts it at 0.9.2 or 0.10.0; flags all
// default but TP: gpu_memory_utilization 0.90, max_model_len 40,960 from
// the config, max_num_batched_tokens 8,192 and max_num_seqs 1,024 for a
// >= 70 GiB GPU; an LMCache KV connector that leaves the GPU pool alone):
//   vllm serve /path/to/Qwen3-235B-A22B-FP8 --tensor-parallel-size 4 ...
//   Available KV cache memory: 8.11 GiB
//   GPU KV cache size: 178,880 tokens
// No "Model loading took" line is quoted. Per rank: 94 layers x 2 x 1 KV
// head x 128 x 2 B = 48,128 B per token.
ServerSpec Qwen3MoeOn4xH100() {
  ServerSpec s;
  s.device = "h100-sxm";
  s.model = ModelConfig("qwen3-235b-a22b-fp8");
  s.quantization = "fp8";
  s.tensor_parallel_size = 4;
  s.gpu_memory_utilization = 0.90;
  return s;
}
constexpr int64_t kQwen3Tokens = 178880;

// The checkpoint's fp8 blocks are [128, 128] (quantization_config.
// weight_block_size): at TP 8 its experts (1,536 wide) split into 192 per
// rank, which vLLM's Fp8MoEMethod refuses to load ("not divisible by
// weight quantization block_n = 128"); servesim planned 18.9x concurrency.
// TP 4 (384) loads, and so does TP 8 with expert parallelism (whole
// experts per rank).
TEST(PublishedKvTest, Qwen3Fp8BlocksRefuseATensorParallelSplitVllmRefuses) {
  ServerSpec s = Qwen3MoeOn4xH100();
  EXPECT_TRUE(BuildDeployment(s).ok());
  s.tensor_parallel_size = 8;
  auto tp8 = BuildDeployment(s);
  ASSERT_FALSE(tp8.ok());
  EXPECT_NE(tp8.status().message().find("into 192 per rank, not a multiple of the fp8 "
                                        "checkpoint's weight block 128"),
            std::string::npos)
      << tp8.status();
  s.enable_expert_parallel = true;
  EXPECT_TRUE(BuildDeployment(s).ok());
}

// From the logged 8.11 GiB the planner gives 11,308 blocks = 180,928
// tokens, +1.14%: misses the 1% claim. 178,880 tokens are 11,180 blocks =
// 8.02 GiB, 0.09 GiB under the logged line, more than its 0.005 GiB
// rounding. Probably one rank's line: V1 sizes the pool by the minimum
// over the ranks and each rank logs its own memory (not verified: the
// issue quotes one line). Kept as a known gap, +1% to +1.5%.
TEST(PublishedKvTest, Qwen3MoeTp4LoggedKvMemoryIsOnePercentOverTheLoggedTokens) {
  ServerSpec s = Qwen3MoeOn4xH100();
  s.measured_kv_cache_gib = 8.11;
  auto d = BuildDeployment(s);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->memory.kv_block_bytes, int64_t{16} * 94 * 2 * 1 * 128 * 2);
  EXPECT_EQ(d->scheduler.max_model_len, 40960);
  const double e = RelErr(static_cast<double>(d->memory.kv_cache_tokens),
                          static_cast<double>(kQwen3Tokens));
  EXPECT_GT(e, 0.01);
  EXPECT_LT(e, 0.015);
}

// From the flags alone: weights 55.16 GiB per rank (estimated; the log
// gives none), non-torch 0.42 + 1.79 (TP buffers) + 2.25 (NVLS at TP4: 2
// communicators x 4 x 288 MiB) = 4.46, activation 2.40 -> KV 9.28 GiB,
// 207,008 tokens: +15.7%. Before the usable-memory and TP rules: 13.90
// GiB, 310,192 tokens, +73%. Still a known gap (+10% to +22%): 1.2 GiB of
// non-KV memory per rank the planner does not find (the 8.02 GiB that the
// logged tokens take, against 9.28). The log quotes no weights and no
// profiling peak, so whether it is the weights (estimated, not logged), the
// fp8 fused-MoE workspace at 8,192 tokens or more communication memory at
// TP4, it cannot tell.
TEST(PublishedKvTest, Qwen3MoeTp4FromFlagsAloneIsAKnownGap) {
  auto d = BuildDeployment(Qwen3MoeOn4xH100());
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->scheduler.max_num_batched_tokens, 8192);
  EXPECT_EQ(d->scheduler.max_num_seqs, 1024);
  const double e = RelErr(static_cast<double>(d->memory.kv_cache_tokens),
                          static_cast<double>(kQwen3Tokens));
  EXPECT_NEAR(d->memory.non_torch_gib - d->device.non_torch_gib(),
              1.79 + 2 * 4 * 288.0 / 1024, 1e-9);
  EXPECT_GT(e, 0.10);
  EXPECT_LT(e, 0.22);
}

// --- Pair 4: gpt-oss-20b on A100 80GB --------------------------------------
// Source: "[AI] vLLM 部署地端模型系統訊息記錄 A100", myoceane.fr,
// 2026-04-18, https://myoceane.fr/index.php/ai-vllm-a100-gemma-4/ (vLLM
// 0.19.0, V1; A100 80GB: 0.65 x 40 GiB would not hold the weights):
//   vllm serve openai/gpt-oss-20b --port 10000 --max-model-len 131072
//       --gpu-memory-utilization 0.65 --trust-remote-code
//   version 0.19.0
//   Model loading took 13.72 GiB memory and 62.336108 seconds
//   Available KV cache memory: 36.56 GiB
// Other flags default: vLLM's >= 70 GiB rule excludes the A100, so 2,048
// batched tokens and 256 sequences. The "GPU KV cache size" line is not
// in the stored copy of the page, so the check is on the KV memory.
ServerSpec GptOss20bOnA100() {
  ServerSpec s;
  s.device = "a100-80gb";
  s.model = ModelConfig("gpt-oss-20b");
  s.max_model_len = 131072;
  s.gpu_memory_utilization = 0.65;
  return s;
}

// With the logged weights the KV memory is 36.44 GiB, -0.34% (usable memory
// 79.15 GiB, the A100 80GB's CUDA-reported total; before it 79.87 and
// 36.90 GiB, +0.93%; non-torch and activation 1.29 GiB estimated).
TEST(PublishedKvTest, GptOss20bA100LoggedWeightsGiveTheLoggedKvMemory) {
  ServerSpec s = GptOss20bOnA100();
  s.measured_weights_gib = 13.72;
  auto d = BuildDeployment(s);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->scheduler.max_num_batched_tokens, 2048);
  EXPECT_NEAR(d->memory.kv_cache_gib, 36.56, 0.03 * 36.56);
}

// The checkpoint's quantization_config (mxfp4) selects the mxfp4 format:
// experts at 4.25 bits (4-bit values + one e8m0 byte per 32) with bf16
// biases, padded as the A100's Marlin MoE kernel needs (intermediate 2,880
// -> 2,944, hidden 2,880 -> 3,072), the rest bf16. By hand: experts 24 x 32
// x [2 x 2944 x (1536 + 96 + 2) + 3072 x (1472 + 92 + 2)] = 11,083,579,392
// B; attention 24 x 2880 x (4096 + 512 + 512 + 4096) x 2 B = 1,274,019,840
// B; untied embedding and LM head 2 x 201,088 x 2880 x 2 B = 2,316,533,760
// B; router 24 x 2880 x 32 x 2 B: 14.68e9 B = 13.67 GiB against the logged
// 13.72 (before the mxfp4 format: 38.94 GiB at bf16, 2.8x; KV from the
// flags alone 11.68 GiB, -68%).
TEST(PublishedKvTest, GptOss20bMxfp4WeightsAndKvFromFlagsAlone) {
  auto d = BuildDeployment(GptOss20bOnA100());
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->format.id, "mxfp4");
  EXPECT_EQ(d->format.kernel, "marlin");
  const double hand =
      (11083579392.0 + 1274019840.0 + 2316533760.0 + 24 * 2880 * 32 * 2.0) / kBytesPerGib;
  EXPECT_NEAR(d->memory.weights_gib, hand, 0.002 * hand);
  EXPECT_NEAR(d->memory.weights_gib, 13.72, 0.01 * 13.72);
  EXPECT_NEAR(d->memory.kv_cache_gib, 36.56, 0.03 * 36.56);
}

// The checkpoint's format is what vLLM loads: on a T4 (compute capability
// 7.5, below Mxfp4Config's 8.0) gpt-oss is refused naming the device and
// its formats, and an explicit format other than the checkpoint's is
// refused as vLLM refuses it.
TEST(PublishedKvTest, GptOss20bCheckpointFormatIsCheckedAgainstDeviceAndFlag) {
  ServerSpec t4 = GptOss20bOnA100();
  t4.device = "t4";
  t4.max_model_len = 4096;
  auto on_t4 = BuildDeployment(t4);
  ASSERT_FALSE(on_t4.ok());
  EXPECT_THAT(std::string(on_t4.status().message()),
              ::testing::HasSubstr("--quantization: mxfp4 is not supported on t4"));
  ServerSpec fp8 = GptOss20bOnA100();
  fp8.device = "h100-sxm";
  fp8.quantization = "fp8";
  auto mismatch = BuildDeployment(fp8);
  ASSERT_FALSE(mismatch.ok());
  EXPECT_THAT(std::string(mismatch.status().message()),
              ::testing::HasSubstr("does not match the checkpoint's format mxfp4"));
}

// A checkpoint in a format servesim does not model by name (GPTQ, AWQ) was
// loaded as 16-bit weights: --quantization none (the default) is now an
// error naming the method and the formats to choose from, and the format
// given is used.
TEST(PublishedKvTest, UnmodelledCheckpointFormatNeedsAnExplicitQuantization) {
  std::ifstream in(ModelConfig("meta-llama-3-8b"));
  std::stringstream text;
  text << in.rdbuf();
  std::string json = text.str();
  json.insert(json.find('{') + 1,
              R"("quantization_config": {"quant_method": "gptq", "bits": 4},)");
  const std::string dir = ::testing::TempDir() + "/gptq-llama";
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/config.json", std::ios::binary | std::ios::trunc) << json;
  ServerSpec s;
  s.device = "l4";
  s.model = dir + "/config.json";
  s.max_model_len = 4096;
  auto none = BuildDeployment(s);
  ASSERT_FALSE(none.ok());
  EXPECT_THAT(std::string(none.status().message()),
              ::testing::HasSubstr("quant_method is 'gptq'"));
  EXPECT_THAT(std::string(none.status().message()),
              ::testing::HasSubstr("e.g. w4a16 for 4-bit GPTQ or AWQ weights"));
  s.quantization = "w4a16";
  auto w4 = BuildDeployment(s);
  ASSERT_TRUE(w4.ok()) << w4.status();
  EXPECT_LT(w4->memory.weights_gib, 8.0);  // 4-bit: about 5 GiB, not 15 GiB
}

// A toy model on a large device asked for more KV blocks than the simulator
// tracks: `memory` answered, `simulate` failed naming KvCacheSpec; both now
// say what to change.
TEST(PublishedKvTest, AToyModelWithMoreBlocksThanTrackedIsNamed) {
  const std::string dir = ::testing::TempDir() + "/toy-llama";
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/config.json", std::ios::binary | std::ios::trunc)
      << R"({"model_type": "llama", "vocab_size": 1, "hidden_size": 1,
             "intermediate_size": 1, "num_hidden_layers": 1, "num_attention_heads": 1,
             "num_key_value_heads": 1, "max_position_embeddings": 2048})";
  ServerSpec s;
  s.device = "h100-sxm";
  s.model = dir + "/config.json";
  auto d = BuildDeployment(s);
  ASSERT_FALSE(d.ok());
  EXPECT_THAT(std::string(d.status().message()),
              ::testing::HasSubstr("more than the 2^30 the simulator tracks"));
}

// --- DeepSeek-V2-Lite: multi-head latent attention ------------------------
// data/models/deepseek-v2-lite/config.json: 27 layers, hidden 2048, 16
// heads, kv_lora_rank 512, qk_rope_head_dim 64, qk_nope_head_dim 128,
// v_head_dim 128, q_lora_rank null, 64 routed experts of 1408 (top 6) + 2
// shared, first_k_dense_replace 1 (layer 0: dense MLP of 10,944), vocab
// 102,400 untied. By hand: KV per token per layer (512 + 64) x 2 B =
// 1,152 B, x 27 = 31,104 B (MHA with 16 heads of 192/128 would be 16 x
// (192 + 128) x 2 B = 10,240 B per layer); parameters: embedding + LM head
// 2 x 102,400 x 2048 = 419,430,400; attention per layer q_proj 2048 x 16 x
// 192 + kv_a 2048 x 576 + kv_b 512 x 16 x 256 + o 16 x 128 x 2048 =
// 13,762,560, x 27 = 371,589,120; layer 0 MLP 3 x 2048 x 10,944 =
// 67,239,936; 26 MoE layers x (shared 3 x 2048 x 2816 + experts 64 x 3 x
// 2048 x 1408 + router 2048 x 64) = 14,848,098,304: 15,706,357,760 (the
// model card's 15.7B).
ServerSpec DeepSeekV2Lite() {
  ServerSpec s;
  s.device = "h100-sxm";
  s.model = ModelConfig("deepseek-v2-lite");
  s.max_model_len = 32768;
  return s;
}

TEST(PublishedKvTest, DeepSeekV2LiteMlaKvLayoutAndWeightsByHand) {
  auto d = BuildDeployment(DeepSeekV2Lite());
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(KvBytesPerToken(d->model, 2), 31104);
  EXPECT_EQ(d->memory.kv_block_bytes, int64_t{16} * 31104);
  EXPECT_TRUE(d->model.layers[0].mla);
  EXPECT_FALSE(d->model.layers[0].moe);
  EXPECT_TRUE(d->model.layers[1].moe);
  EXPECT_DOUBLE_EQ(CountParams(d->model).Total(), 15706357760.0);
  EXPECT_NEAR(d->memory.weights_gib, 15706357760.0 * 2 / kBytesPerGib, 1e-9);
}

// The latent is one KV "head" replicated on every TP rank: at TP2 each rank
// holds the whole 31,104 B per token (GQA would halve it), while q_proj,
// kv_b and o split by heads and kv_a stays whole.
TEST(PublishedKvTest, DeepSeekV2LiteMlaLatentIsReplicatedAcrossTpRanks) {
  ServerSpec s = DeepSeekV2Lite();
  s.tensor_parallel_size = 2;
  auto d = BuildDeployment(s);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->memory.kv_block_bytes, int64_t{16} * 31104);
  auto tp1 = BuildDeployment(DeepSeekV2Lite());
  ASSERT_TRUE(tp1.ok());
  // Attention per rank: q_proj 2048 x 8 x 192 + kv_a 2048 x 576 + kv_b 512
  // x 8 x 256 + o 8 x 128 x 2048 = 7,471,104 per layer.
  const ModelArch rank = TensorParallelRank(d->model, 2);
  EXPECT_DOUBLE_EQ(CountParams(rank).attention, 27 * 7471104.0);
}

// DeepSeek-V3 (data/models/deepseek-v3/config.json): 61 layers, hidden
// 7168, 128 heads, q_lora_rank 1536, kv_lora_rank 512, 256 routed experts
// of 2048 (top 8) + 1 shared, first 3 layers dense (18,432), vocab 129,280
// untied, an fp8 checkpoint. By hand: KV 61 x 1,152 B = 70,272 B per token
// on every TP rank; parameters: embedding + LM head 1,853,358,080,
// attention 61 x (7168 x 1536 + 1536 x 128 x 192 + 7168 x 576 + 512 x 128
// x 256 + 128 x 128 x 7168) = 11,413,422,080, dense MLPs 3 x 3 x 7168 x
// 18,432 = 1,189,085,184, 58 MoE layers x (257 x 3 x 7168 x 2048 + 7168 x
// 256) = 656,569,532,416: 671,025,397,760, the "671B of the Main Model
// weights" of DeepSeek's model card (the 14B MTP module not loaded).
TEST(PublishedKvTest, DeepSeekV3MlaImportByHand) {
  ServerSpec s;
  s.device = "h100-sxm";
  s.model = ModelConfig("deepseek-v3");
  s.tensor_parallel_size = 8;
  s.max_model_len = 16384;
  auto d = BuildDeployment(s);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->format.id, "fp8");  // the checkpoint's quantization_config
  EXPECT_DOUBLE_EQ(CountParams(d->model).Total(), 671025397760.0);
  EXPECT_EQ(KvBytesPerToken(d->model, 2), 70272);
  EXPECT_EQ(d->memory.kv_block_bytes, int64_t{16} * 70272);  // TP8: replicated
  EXPECT_FALSE(d->model.layers[2].moe);
  EXPECT_TRUE(d->model.layers[3].moe);
}

// Source: vllm-project/vllm issue #15871 ("CPU offload not working for
// DeepSeek-V2-Lite-Chat"), ymcki, 2025-04-02 (vLLM V1 0.8.3.dev,
// max_model_len 32,768, 2 x 22 GiB GPUs):
//   ValueError: To serve at least one request with the models's max seq
//   len (32768), (0.95 GiB KV cache is needed, ...
// vLLM's figure is ceil(32768 / 16) blocks x the page of all 27 layers;
// the poster notes it is "exactly the theoretical KV cache needed for
// MLA". servesim: 2,048 blocks x 497,664 B = 0.949 GiB. The rest of that
// log (CPU offload of 13 GB, two GPUs) is outside the planner.
TEST(PublishedKvTest, DeepSeekV2LiteMaxLenKvNeedMatchesTheVllmError) {
  auto d = BuildDeployment(DeepSeekV2Lite());
  ASSERT_TRUE(d.ok()) << d.status();
  const double need_gib = static_cast<double>(CeilDiv(int64_t{32768}, int64_t{16}) *
                                              d->memory.kv_block_bytes) /
                          kBytesPerGib;
  EXPECT_NEAR(need_gib, 0.95, 0.005);
}

// Source: vllm-project/vllm pull request #20665 ("Correct PPMissingLayer
// handling in Deepseek-V2-Lite PP deployment"), eicherseiji, 2025-07-09
// (V1; 4 x L4, TP2 x PP2: the fused-MoE config it looks for is E=64,N=704,
// 1408 / 2 per rank; max_model_len 1,024):
//   rank 0, 1: Available KV cache memory: 12.13 GiB
//   rank 2, 3: Available KV cache memory: 11.33 GiB
//   GPU KV cache size: 807,792 tokens
//   Maximum concurrency for 1,024 tokens per request: 788.86x
// servesim's pipeline split (hwmodels/parallelism.h PipelineStageLayers,
// vLLM's get_pp_indices: 27 layers -> 14 + 13, the extra layer on the
// first stage) and per-stage blocks: stage 0 holds 14 latents of 1,152 B
// per token, the same on both TP ranks: a 16-token block is 258,048 B;
// 12.13 GiB is 50,473 blocks = 807,568 tokens (stage 1: 11.33 GiB /
// 239,616 B = 50,770 blocks, more, so stage 0 sets the pool). Logged
// 807,792 (-0.03%, inside the 0.005 GiB rounding of the logged line: +-21
// blocks). Caching K and V of 8 heads per rank (192 + 128 values) instead
// would be 5,120 B per layer: 4.4x fewer tokens.
TEST(PublishedKvTest, DeepSeekV2LitePipelineStageKvFromTheLoggedMemory) {
  ServerSpec s = DeepSeekV2Lite();
  s.device = "l4";
  s.tensor_parallel_size = 2;
  s.pipeline_parallel_size = 2;
  s.max_model_len = 1024;
  auto d = BuildDeployment(s);
  ASSERT_TRUE(d.ok()) << d.status();
  ASSERT_EQ(d->stage_memory.size(), 2u);
  EXPECT_EQ(d->stage_layers[0], (std::pair<int32_t, int32_t>{0, 14}));
  EXPECT_EQ(d->stage_layers[1], (std::pair<int32_t, int32_t>{14, 27}));
  auto stage_blocks = [&](int stage, double kv_gib) {
    return static_cast<int64_t>(
        kv_gib * kBytesPerGib /
        static_cast<double>(d->stage_memory[stage].kv_block_bytes));
  };
  const int64_t blocks0 = stage_blocks(0, 12.13);
  const int64_t blocks1 = stage_blocks(1, 11.33);
  EXPECT_EQ(blocks0, 50473);
  EXPECT_EQ(blocks1, 50770);
  const int64_t tokens = std::min(blocks0, blocks1) * 16;
  EXPECT_NEAR(static_cast<double>(tokens), 807792.0, 0.01 * 807792.0);
}

}  // namespace
}  // namespace servesim
