#include "hwmodels/parallelism.h"

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "hwmodels/catalog.h"
#include "hwmodels/deployment.h"
#include "hwmodels/memory_planner.h"
#include "hwmodels/step_model.h"

namespace servesim {
namespace {

ModelArch Model(const std::string& id) {
  auto desc = FindModel(id);
  EXPECT_TRUE(desc.ok()) << desc.status();
  auto m = ExpandModelArch(*desc);
  EXPECT_TRUE(m.ok()) << m.status();
  return *m;
}

double RankWeightBytes(const ModelArch& m, int32_t tp) {
  auto f = ResolveWeightFormat("none");
  EXPECT_TRUE(f.ok());
  return ComputeWeightBytes(TensorParallelRank(m, tp), *f, 2).Total();
}

// Gemma 4 31B, bf16: h 5376; 50 sliding layers (32 q heads, 16 KV heads of
// 256), 10 full (32 q heads, 4 KV heads of 512, K = V); MLP 21504; tied
// vocab 262144. Per rank at TP t, bytes = 2 x (50 x 5376 x (2 x 8192 / t +
// 2 x kv_s x 256) + 10 x 5376 x (2 x 16384 / t + kv_f x 512) + 60 x 3 x
// 5376 x 21504 / t + 262144 / t x 5376), kv = max(1, heads / t).
TEST(TensorParallelWeightsTest, DenseGemma31bBytesPerRankAtTp248) {
  const ModelArch m = Model("gemma-4-31b");
  EXPECT_EQ(RankWeightBytes(m, 1), 61392027648.0);
  EXPECT_EQ(RankWeightBytes(m, 2), 30696013824.0);
  EXPECT_EQ(RankWeightBytes(m, 4), 15348006912.0);
  // TP 8 > 4 full-attention KV heads: each is held twice, so the rank holds
  // more than 1/8 of the whole.
  EXPECT_EQ(RankWeightBytes(m, 8), 7701528576.0);
  EXPECT_GT(RankWeightBytes(m, 8), RankWeightBytes(m, 1) / 8);
}

// Gemma 4 26B A4B, bf16: h 2816; 25 sliding (16 q, 8 KV heads of 256), 5
// full (16 q, 2 KV of 512, K = V); dense branch 2112; 128 experts of 704
// (intermediate split by TP, no expert parallelism); router 2816 x 128
// replicated; tied vocab 262144.
TEST(TensorParallelWeightsTest, MoeGemma26bA4bBytesPerRankAtTp248) {
  const ModelArch m = Model("gemma-4-26b-a4b");
  EXPECT_EQ(RankWeightBytes(m, 1), 50464882688.0);
  EXPECT_EQ(RankWeightBytes(m, 2), 25243254784.0);
  EXPECT_EQ(RankWeightBytes(m, 4), 12639649792.0);
  EXPECT_EQ(RankWeightBytes(m, 8), 6337847296.0);
}

// Expert parallelism, 26B A4B bf16: the 30 layers' 128 experts of 3 x 2816
// x 704 = 5,947,392 params hold 30 x 128 x 5,947,392 x 2 = 45,675,970,560 B;
// everything else is 50,464,882,688 - that = 4,788,912,128 B. A rank of EP
// e (attention whole, as in DP attention) holds 128 / e whole experts:
// EP 2: 4,788,912,128 + 22,837,985,280; EP 4: + 11,418,992,640; EP 8: +
// 5,709,496,320.
TEST(ExpertParallelWeightsTest, Gemma26bA4bWholeExpertsPerRankAtEp248) {
  const ModelArch m = Model("gemma-4-26b-a4b");
  auto f = ResolveWeightFormat("none");
  ASSERT_TRUE(f.ok());
  auto bytes = [&](int32_t tp, int32_t ep) {
    return ComputeWeightBytes(TensorParallelRank(m, tp, ep), *f, 2).Total();
  };
  EXPECT_EQ(bytes(1, 2), 27626897408.0);
  EXPECT_EQ(bytes(1, 4), 16207904768.0);
  EXPECT_EQ(bytes(1, 8), 10498408448.0);
  const ModelArch r4 = TensorParallelRank(m, 1, 4);
  EXPECT_EQ(r4.experts_per_rank, 32);
  EXPECT_EQ(r4.expert_intermediate_size, 704);  // whole experts, not TP slices
  EXPECT_EQ(r4.num_experts, 128);               // routing stays global
  // EP over the TP ranks (DP 1): attention split by TP, whole experts; with
  // 128 experts dividing evenly the rank holds the same bytes as a TP rank
  // holding every expert's 1/tp slice.
  for (const int32_t t : {2, 4, 8}) {
    const ModelArch r = TensorParallelRank(m, t, t);
    EXPECT_EQ(r.experts_per_rank, 128 / t);
    EXPECT_EQ(r.expert_intermediate_size, 704);
    EXPECT_EQ(bytes(t, t), RankWeightBytes(m, t)) << t;
  }
  // Uneven: linear placement gives the first 128 mod 3 = 2 ranks 43.
  EXPECT_EQ(ExpertsPerRank(128, 3), 43);
  EXPECT_EQ(ExpertsPerRank(128, 1), 128);
  EXPECT_EQ(DescribeExpertSplit(m, 1, 3),
            "128 experts -> 43 whole experts per rank (expert parallel 3); 2 ranks hold "
            "43, the others 42 (the fullest rank sets the pool)");
  EXPECT_EQ(DescribeExpertSplit(m, 4, 1),
            "128 experts, each split over TP 4 (width 704 -> 176 per rank)");
  EXPECT_EQ(DescribeExpertSplit(Model("gemma-4-31b"), 4, 4), "");
}

TEST(TensorParallelRankTest, KvHeadsReplicatedWhenTpExceedsKvHeads) {
  EXPECT_EQ(KvHeadsPerRank(16, 8), 2);
  EXPECT_EQ(KvHeadReplicas(16, 8), 1);
  EXPECT_EQ(KvHeadsPerRank(4, 4), 1);
  EXPECT_EQ(KvHeadReplicas(4, 4), 1);
  EXPECT_EQ(KvHeadsPerRank(4, 8), 1);
  EXPECT_EQ(KvHeadReplicas(4, 8), 2);
  EXPECT_EQ(KvHeadsPerRank(1, 8), 1);
  EXPECT_EQ(KvHeadReplicas(1, 8), 8);
  const ModelArch r = TensorParallelRank(Model("gemma-4-31b"), 8);
  for (const LayerArch& l : r.layers) {
    EXPECT_EQ(l.num_q_heads, 4);
    EXPECT_EQ(l.num_kv_heads, l.sliding ? 2 : 1);
  }
  EXPECT_EQ(DescribeKvHeadSplit(Model("gemma-4-31b"), 8),
            "sliding layers: 16 KV heads -> 2 per rank; full layers: 4 KV heads -> 1 "
            "per rank (each held by 2 ranks)");
}

TEST(TensorParallelRankTest, VocabPaddedTo64ThenSplit) {
  EXPECT_EQ(VocabRowsPerRank(262144, 4), 65536);
  EXPECT_EQ(VocabRowsPerRank(128256, 8), 16032);  // Llama 3: already a multiple of 64
  EXPECT_EQ(VocabRowsPerRank(100, 2), 64);        // padded to 128
}

TEST(TensorParallelRankTest, Tp1IsTheModelItself) {
  const ModelArch m = Model("gemma-4-e2b");
  const ModelArch r = TensorParallelRank(m, 1);
  EXPECT_EQ(r.vocab_rows_per_rank, 0);
  EXPECT_EQ(r.EmbeddingRows(), m.vocab_size);
  EXPECT_EQ(RankWeightBytes(m, 1),
            ComputeWeightBytes(m, *ResolveWeightFormat("none"), 2).Total());
}

// KV bytes per token per rank, 31B bf16: TP 1: 50 x 2 x 16 x 256 x 2 + 10 x
// 2 x 4 x 512 x 2 = 901,120; TP 4: 50 x 4,096 + 10 x 2,048 = 225,280 (1/4);
// TP 8: 50 x 2,048 + 10 x 2,048 = 122,880 (not 1/8 = 112,640: the full
// layers' KV heads are replicated). Pages: 16 tokens x the larger per-layer
// entry, 10 layers per group.
TEST(TensorParallelKvTest, KvCapacityPerRank) {
  const ModelArch m = Model("gemma-4-31b");
  EXPECT_EQ(KvBytesPerToken(TensorParallelRank(m, 1), 2), 901120);
  EXPECT_EQ(KvBytesPerToken(TensorParallelRank(m, 4), 2), 225280);
  EXPECT_EQ(KvBytesPerToken(TensorParallelRank(m, 8), 2), 122880);
  auto l4 = PlanKvLayout(TensorParallelRank(m, 4), 2, 16);
  ASSERT_TRUE(l4.ok());
  EXPECT_EQ(l4->page_bytes, 16 * 2 * 4 * 256 * 2);
  EXPECT_EQ(l4->layers_per_group, 10);
  EXPECT_EQ(l4->block_bytes, 655360);
  auto l8 = PlanKvLayout(TensorParallelRank(m, 8), 2, 16);
  ASSERT_TRUE(l8.ok());
  EXPECT_EQ(l8->block_bytes, 327680);

  // 10 GiB of KV per rank at TP 8: 10 x 2^30 / 327,680 = 32,768 blocks.
  ServerSpec s;
  s.device = "mi300x";
  s.model = "gemma-4-31b";
  s.max_model_len = 8192;
  s.tensor_parallel_size = 8;
  s.measured_kv_cache_gib = 10;
  auto d = BuildDeployment(s);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->memory.kv_block_bytes, 327680);
  EXPECT_EQ(d->memory.num_blocks, 32768);
  EXPECT_EQ(d->kv_cache.num_blocks, 32768);
}

TEST(TensorParallelMemoryTest, Gemma31bFitsOnFourL4ButNotOne) {
  ServerSpec s;
  s.device = "l4";
  s.model = "gemma-4-31b";
  s.max_model_len = 8192;
  auto one = BuildDeployment(s);
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_FALSE(one->memory.fits);
  s.tensor_parallel_size = 4;
  auto four = BuildDeployment(s);
  ASSERT_TRUE(four.ok()) << four.status();
  EXPECT_TRUE(four->memory.fits) << four->memory.reason;
  EXPECT_NEAR(four->memory.weights_gib, 15348006912.0 / kBytesPerGib, 1e-9);
  EXPECT_GT(four->memory.num_blocks, 0);
}

// PCIe Gen4 link: 32e9 B/s per direction, 20 us. A 2,048-token prefill's
// all-reduce of 2,048 x 5,376 x 2 B = 22,020,096 B over 4 ranks:
// 20e-6 + 2 x 3/4 x 22,020,096 / 32e9 = 1.052192e-3 s.
TEST(CollectiveCostTest, AllReduceMatchesHandCalculation) {
  CollectiveLink link;
  link.bytes_per_s = 32e9;
  link.latency_s = 20e-6;
  EXPECT_NEAR(AllReduceSeconds(22020096.0, 4, link), 1.052192e-3, 1e-12);
  EXPECT_EQ(AllReduceSeconds(22020096.0, 1, link), 0);
  // All-gather of 262,144 bf16 logits over 4 ranks: 20e-6 + 3/4 x 524,288 /
  // 32e9 = 32.288 us.
  EXPECT_NEAR(AllGatherSeconds(524288.0, 4, link), 32.288e-6, 1e-12);
}

// 31B on 4 x L4: 2 x 60 + 1 (embedding) = 121 all-reduces of hidden 5,376 x
// 2 B per token, 1 logits all-gather. step: 122 x 20 us = 2.44 ms; token:
// 121 x 10,752 B x 1.5 / 32e9 = 60,984 ns; sequence: 262,144 x 2 B x 3/4 /
// 32e9 = 12,288 ns.
TEST(CollectiveCostTest, Gemma31bTp4OnL4Coefficients) {
  auto l4 = FindDevice("l4");
  ASSERT_TRUE(l4.ok());
  auto link = TensorParallelLink(*l4);
  ASSERT_TRUE(link.ok()) << link.status();
  EXPECT_EQ(link->bytes_per_s, 32e9);
  EXPECT_EQ(link->latency_s, 20e-6);
  const TensorParallelCollectives c =
      CompileCollectives(Model("gemma-4-31b"), 4, *link, 2);
  EXPECT_EQ(c.all_reduces_per_step, 121);
  EXPECT_NEAR(c.step_ns, 2.44e6, 1e-6);
  EXPECT_NEAR(c.token_ns, 60984.0, 1e-6);
  EXPECT_NEAR(c.seq_ns, 12288.0, 1e-6);
  // MoE: one more all-reduce per layer (the routed experts): 3 x 30 + 1.
  EXPECT_EQ(
      CompileCollectives(Model("gemma-4-26b-a4b"), 4, *link, 2).all_reduces_per_step, 91);
}

// Which links a group uses. MI300X: a mesh of 7 x 128 GB/s links, one per
// peer, so a TP 2 pair has one link (64 GB/s per direction), TP 4 three, TP
// 8 all seven (448); a stage handoff one. H100 PCIe: the NVLink bridge
// joins two cards, so TP 4 crosses PCIe Gen5 (64 GB/s per direction).
// H100 SXM (NVSwitch): every group the whole 450 GB/s per direction.
TEST(CollectiveLinkTest, AGroupUsesTheLinksThatReachItsPeers) {
  auto mi = FindDevice("mi300x");
  auto pcie = FindDevice("h100-pcie");
  auto sxm = FindDevice("h100-sxm");
  ASSERT_TRUE(mi.ok() && pcie.ok() && sxm.ok());
  EXPECT_DOUBLE_EQ(TensorParallelLink(*mi, 2)->bytes_per_s, 64e9);
  EXPECT_DOUBLE_EQ(TensorParallelLink(*mi, 4)->bytes_per_s, 192e9);
  EXPECT_DOUBLE_EQ(TensorParallelLink(*mi, 8)->bytes_per_s, 448e9);
  EXPECT_DOUBLE_EQ(TensorParallelLink(*mi, 8, /*point_to_point=*/true)->bytes_per_s,
                   64e9);
  EXPECT_NE(
      TensorParallelLink(*mi, 2)->description.find("1 of its 7 links (a group of 2)"),
      std::string::npos)
      << TensorParallelLink(*mi, 2)->description;
  EXPECT_DOUBLE_EQ(TensorParallelLink(*pcie, 2)->bytes_per_s, 300e9);
  EXPECT_DOUBLE_EQ(TensorParallelLink(*pcie, 4)->bytes_per_s, 64e9);
  EXPECT_NE(
      TensorParallelLink(*pcie, 8)->description.find(
          "through the host, 6.4e+10 B/s per direction (a group over 8 devices: its "
          "device links join at most 2)"),
      std::string::npos)
      << TensorParallelLink(*pcie, 8)->description;
  // A stage handoff of a TP 1 x PP 2 replica stays on the bridge; of TP 2 x
  // PP 2 it crosses PCIe (the bridges join the TP pairs), as the DP pair of
  // a TP 2 x DP 2 server does.
  EXPECT_DOUBLE_EQ(TensorParallelLink(*pcie, 2, true, 2)->bytes_per_s, 300e9);
  EXPECT_DOUBLE_EQ(TensorParallelLink(*pcie, 2, true, 4)->bytes_per_s, 64e9);
  EXPECT_DOUBLE_EQ(TensorParallelLink(*pcie, 2, false, 4)->bytes_per_s, 64e9);
  EXPECT_DOUBLE_EQ(TensorParallelLink(*mi, 2, false, 4)->bytes_per_s, 64e9);
  for (int n : {2, 4, 8})
    EXPECT_DOUBLE_EQ(TensorParallelLink(*sxm, n)->bytes_per_s, 450e9);
  // The deployment charges the TP group's link: 12B at TP 2 on MI300X,
  // 97 all-reduces of 3,840 x 2 B x (2 x 1/2) / 64e9 per token = 11.64 us.
  ServerSpec s;
  s.device = "mi300x";
  s.model = "gemma-4-12b";
  s.max_model_len = 4096;
  s.tensor_parallel_size = 2;
  auto d = BuildDeployment(s);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_NEAR(d->collectives.token_ns,
              d->collectives.all_reduces_per_step > 0 ? 97 * 7680.0 / 64e9 * 1e9 : 0, 50)
      << d->collectives.Describe();
}

class FixedStepModel final : public StepTimeModel {
 public:
  StepCost Cost(const StepBatch&) const override { return {1000, 500000}; }
  std::string Describe() const override { return "fixed"; }
};

TEST(CollectiveCostTest, StepModelAddsCollectivesToDeviceTime) {
  TensorParallelCollectives c;
  c.tp = 4;
  c.step_ns = 2000;
  c.token_ns = 10;
  c.seq_ns = 3;
  TensorParallelStepModel m(std::make_shared<FixedStepModel>(), c);
  const std::vector<PrefillChunk> prefills = {{100, 0}, {28, 500}};
  const std::vector<int32_t> decodes = {10, 20, 30};
  StepBatch b;
  b.prefills = prefills;
  b.decode_context_lens = decodes;
  // tokens 131, sequences 5: 2000 + 1310 + 15.
  const StepCost cost = m.Cost(b);
  EXPECT_EQ(cost.host_ns, 1000);
  EXPECT_EQ(cost.device_ns, 500000 + 3325);
}

TEST(CheckParallelismTest, RefusesWhatVllmRefuses) {
  ServerSpec s;
  s.device = "l4";
  s.model = "gemma-4-31b";
  auto l4 = *FindDevice("l4");
  const ModelArch m = Model("gemma-4-31b");
  s.tensor_parallel_size = 3;
  absl::Status st = CheckParallelism(l4, m, s);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("--tensor-parallel-size: 3 does not divide the 32"),
            std::string::npos)
      << st;
  s.tensor_parallel_size = 16;
  st = CheckParallelism(l4, m, s);
  EXPECT_NE(st.message().find("exceeds the 8 l4 devices one node holds"),
            std::string::npos)
      << st;
  s.tensor_parallel_size = 2;
  EXPECT_TRUE(CheckParallelism(l4, m, s).ok());
  // Pipeline parallelism: TP x PP chips on one node, PP at most the layers.
  s.pipeline_parallel_size = 2;
  EXPECT_TRUE(CheckParallelism(l4, m, s).ok()) << CheckParallelism(l4, m, s);
  s.pipeline_parallel_size = 5;
  st = CheckParallelism(l4, m, s);
  EXPECT_NE(st.message().find("--pipeline-parallel-size: 5 x --tensor-parallel-size 2 "
                              "= 10 chips exceed the 8 l4 devices"),
            std::string::npos)
      << st;
  s.tensor_parallel_size = 1;
  s.pipeline_parallel_size = 61;
  st = CheckParallelism(l4, m, s);
  EXPECT_NE(st.message().find("--pipeline-parallel-size: 61 is out of range [1, 60]"),
            std::string::npos)
      << st;
  s.pipeline_parallel_size = 2;
  s.data_parallel_size = 2;
  st = CheckParallelism(l4, m, s);
  EXPECT_NE(st.message().find("with --data-parallel-size 2 is not modelled"),
            std::string::npos)
      << st;
  s.data_parallel_size = 1;
  st = CheckParallelism(l4, Model("gemma-4-e2b"), s);
  EXPECT_NE(st.message().find("per-layer embeddings of gemma-4-e2b is not modelled"),
            std::string::npos)
      << st;
  s.tensor_parallel_size = 2;
  // Data parallelism: DP x TP chips on one node, dense models only.
  s.pipeline_parallel_size = 1;
  s.data_parallel_size = 4;
  EXPECT_TRUE(CheckParallelism(l4, m, s).ok());  // 4 x 2 = the node's 8
  s.data_parallel_size = 5;
  st = CheckParallelism(l4, m, s);
  EXPECT_NE(st.message().find("--data-parallel-size: 5 x --tensor-parallel-size 2 = 10 "
                              "chips exceed the 8 l4 devices one node holds"),
            std::string::npos)
      << st;
  s.data_parallel_size = 2;
  st = CheckParallelism(l4, Model("gemma-4-26b-a4b"), s);
  EXPECT_NE(st.message().find("with the MoE model gemma-4-26b-a4b is modelled with "
                              "--enable-expert-parallel only"),
            std::string::npos)
      << st;
  s.enable_expert_parallel = true;  // DP attention + EP experts
  EXPECT_TRUE(CheckParallelism(l4, Model("gemma-4-26b-a4b"), s).ok());
}

