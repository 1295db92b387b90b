// Memory plans checked against vLLM KV-cache figures published outside the
// write-ups (issue 15): each test quotes its source and log lines, runs the
// planner with the logged settings on the shipped datasheet device file and
// the model's public config.json (data/models/, sources in data/README.md),
// and compares the pieces the log gives.
//
// What servesim claims for logged KV capacities (docs/validation.md and
// memory_planner_test.cc): from the logged KV memory the token count is
// within 1%; from the server flags alone (estimated weights, non-torch
// memory and activation peak) within 3% on the calibrated devices. These
// pairs are on uncalibrated devices (H100 SXM, A100 80GB: datasheet
// usable memory, non-torch memory and activation factors by rule), so a
// miss of the 3% bound is a finding, kept here as the measured range with
// its cause, not a widened tolerance.
#include <cmath>
#include <string>
#include <tuple>
#include <utility>

#include "gtest/gtest.h"
#include "hwmodels/deployment.h"
#include "hwmodels/memory_planner.h"

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

// From the server flags alone the planner estimates usable memory (79.87
// GiB by the HBM-share rule against the logged 79.22), non-torch memory
// (0.42 GiB, the mean of the calibrated NVIDIA devices, against 1.79 at
// TP1 and 3.58 at TP2: NCCL and custom all-reduce buffers grow with TP and
// the planner has no TP term) and the activation peak (3.10 / 2.18 GiB from
// the V1-fitted factor against V0's logged 1.26). Measured: TP1 437,456
// tokens (+0.21%: the three errors cancel, +0.59 - (-1.37) + 1.84 GiB);
// TP2 1,012,576 tokens (+4.80%: misses the 3% bound by the non-torch term).
TEST(PublishedKvTest, Llama3On8bH100FromFlagsAlone) {
  auto tp1 = BuildDeployment(Llama3On(1));
  ASSERT_TRUE(tp1.ok()) << tp1.status();
  EXPECT_NEAR(static_cast<double>(tp1->memory.kv_cache_tokens), kLlama3Tp1Tokens,
              0.03 * kLlama3Tp1Tokens);
  EXPECT_NEAR(tp1->memory.kv_cache_gib, 53.29, 0.03 * 53.29);
  // Known gap (TP2): over by 3% to 6%, the untracked TP non-torch memory.
  auto tp2 = BuildDeployment(Llama3On(2));
  ASSERT_TRUE(tp2.ok()) << tp2.status();
  const double e2 = RelErr(static_cast<double>(tp2->memory.kv_cache_tokens),
                           static_cast<double>(kLlama3Tp2Tokens));
  EXPECT_GT(e2, 0.03);
  EXPECT_LT(e2, 0.06);
  EXPECT_LT(tp2->memory.non_torch_gib, 3.58 - 2.0);
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
// gives none), non-torch 0.42, activation 2.40 -> KV 13.90 GiB, 310,192
// tokens: +73%, a large miss. The 5.8 GiB of KV memory the planner finds
// and vLLM did not is non-KV memory at TP4 that the planner does not
// model (TP2 Llama above: non-torch 3.58 GiB logged, 2x TP1; the fused-MoE
// fp8 workspace in the profiling peak) plus +0.59 GiB of usable memory.
// Which of them, the log does not say. Known gap: +60% to +90%.
TEST(PublishedKvTest, Qwen3MoeTp4FromFlagsAloneIsAKnownGap) {
  auto d = BuildDeployment(Qwen3MoeOn4xH100());
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->scheduler.max_num_batched_tokens, 8192);
  EXPECT_EQ(d->scheduler.max_num_seqs, 1024);
  const double e = RelErr(static_cast<double>(d->memory.kv_cache_tokens),
                          static_cast<double>(kQwen3Tokens));
  EXPECT_GT(e, 0.60);
  EXPECT_LT(e, 0.90);
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

// With the logged weights the KV memory is 36.90 GiB, +0.93% (usable
// memory +0.42 GiB at 0.65, non-torch and activation 1.29 GiB estimated).
TEST(PublishedKvTest, GptOss20bA100LoggedWeightsGiveTheLoggedKvMemory) {
  ServerSpec s = GptOss20bOnA100();
  s.measured_weights_gib = 13.72;
  auto d = BuildDeployment(s);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->scheduler.max_num_batched_tokens, 2048);
  EXPECT_NEAR(d->memory.kv_cache_gib, 36.56, 0.03 * 36.56);
}

// Known gap: the HF import ignores quantization_config (mxfp4 experts) and
// servesim has no mxfp4 weight format, so the weights are estimated at
// bf16: 38.94 GiB against the logged 13.72 (2.8x), and the KV memory from
// the flags alone is 11.68 GiB (-68%).
TEST(PublishedKvTest, GptOss20bMxfp4WeightsAreAKnownGap) {
  auto d = BuildDeployment(GptOss20bOnA100());
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_GT(d->memory.weights_gib / 13.72, 2.5);
  EXPECT_LT(d->memory.kv_cache_gib, 0.5 * 36.56);
}

}  // namespace
}  // namespace servesim