// DP attention + EP experts, 26B A4B bf16, DP d (TP 1, EP d): per MoE
// layer one all-gather of the d ranks' tokens and one reduce-scatter back,
// each L + (d - 1) / d x (d x tokens) x 2816 x 2 B / B. On a 1e11 B/s link
// with 5 us latency: step 2 x 30 x 5 us = 300,000 ns; per own token 2 x 30
// x (d - 1) x 5,632 B / 1e11 B/s = 3,379.2 ns at DP 2, 10,137.6 ns at DP 4.
TEST(CollectiveCostTest, DataParallelExpertDispatchAndCombineByHand) {
  const ModelArch m = Model("gemma-4-26b-a4b");
  CollectiveLink link;
  link.bytes_per_s = 1e11;
  link.latency_s = 5e-6;
  const TensorParallelCollectives c2 = CompileCollectives(m, 1, link, 2, 2, 2);
  EXPECT_EQ(c2.dp_expert_collectives_per_step, 60);
  EXPECT_EQ(c2.all_reduces_per_step, 0);  // TP 1
  EXPECT_DOUBLE_EQ(c2.step_ns, 300000.0);
  EXPECT_DOUBLE_EQ(c2.token_ns, 3379.2);
  EXPECT_DOUBLE_EQ(c2.seq_ns, 0.0);
  EXPECT_FALSE(c2.empty());
  EXPECT_DOUBLE_EQ(CompileCollectives(m, 1, link, 2, 4, 4).token_ns, 10137.6);
  // TP 2 x DP 2: the TP collectives plus the DP ones.
  const TensorParallelCollectives t2 = CompileCollectives(m, 2, link, 2);
  const TensorParallelCollectives t2d2 = CompileCollectives(m, 2, link, 2, 2, 4);
  EXPECT_DOUBLE_EQ(t2d2.step_ns, t2.step_ns + 300000.0);
  EXPECT_DOUBLE_EQ(t2d2.token_ns, t2.token_ns + 3379.2);
  EXPECT_EQ(t2d2.all_reduces_per_step, t2.all_reduces_per_step);
  // Dense models and EP 1 have no DP expert collectives.
  EXPECT_TRUE(CompileCollectives(Model("gemma-4-31b"), 1, link, 2, 2, 1).empty());
  EXPECT_TRUE(CompileCollectives(m, 1, link, 2, 2, 1).empty());
  // The rank's experts serve both DP ranks' tokens (balanced).
  const ModelArch r = TensorParallelRank(m, 1, 2, 2);
  EXPECT_EQ(r.experts_per_rank, 64);
  EXPECT_EQ(r.expert_token_sources, 2);
  EXPECT_EQ(TensorParallelRank(m, 2, 2, 1).expert_token_sources, 1);
}

// 26B A4B on 2 MI300X as DP 2 + EP 2: each engine's rank holds the whole
// attention and 64 whole experts (27,626,897,408 B, the EP 2 figure above).
TEST(ExpertParallelDeploymentTest, Gemma26bA4bDp2OnMi300x) {
  ServerSpec s;
  s.device = "mi300x";
  s.model = "gemma-4-26b-a4b";
  s.max_model_len = 8192;
  s.data_parallel_size = 2;
  s.enable_expert_parallel = true;
  auto d = BuildDeployment(s);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->expert_parallel_size, 2);
  EXPECT_DOUBLE_EQ(d->memory.weights_gib, 27626897408.0 / (1024.0 * 1024 * 1024));
  EXPECT_EQ(d->collectives.dp_expert_collectives_per_step, 60);
  EXPECT_NE(d->step_model->Describe().find("TP 1, DP 2 collectives: 0 all-reduces + 60 "
                                           "DP expert all-gathers / reduce-scatters"),
            std::string::npos)
      << d->step_model->Describe();
}

// A rank reads at most the experts it holds: when a step hits every
// expert, its expert weight bytes are its local experts' (the experts hit
// already count every DP rank's tokens; a second factor of DP made a DP 8
// rank read 8x the 5.7 GB of experts it holds).
TEST(ExpertParallelDeploymentTest, ARankReadsNoMoreExpertBytesThanItHolds) {
  ServerSpec s;
  s.device = "mi300x";
  s.model = "gemma-4-26b-a4b";
  s.max_model_len = 8192;
  s.enable_expert_parallel = true;
  auto expert_bytes_all_hit = [](const Deployment& d) {
    double per_expert_hit = 0;
    for (const Operator& op : d.graph->ops())
      per_expert_hit += op.bytes[kAggExpertsTouched];
    return per_expert_hit * d.graph->num_experts();
  };
  s.tensor_parallel_size = 8;
  auto tp8 = BuildDeployment(s);
  ASSERT_TRUE(tp8.ok()) << tp8.status();
  s.tensor_parallel_size = 1;
  s.data_parallel_size = 8;
  auto dp8 = BuildDeployment(s);
  ASSERT_TRUE(dp8.ok()) << dp8.status();
  // Both ranks hold 16 of the 128 experts of each layer.
  EXPECT_EQ(tp8->expert_parallel_size, 8);
  EXPECT_EQ(dp8->expert_parallel_size, 8);
  EXPECT_GT(expert_bytes_all_hit(*dp8), 0);
  EXPECT_DOUBLE_EQ(expert_bytes_all_hit(*dp8), expert_bytes_all_hit(*tp8));
  EXPECT_LT(expert_bytes_all_hit(*dp8), dp8->memory.weights_gib * 1024.0 * 1024 * 1024);
}

TEST(CheckParallelismTest, ExpertParallelGroupIsTpTimesDpAndAtMostTheExperts) {
  auto mi = *FindDevice("mi300x");
  ModelArch m = Model("gemma-4-26b-a4b");
  ServerSpec s;
  s.tensor_parallel_size = 4;
  EXPECT_EQ(ExpertParallelSize(m, s), 1);  // flag not given
  s.enable_expert_parallel = true;
  EXPECT_EQ(ExpertParallelSize(m, s), 4);
  s.data_parallel_size = 2;
  EXPECT_EQ(ExpertParallelSize(m, s), 8);
  s.data_parallel_size = 1;
  EXPECT_EQ(ExpertParallelSize(Model("gemma-4-31b"), s), 1);  // dense: no experts
  // Whole experts: their width need not divide by TP with EP.
  m.expert_intermediate_size = 702;
  EXPECT_TRUE(CheckParallelism(mi, m, s).ok());
  s.enable_expert_parallel = false;
  EXPECT_NE(CheckParallelism(mi, m, s).message().find("does not divide the expert width"),
            std::string::npos);
  // More ranks than experts: some rank would hold none.
  s.enable_expert_parallel = true;
  s.tensor_parallel_size = 8;
  m.expert_intermediate_size = 704;
  m.num_experts = 4;
  m.experts_top_k = 2;
  const absl::Status st = CheckParallelism(mi, m, s);
  EXPECT_NE(st.message().find("--enable-expert-parallel: the expert-parallel group of 8 "
                              "ranks (--tensor-parallel-size x --data-parallel-size) "
                              "exceeds the 4 experts"),
            std::string::npos)
      << st;
}

// EP over the 4 TP ranks of an MI300X node, DP 1: each rank routes every
// token (replicated) to its 32 local experts, and the combine is the TP
// all-reduce it already had. Under uniform routing a rank runs 1/4 of the
// top-k rows at full width: the same FLOPs and touched weight bytes as
// 1/4-width slices of every expert, but only a quarter of the rows' hidden
// activations (TP: every row, each rank), so the step is a little shorter
// than TP's (under 1% here); the fused-MoE scratch (top_k x whole width per
// token) is larger, so KV is not more.
TEST(ExpertParallelDeploymentTest, Gemma26bA4bOnMi300xTp4) {
  ServerSpec s;
  s.device = "mi300x";
  s.model = "gemma-4-26b-a4b";
  s.max_model_len = 8192;
  s.tensor_parallel_size = 4;
  auto tp = BuildDeployment(s);
  ASSERT_TRUE(tp.ok()) << tp.status();
  s.enable_expert_parallel = true;
  auto ep = BuildDeployment(s);
  ASSERT_TRUE(ep.ok()) << ep.status();
  EXPECT_EQ(tp->expert_parallel_size, 1);
  EXPECT_EQ(ep->expert_parallel_size, 4);
  EXPECT_EQ(ep->memory.weights_gib, tp->memory.weights_gib);
  EXPECT_GE(ep->memory.activation_gib, tp->memory.activation_gib);
  EXPECT_LE(ep->memory.num_blocks, tp->memory.num_blocks);
  EXPECT_EQ(ep->collectives.all_reduces_per_step, tp->collectives.all_reduces_per_step);
  EXPECT_NE(ep->provenance.find("expert parallel size 4 (128 experts -> 32 whole"),
            std::string::npos);
  const std::vector<int32_t> decodes(64, 2048);
  StepBatch b;
  b.decode_context_lens = decodes;
  const StepCost ct = tp->step_model->Cost(b);
  const StepCost ce = ep->step_model->Cost(b);
  EXPECT_LT(ce.device_ns, ct.device_ns);
  EXPECT_GT(static_cast<double>(ce.device_ns), 0.99 * static_cast<double>(ct.device_ns));
}

TEST(TensorParallelDeploymentTest, Tp1StepModelHasNoCollectives) {
  ServerSpec s;
  s.device = "l4";
  s.model = "gemma-4-12b";
  s.quantization = "w4a16-emb4";
  s.max_model_len = 8192;
  auto d1 = BuildDeployment(s);
  ASSERT_TRUE(d1.ok()) << d1.status();
  EXPECT_EQ(d1->step_model->Describe().find("collectives"), std::string::npos);
  s.tensor_parallel_size = 2;
  auto d2 = BuildDeployment(s);
  ASSERT_TRUE(d2.ok()) << d2.status();
  EXPECT_NE(d2->step_model->Describe().find("TP 2 collectives"), std::string::npos);
  // A decode-only step of 8 sequences: per-rank work is smaller, but the
  // collectives are added on top.
  const std::vector<int32_t> decodes(8, 1024);
  StepBatch b;
  b.decode_context_lens = decodes;
  const StepCost c1 = d1->step_model->Cost(b);
  const StepCost c2 = d2->step_model->Cost(b);
  EXPECT_LT(c2.device_ns, c1.device_ns);
  EXPECT_GT(c2.device_ns, c1.device_ns / 2);
}

// vLLM's get_pp_indices: L / PP layers a stage; the L % PP remainder
// layers one each to the stages before the last, from the second-to-last
// backwards (vLLM's docs: 61 layers at PP 4 -> 15, 15, 16, 15).
TEST(PipelineStageTest, LayersSplitAsGetPpIndices) {
  using Ranges = std::vector<std::pair<int32_t, int32_t>>;
  EXPECT_EQ(PipelineStageLayers(60, 2), (Ranges{{0, 30}, {30, 60}}));
  EXPECT_EQ(PipelineStageLayers(27, 2), (Ranges{{0, 14}, {14, 27}}));
  EXPECT_EQ(PipelineStageLayers(61, 4), (Ranges{{0, 15}, {15, 30}, {30, 46}, {46, 61}}));
  EXPECT_EQ(PipelineStageLayers(27, 4), (Ranges{{0, 7}, {7, 14}, {14, 21}, {21, 27}}));
  EXPECT_EQ(PipelineStageLayers(3, 3), (Ranges{{0, 1}, {1, 2}, {2, 3}}));
  EXPECT_EQ(PipelineStageLayers(48, 1), (Ranges{{0, 48}}));
}

// Gemma 4 31B bf16 at PP 2: stages of layers 0-29 and 30-59, each 25
// sliding + 5 full layers (one full every 6th). Per stage: 25 x 5376 x
// (2 x 8192 + 2 x 4096) + 5 x 5376 x (2 x 16384 + 2048) + 30 x 3 x 5376 x
// 21504 = 14,643,363,840 params of layers, plus the 262144 x 5376 tied
// embedding on BOTH stages (gemma4.py builds embed_tokens on every rank) =
// 16,052,649,984 params = 32,105,299,968 B. KV: the global groups are 10
// layers (50 sliding: 5 groups, 10 full: 1 group); stage 0 holds sliding
// groups 0, 1 whole and 5 of group 2, and 5 of the full group: its block
// is 10 pages of 16 x 16,384 B = 2,621,440 B, as the whole model's.
TEST(PipelineStageTest, Gemma31bPp2WeightsAndKvPerStage) {
  const ModelArch m = Model("gemma-4-31b");
  auto f = ResolveWeightFormat("none");
  ASSERT_TRUE(f.ok());
  double total = 0;
  for (int32_t st = 0; st < 2; ++st) {
    const ModelArch stage = PipelineStage(m, st, 2);
    ASSERT_EQ(stage.layers.size(), 30u);
    int sliding = 0;
    for (const LayerArch& l : stage.layers) sliding += l.sliding ? 1 : 0;
    EXPECT_EQ(sliding, 25);
    EXPECT_EQ(stage.runs_embedding, st == 0);
    EXPECT_EQ(stage.runs_lm_head, st == 1);
    EXPECT_TRUE(stage.holds_embedding);
    const double bytes = ComputeWeightBytes(stage, *f, 2).Total();
    EXPECT_EQ(bytes, 32105299968.0);
    total += bytes;
    EXPECT_EQ(PipelineStageBlockLayers(m, 10, st, 2), 10);
  }
  // A middle stage (PP 3) runs neither end but still holds Gemma 4's
  // table; another family's middle stage does not (next test).
  EXPECT_TRUE(PipelineStage(m, 1, 3).holds_embedding);
  EXPECT_EQ(ComputeWeightBytes(PipelineStage(m, 1, 3), *f, 2).embedding,
            262144.0 * 5376 * 2);
  // The stages together hold one embedding more than the whole model.
  EXPECT_EQ(total - RankWeightBytes(m, 1), 262144.0 * 5376 * 2);
  auto layout = PlanKvLayout(m, 2, 16);
  ASSERT_TRUE(layout.ok());
  EXPECT_EQ(layout->layers_per_group, 10);
  EXPECT_EQ(layout->page_bytes * PipelineStageBlockLayers(m, 10, 0, 2), 2621440);
  // At PP 4 (15 layers: stage 0 = 13 sliding + 2 full; sliding groups 0
  // whole, 1 with 3): the fullest group here is 10 layers still; at PP 6
  // (10 layers, 8 or 9 sliding) it is the most of one group in the stage.
  EXPECT_EQ(PipelineStageBlockLayers(m, 10, 0, 4), 10);
  EXPECT_LT(PipelineStageBlockLayers(m, 10, 1, 6), 10);
}

// A model of another family holds the embedding on the first stage and
// the LM head on the last (untied: a separate tensor of the same size).
TEST(PipelineStageTest, UntiedNonGemmaEmbeddingFirstLmHeadLast) {
  ModelArch m = Model("gemma-4-31b");
  m.family = "llama";
  m.tie_word_embeddings = false;
  auto f = ResolveWeightFormat("none");
  ASSERT_TRUE(f.ok());
  const WeightBytes first = ComputeWeightBytes(PipelineStage(m, 0, 3), *f, 2);
  const WeightBytes mid = ComputeWeightBytes(PipelineStage(m, 1, 3), *f, 2);
  const WeightBytes last = ComputeWeightBytes(PipelineStage(m, 2, 3), *f, 2);
  EXPECT_EQ(first.embedding, 262144.0 * 5376 * 2);
  EXPECT_EQ(first.lm_head, 0);
  EXPECT_EQ(mid.embedding + mid.lm_head, 0);
  EXPECT_EQ(last.embedding, 0);
  EXPECT_EQ(last.lm_head, 262144.0 * 5376 * 2);
  // Two tensors per token cross a stage boundary (hidden + residual).
  EXPECT_EQ(PipelineTransferBytesPerToken(m, 2), 2 * 5376 * 2);
  EXPECT_EQ(PipelineTransferBytesPerToken(Model("gemma-4-31b"), 2), 5376 * 2);
}

// The batch queue of a two-stage pipeline, by hand: stages of 3 and 5 ns,
// 1 ns a transfer. One batch alone: 3 + 1 + 5 = 9. Four batches ready at
// 0: stage 0 takes them at 0, 3, 6, 9; stage 1 (the slower) at 4, 9, 14,
// 19: they finish at 9, 14, 19, 24, one per max stage time (5), the bubble
// being the 4 ns before stage 1 first starts.
TEST(PipelineBubbleTest, TwoStagesOneBatchAndAStream) {
  EXPECT_EQ(PipelineFinishTimes({3, 5}, 1, {0}), (std::vector<double>{9}));
  EXPECT_EQ(PipelineFinishTimes({3, 5}, 1, {0, 0, 0, 0}),
            (std::vector<double>{9, 14, 19, 24}));
  // Fast second stage: stage 0 paces the stream (one per 5).
  EXPECT_EQ(PipelineFinishTimes({5, 3}, 1, {0, 0, 0}), (std::vector<double>{9, 14, 19}));
  // A batch ready late waits for nothing but itself.
  EXPECT_EQ(PipelineFinishTimes({3, 5}, 1, {0, 100}), (std::vector<double>{9, 109}));
}

// Gemma 4 31B at TP 2 x PP 2 on L4: one batch's pass (Cost) is stage 0 +
// stage 1 + one transfer; the
// transfer of 8 decode tokens over PCIe through the host (32e9 B/s, 20 us)
// is 2 x 20 us (send, then the TP all-gather) + 8 x 5376 x 2 B / 32e9 B/s
// = 40,000 + 8 x 336 ns = 42,688 ns.
TEST(PipelineStepModelTest, Gemma31bTp2Pp2OnL4IsTheSumOfStagesPlusTransfer) {
  ServerSpec s;
  s.device = "l4";
  s.model = "gemma-4-31b";
  // 14.95 GiB of weights a rank leave ~2 GiB of KV: a short context fits.
  s.max_model_len = 4096;
  s.max_num_batched_tokens = 1024;
  s.tensor_parallel_size = 2;
  s.pipeline_parallel_size = 2;
  auto d = BuildDeployment(s);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->pipeline_parallel_size, 2);
  ASSERT_EQ(d->stage_memory.size(), 2u);
  EXPECT_TRUE(d->memory.fits) << d->memory.reason;
  // A stage's 16,052,649,984 params (above) split over its 2 TP ranks
  // (layers by heads and width, 131,072 vocab rows each) at 2 B.
  EXPECT_NEAR(d->stage_memory[0].weights_gib, 16052649984.0 / kBytesPerGib, 1e-9);
  EXPECT_NEAR(d->stage_memory[1].weights_gib, 16052649984.0 / kBytesPerGib, 1e-9);
  // The sampler warm-up is on the last stage only: stage 1 has the larger
  // activation peak, so the fewer blocks and sets the pool.
  EXPECT_GT(d->stage_memory[1].activation_gib, d->stage_memory[0].activation_gib);
  EXPECT_LT(d->stage_memory[1].num_blocks, d->stage_memory[0].num_blocks);
  EXPECT_EQ(d->memory.num_blocks, d->stage_memory[1].num_blocks);
  EXPECT_EQ(d->kv_cache.num_blocks, d->stage_memory[1].num_blocks);

  const auto* pipe = dynamic_cast<const PipelineStepModel*>(d->step_model.get());
  ASSERT_NE(pipe, nullptr);
  ASSERT_EQ(pipe->num_stages(), 2);
  const std::vector<int32_t> ctx(8, 1000);
  const StepBatch batch{{}, ctx};
  EXPECT_DOUBLE_EQ(pipe->TransferNs(batch), 42688.0);
  const std::vector<StepCost> stages = pipe->StageCosts(batch);
  const StepCost whole = pipe->Cost(batch);
  EXPECT_EQ(whole.device_ns, stages[0].device_ns + stages[1].device_ns + 42688);
  EXPECT_EQ(whole.host_ns, stages[0].host_ns);
  // Each stage runs half the layers: about half of the whole pass, and
  // the first stage (no LM head) is the faster.
  EXPECT_LT(stages[0].device_ns, stages[1].device_ns);
  // What the engine's batch queue reads (sim/engine.h): the same stages,
  // the first stage's host time and one hop in whole ns.
  EXPECT_EQ(pipe->num_pipeline_stages(), 2);
  std::vector<TimeNs> stage_ns(2, -1);
  const StepTimeModel::PipelineCost pc = pipe->PipelineStageCosts(batch, stage_ns);
  EXPECT_EQ(stage_ns[0], stages[0].device_ns);
  EXPECT_EQ(stage_ns[1], stages[1].device_ns);
  EXPECT_EQ(pc.host_ns, stages[0].host_ns);
  EXPECT_EQ(pc.transfer_ns, 42688);
  // A stream of batches paces at the slower stage (+ nothing: each hop is
  // its own link); one batch alone takes the sum.
  const auto finish = PipelineFinishTimes({static_cast<double>(stages[0].device_ns),
                                           static_cast<double>(stages[1].device_ns)},
                                          42688.0, {0, 0, 0});
  EXPECT_DOUBLE_EQ(finish[0], static_cast<double>(whole.device_ns));
  EXPECT_DOUBLE_EQ(finish[2] - finish[1], static_cast<double>(stages[1].device_ns));
}

// PP 1 builds exactly the model of before: no stages, the TP step model.
TEST(PipelineStepModelTest, Pp1HasNoStages) {
  ServerSpec s;
  s.device = "l4";
  s.model = "gemma-4-12b";
  s.quantization = "w4a16";
  s.max_model_len = 8192;
  auto d = BuildDeployment(s);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->pipeline_parallel_size, 1);
  EXPECT_TRUE(d->stage_memory.empty());
  EXPECT_EQ(dynamic_cast<const PipelineStepModel*>(d->step_model.get()), nullptr);
}

}  // namespace
}  // namespace servesim
