#include "hwmodels/step_model.h"

#include <cstdint>
#include <cstdio>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "hwmodels/catalog.h"
#include "hwmodels/deployment.h"

namespace servesim {
namespace {

struct Built {
  Deployment d;
  const RooflineStepModel* model;
};

// With the priors (not the shipped calibration profile), so the checks
// below do not move when calibration/profiles/ changes.
Built Build(const std::string& device, const std::string& model, const std::string& q) {
  ServerSpec s;
  s.device = device;
  s.model = model;
  s.quantization = q;
  s.max_model_len = 8192;
  auto priors = DefaultParameters(s);
  EXPECT_TRUE(priors.ok()) << priors.status();
  auto d = BuildDeployment(s, &*priors);
  EXPECT_TRUE(d.ok()) << d.status();
  Built b{*d, dynamic_cast<const RooflineStepModel*>(d->step_model.get())};
  EXPECT_NE(b.model, nullptr);
  return b;
}

StepCost DecodeCost(const StepTimeModel& m, int n, int32_t ctx) {
  std::vector<int32_t> ctxs(n, ctx);
  return m.Cost(StepBatch{{}, ctxs});
}

const Operator* FindOp(const CompiledStepGraph& g, const std::string& prefix) {
  for (const Operator& op : g.ops())
    if (op.name.rfind(prefix, 0) == 0) return &op;
  return nullptr;
}

TEST(AggregatesTest, SlidingLayersAttendToAtMostTheWindow) {
  const std::vector<int32_t> ctx = {10, 600, 5000};
  const PrefillChunk pf[] = {{100, 0}, {256, 1000}};
  BatchAggregates a = ComputeAggregates(StepBatch{pf, ctx}, 512, 0, 0);
  EXPECT_EQ(a.v[kAggTokens], 356 + 3);
  EXPECT_EQ(a.v[kAggSeqs], 5);
  EXPECT_EQ(a.v[kAggDecCtxFull], 11 + 601 + 5001);
  EXPECT_EQ(a.v[kAggDecCtxSliding], 11 + 512 + 512);
  // Chunk 1: positions 1..100: 5050 pairs (all inside the window).
  // Chunk 2: positions 1001..1256, full: sum = 256 x 1000 + 256 x 257 / 2.
  EXPECT_EQ(a.v[kAggPrefillPairsFull], 5050 + 256.0 * 1000 + 256.0 * 257 / 2);
  EXPECT_EQ(a.v[kAggPrefillPairsSliding], 5050 + 256.0 * 512);
  EXPECT_EQ(a.v[kAggPrefillKvFull], 100 + 1256);
  EXPECT_EQ(a.v[kAggPrefillKvSliding], 100 + (512 + 256));
}

TEST(AggregatesTest, SlidingPairsStraddlingTheWindowEdge) {
  // Positions 501..520 with window 512: 501..512 sum + 8 x 512.
  const PrefillChunk pf[] = {{20, 500}};
  BatchAggregates a = ComputeAggregates(StepBatch{pf, {}}, 512, 0, 0);
  double expect = 0;
  for (int p = 501; p <= 520; ++p) expect += std::min(p, 512);
  EXPECT_EQ(a.v[kAggPrefillPairsSliding], expect);
}

TEST(AggregatesTest, ExpectedDistinctExpertsSaturate) {
  const std::vector<int32_t> one = {5};
  BatchAggregates a = ComputeAggregates(StepBatch{{}, one}, 0, 128, 8);
  // One token, 8 draws among 128: 128 (1 - (127/128)^8) ~ 7.78.
  EXPECT_NEAR(a.v[kAggExpertsTouched], 7.78, 0.01);
  std::vector<int32_t> many(4096, 5);
  a = ComputeAggregates(StepBatch{{}, many}, 0, 128, 8);
  EXPECT_NEAR(a.v[kAggExpertsTouched], 128, 1e-6);
}

TEST(OperatorCountsTest, Gemma12bLayerOperatorsMatchHandCounts) {
  Built b = Build("l4", "gemma-4-12b", "none");
  const CompiledStepGraph& g = b.model->graph();
  const double h = 3840;
  // Sliding layer QKV: q 16 x 256, k and v 8 x 256 each.
  const Operator* qkv = FindOp(g, "qkv_proj[sliding");
  ASSERT_NE(qkv, nullptr);
  EXPECT_EQ(qkv->count, 40);
  EXPECT_EQ(qkv->flops[kAggTokens], 2 * h * (4096 + 2 * 2048));
  EXPECT_EQ(qkv->bytes[kAggOne], 2 * h * (4096 + 2 * 2048));
  // Full layer: q 16 x 512, one shared K=V projection of 1 x 512.
  const Operator* qkv_full = FindOp(g, "qkv_proj[full");
  ASSERT_NE(qkv_full, nullptr);
  EXPECT_EQ(qkv_full->count, 8);
  EXPECT_EQ(qkv_full->flops[kAggTokens], 2 * h * (8192 + 512));
  // Decode attention, sliding: 4 x 16 heads x 256 FLOPs per attended
  // token; K and V of 8 heads x 256 x 2 B read per attended token.
  const Operator* ad = FindOp(g, "attention_decode[sliding");
  ASSERT_NE(ad, nullptr);
  EXPECT_EQ(ad->flops[kAggDecCtxSliding], 4 * 16 * 256);
  EXPECT_EQ(ad->bytes[kAggDecCtxSliding], 2 * 8 * 256 * 2);
  const Operator* ad_full = FindOp(g, "attention_decode[full");
  ASSERT_NE(ad_full, nullptr);
  EXPECT_EQ(ad_full->flops[kAggDecCtxFull], 4 * 16 * 512);
  EXPECT_EQ(ad_full->bytes[kAggDecCtxFull], 2 * 1 * 512 * 2);
  // FFN: gate, up, down of 3840 x 15360.
  const Operator* ffn = FindOp(g, "ffn");
  ASSERT_NE(ffn, nullptr);
  EXPECT_EQ(ffn->count, 48);
  EXPECT_EQ(ffn->flops[kAggTokens], 2 * 3 * h * 15360);
  EXPECT_EQ(ffn->bytes[kAggOne], 2 * 3 * h * 15360);
  // LM head over sampled sequences, 16-bit tied embedding.
  const Operator* head = FindOp(g, "lm_head");
  ASSERT_NE(head, nullptr);
  EXPECT_EQ(head->flops[kAggSeqs], 2 * h * 262144);
  EXPECT_EQ(head->bytes[kAggOne], 2 * h * 262144);
  // embedding, 5 operators per layer, lm_head, sampling.
  EXPECT_EQ(g.num_graph_vertices(), 3 + 48 * 5);
}

TEST(OperatorCountsTest, MoeExpertsReadOnlyTouchedExperts) {
  Built b = Build("mi300x", "gemma-4-26b-a4b", "none");
  const Operator* e = FindOp(b.model->graph(), "experts");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->count, 30);
  EXPECT_EQ(e->bytes[kAggExpertsTouched], 2.0 * 3 * 2816 * 704);
  EXPECT_EQ(e->flops[kAggTokens], 2.0 * (8 * 3 * 2816 * 704 + 2816 * 128));
}

// mxfp4 experts stream what the memory plan holds: 4-bit values, one scale
// byte per 32 inputs, a bf16 bias per row (Hopper: no padding at these
// sizes). They streamed as bf16, so mxfp4 decoded as slowly as none.
TEST(OperatorCountsTest, Mxfp4ExpertsStreamTheirFourBitBytes) {
  Built b = Build("h100-sxm", "gemma-4-26b-a4b", "mxfp4");
  const Operator* e = FindOp(b.model->graph(), "experts");
  ASSERT_NE(e, nullptr);
  EXPECT_TRUE(e->quantized);
  const double w13 = 2.0 * 704 * (2816 / 2.0 + 2816 / 32 + 2);
  const double w2 = 2816.0 * (704 / 2.0 + 704 / 32 + 2);
  EXPECT_DOUBLE_EQ(e->bytes[kAggExpertsTouched], w13 + w2);
  Built dense = Build("h100-sxm", "gemma-4-26b-a4b", "none");
  EXPECT_LT(DecodeCost(*b.model, 32, 1024).device_ns,
            0.7 * DecodeCost(*dense.model, 32, 1024).device_ns);
}

TEST(OperatorCountsTest, W4a16WeightsStreamHalfBytesPlusChannelScales) {
  Built b = Build("t4", "gemma-4-12b", "w4a16-emb4");
  const Operator* ffn = FindOp(b.model->graph(), "ffn");
  ASSERT_NE(ffn, nullptr);
  EXPECT_TRUE(ffn->quantized);
  const double params = 3.0 * 3840 * 15360;
  EXPECT_DOUBLE_EQ(ffn->bytes[kAggOne], params / 2 + params / 3840 * 2);
  const Operator* head = FindOp(b.model->graph(), "lm_head");
  EXPECT_FALSE(head->quantized);
}

TEST(StepModelTest, CompiledFormulaEqualsOperatorWalk) {
  std::mt19937_64 rng(7);
  for (const auto& [dev, model, q] : {std::tuple<const char*, const char*, const char*>{
                                          "mi300x", "gemma-4-e2b", "none"},
                                      {"t4", "gemma-4-12b", "w4a16-emb4"},
                                      {"l4", "gemma-4-26b-a4b", "w4a16"},
                                      {"mi300x", "gemma-4-26b-a4b", "none"},
                                      {"tpu-v6e", "gemma-4-31b", "none"}}) {
    Built b = Build(dev, model, q);
    for (int trial = 0; trial < 200; ++trial) {
      std::vector<int32_t> ctx(rng() % 65);
      for (auto& c : ctx) c = static_cast<int32_t>(rng() % 8000);
      std::vector<PrefillChunk> pf(rng() % 3);
      for (auto& p : pf)
        p = {static_cast<int32_t>(1 + rng() % 2048), static_cast<int32_t>(rng() % 4000)};
      if (ctx.empty() && pf.empty()) ctx.push_back(1);
      StepBatch batch{pf, ctx};
      const StepCost fast = b.model->Cost(batch);
      const StepCost slow = b.model->CostByWalk(batch);
      EXPECT_EQ(fast.host_ns, slow.host_ns);
      EXPECT_NEAR(static_cast<double>(fast.device_ns),
                  static_cast<double>(slow.device_ns),
                  1e-9 * static_cast<double>(slow.device_ns) + 2)
          << dev << " " << model;
    }
  }
}

// The same with the GEMM rows factor on, across its edges: saturation
// below and above the 1,024-row tables, batches past them (1,100 decodes,
// a 20,000-token chunk), a quantized GEMM and MoE experts.
TEST(StepModelTest, CompiledFormulaEqualsOperatorWalkWithGemmRowsFactor) {
  std::mt19937_64 rng(13);
  for (const auto& [dev, model, q] : {std::tuple<const char*, const char*, const char*>{
                                          "mi300x", "gemma-4-e2b", "none"},
                                      {"t4", "gemma-4-12b", "w4a16-emb4"},
                                      {"mi300x", "gemma-4-26b-a4b", "none"}}) {
    Built b = Build(dev, model, q);
    for (const auto& [exp, sat] : {std::pair{0.3, 512.0}, std::pair{0.1, 16384.0}}) {
      ParameterSet p = b.d.params;
      p.FindMutable("gemm_rows_exp")->value = exp;
      p.FindMutable("gemm_rows_sat")->value = sat;
      auto m = RebuildStepModel(b.d, p);
      const auto* rm = dynamic_cast<const RooflineStepModel*>(m.get());
      ASSERT_NE(rm, nullptr);
      for (int trial = 0; trial < 150; ++trial) {
        std::vector<int32_t> ctx(trial == 0 ? 1100 : rng() % 300);
        for (auto& c : ctx) c = static_cast<int32_t>(rng() % 8000);
        std::vector<PrefillChunk> pf(trial == 1 ? 1 : rng() % 3);
        for (auto& x : pf)
          x = {static_cast<int32_t>(trial == 1 ? 20000 : 1 + rng() % 3000),
               static_cast<int32_t>(rng() % 4000)};
        if (ctx.empty() && pf.empty()) ctx.push_back(1);
        const StepBatch batch{pf, ctx};
        const double fast = static_cast<double>(rm->Cost(batch).device_ns);
        const double slow = static_cast<double>(rm->CostByWalk(batch).device_ns);
        EXPECT_NEAR(fast, slow, 1e-9 * slow + 2) << dev << " " << model << " exp " << exp
                                                 << " sat " << sat << " trial " << trial;
      }
    }
  }
}

TEST(StepModelTest, StepTimeGrowsWithTokensAndContext) {
  Built b = Build("l4", "gemma-4-12b", "none");
  const StepTimeModel& m = *b.model;
  TimeNs prev = 0;
  for (int n : {1, 2, 4, 16, 64, 256}) {
    const TimeNs t = DecodeCost(m, n, 1000).device_ns;
    EXPECT_GE(t, prev) << n;
    prev = t;
  }
  EXPECT_GT(DecodeCost(m, 256, 1000).device_ns, DecodeCost(m, 1, 1000).device_ns);
  prev = 0;
  for (int32_t ctx : {16, 512, 1024, 4096, 8000}) {
    const TimeNs t = DecodeCost(m, 32, ctx).device_ns;
    EXPECT_GE(t, prev) << ctx;
    prev = t;
  }
  EXPECT_GT(DecodeCost(m, 32, 8000).device_ns, DecodeCost(m, 32, 16).device_ns);
  prev = 0;
  for (int32_t chunk : {16, 256, 1024, 2048}) {
    const PrefillChunk pf[] = {{chunk, 0}};
    const TimeNs t = m.Cost(StepBatch{pf, {}}).device_ns;
    EXPECT_GT(t, prev) << chunk;
    prev = t;
  }
}

TEST(StepModelTest, NoStepBeatsPeakFlopsOrBandwidth) {
  std::mt19937_64 rng(11);
  for (const auto& [dev, model, q] : {std::tuple<const char*, const char*, const char*>{
                                          "mi300x", "gemma-4-e2b", "none"},
                                      {"t4", "gemma-4-12b", "w4a16-emb4"},
                                      {"l4", "gemma-4-e4b", "w8a8"},
                                      {"tpu-v5e", "gemma-4-26b-a4b", "none"}}) {
    Built b = Build(dev, model, q);
    // Most optimistic parameters: full efficiency, no overheads.
    ParameterSet best = b.d.params;
    for (Parameter& p : best.mutable_params()) p.value = p.unit == "fraction" ? 1.0 : 0.0;
    auto fastest = RebuildStepModel(b.d, best);
    const CompiledStepGraph& g = b.model->graph();
    const double peak = std::max(g.peak_flops_16(), g.peak_flops_quant());
    for (int trial = 0; trial < 300; ++trial) {
      std::vector<int32_t> ctx(rng() % 300);
      for (auto& c : ctx) c = static_cast<int32_t>(rng() % 8000);
      std::vector<PrefillChunk> pf(rng() % 4);
      for (auto& p : pf)
        p = {static_cast<int32_t>(1 + rng() % 4096), static_cast<int32_t>(rng() % 4000)};
      if (ctx.empty() && pf.empty()) ctx.push_back(0);
      StepBatch batch{pf, ctx};
      const BatchAggregates a =
          ComputeAggregates(batch, g.window(), g.num_experts(), g.top_k());
      const double t = static_cast<double>(fastest->Cost(batch).device_ns);
      EXPECT_GE(t * (1 + 1e-9) + 1, g.TotalFlops(a) / peak * 1e9) << dev;
      EXPECT_GE(t * (1 + 1e-9) + 1, g.TotalBytes(a) / g.bandwidth() * 1e9) << dev;
      EXPECT_GE(static_cast<double>(b.model->Cost(batch).device_ns) + 1, t) << dev;
    }
  }
}

// sustained_clock_ratio (T4: 0.805, its 70 W cap) scales the FLOP peaks,
// not the bandwidth: the same graph without it has peaks 1 / 0.805 higher
// and the same bandwidth.
TEST(StepGraphTest, SustainedClockRatioScalesThePeaksNotTheBandwidth) {
  Built b = Build("t4", "gemma-4-e2b", "none");
  ASSERT_DOUBLE_EQ(b.d.device.sustained_clock_ratio(), 0.805);
  servesim::proto::Device boost = b.d.device;
  boost.clear_sustained_clock_ratio();
  auto g = CompiledStepGraph::Build(boost, b.d.model, b.d.format, b.d.dtype);
  ASSERT_TRUE(g.ok()) << g.status();
  const CompiledStepGraph& capped = b.model->graph();
  EXPECT_DOUBLE_EQ((*g)->peak_flops_16(), b.d.device.peak_flops_fp16());
  EXPECT_NEAR(capped.peak_flops_16(), 0.805 * b.d.device.peak_flops_fp16(), 1.0);
  EXPECT_NEAR(capped.peak_flops_quant(), 0.805 * (*g)->peak_flops_quant(), 1.0);
  EXPECT_EQ(capped.bandwidth(), (*g)->bandwidth());
}

TEST(StepModelTest, RebuildWithOtherParametersChangesCost) {
  Built b = Build("t4", "gemma-4-12b", "w4a16-emb4");
  ParameterSet p = b.d.params;
  p.FindMutable("quant_kernel_eff")->value = 0.5 * b.d.params.Get("quant_kernel_eff");
  auto slower = RebuildStepModel(b.d, p);
  EXPECT_GT(DecodeCost(*slower, 1, 100).device_ns,
            DecodeCost(*b.model, 1, 100).device_ns);
  p = b.d.params;
  p.FindMutable("host_step_us")->value += 1000;
  auto more_host = RebuildStepModel(b.d, p);
  EXPECT_EQ(DecodeCost(*more_host, 1, 100).host_ns,
            DecodeCost(*b.model, 1, 100).host_ns + 1000000);
}

// gemm_rows_exp: GEMM FLOP efficiency grows with rows up to gemm_rows_sat,
// so a compute-bound prefill costs less per token as the chunk grows; at or
// above gemm_rows_sat rows the step costs what it costs without the factor.
TEST(StepModelTest, GemmEfficiencyGrowsWithRowsUpToSaturation) {
  Built b = Build("mi300x", "gemma-4-e2b", "none");
  ParameterSet p = b.d.params;
  p.FindMutable("gemm_rows_exp")->value = 0;
  auto flat = RebuildStepModel(b.d, p);
  p.FindMutable("gemm_rows_exp")->value = 0.2;
  p.FindMutable("gemm_rows_sat")->value = 4096;
  auto rising = RebuildStepModel(b.d, p);
  auto prefill = [](const StepTimeModel& m, int32_t n) {
    const PrefillChunk pf[] = {{n, 0}};
    return static_cast<double>(m.Cost(StepBatch{pf, {}}).device_ns);
  };
  // Below saturation the rising model is slower, and relatively more so for
  // the smaller chunk: time per token falls faster with the chunk size.
  EXPECT_GT(prefill(*rising, 512), prefill(*flat, 512));
  EXPECT_GT(prefill(*rising, 512) / prefill(*flat, 512),
            prefill(*rising, 2048) / prefill(*flat, 2048));
  EXPECT_LT(prefill(*rising, 2048) / 2048 / (prefill(*rising, 512) / 512),
            prefill(*flat, 2048) / 2048 / (prefill(*flat, 512) / 512));
  // From gemm_rows_sat rows on, nothing changes.
  EXPECT_EQ(prefill(*rising, 4096), prefill(*flat, 4096));
  EXPECT_EQ(prefill(*rising, 8192), prefill(*flat, 8192));
  // A one-sequence decode streams weights: bandwidth bound either way.
  EXPECT_EQ(DecodeCost(*rising, 1, 100).device_ns, DecodeCost(*flat, 1, 100).device_ns);
  // Below gemm_rows_floor the factor stops falling: a 256-sequence decode
  // (compute bound at this efficiency) costs less with the floor at 512
  // than without one, and a 2,048-token prefill the same.
  p.FindMutable("gemm_rows_floor")->value = 512;
  auto floored = RebuildStepModel(b.d, p);
  p.FindMutable("gemm_rows_floor")->value = 1;
  auto unfloored = RebuildStepModel(b.d, p);
  EXPECT_LT(DecodeCost(*floored, 256, 100).device_ns,
            DecodeCost(*unfloored, 256, 100).device_ns);
  EXPECT_EQ(prefill(*floored, 2048), prefill(*unfloored, 2048));
}

// The GEMM shape law: efficiency x w / (w + gemm_w_half), w = N x K /
// compute units per kernel. A compute-bound prefill slows where the law is
// on, a model with larger matrices less than a small one, the compiled
// formula equals the operator walk, and gemm_w_half 0 is the old model.
TEST(StepModelTest, GemmShapeLawSlowsSmallMatricesOnManyUnits) {
  auto prefill = [](const StepTimeModel& m, int32_t n) {
    const PrefillChunk pf[] = {{n, 0}};
    return static_cast<double>(m.Cost(StepBatch{pf, {}}).device_ns);
  };
  std::map<std::string, double> slowdown;
  for (const char* model : {"gemma-4-e2b", "gemma-4-31b"}) {
    Built b = Build("mi300x", model, "none");
    ParameterSet p = b.d.params;
    ASSERT_NE(p.FindMutable("gemm_w_half"), nullptr);
    p.FindMutable("gemm_rows_exp")->value = 0;
    p.FindMutable("gemm_w_half")->value = 0;
    auto off = RebuildStepModel(b.d, p);
    p.FindMutable("gemm_w_half")->value = 1e5;
    auto on = RebuildStepModel(b.d, p);
    slowdown[model] = prefill(*on, 8192) / prefill(*off, 8192);
    const auto* rm = dynamic_cast<const RooflineStepModel*>(on.get());
    ASSERT_NE(rm, nullptr);
    for (int32_t n : {1, 37, 512, 3000, 8192}) {
      const PrefillChunk pf[] = {{n, 100}};
      const std::vector<int32_t> ctx(5, 900);
      const StepBatch batch{pf, ctx};
      const double fast = static_cast<double>(rm->Cost(batch).device_ns);
      const double slow = static_cast<double>(rm->CostByWalk(batch).device_ns);
      EXPECT_NEAR(fast, slow, 1e-9 * slow + 2) << model << " " << n;
    }
  }
  // E2B's QKV (1,536 x 2,560) gives each of 304 CUs ~13k elements: far
  // below 1e5, so its GEMMs run several times slower; 31B's matrices are
  // ~7x larger.
  EXPECT_GT(slowdown["gemma-4-e2b"], 2.0);
  EXPECT_GT(slowdown["gemma-4-31b"], 1.05);
  EXPECT_LT(slowdown["gemma-4-31b"], 0.6 * slowdown["gemma-4-e2b"]);
}

// The TPU build runs static shapes: a step's tokens are padded to the next
// power of two from pad_tokens_min, its sequences (LM head, sampling) from
// pad_seqs_min. A 1,100-token prefill costs what 2,048 tokens cost, one of
// 2,048 the same; host time counts the real tokens; without the priors
// nothing is padded.
TEST(StepModelTest, TpuStepsArePaddedToPowerOfTwoBuckets) {
  Built b = Build("tpu-v5e", "gemma-4-e2b", "none");
  ASSERT_NE(b.d.params.Find("pad_tokens_min"), nullptr);
  EXPECT_EQ(b.d.params.Get("pad_tokens_min"), 16);
  EXPECT_EQ(b.d.params.Get("pad_seqs_min"), 8);
  ParameterSet p = b.d.params;
  p.FindMutable("host_token_us")->value = 1;
  auto padded = RebuildStepModel(b.d, p);
  p.FindMutable("pad_seqs_min")->value = 0;
  auto tokens_only = RebuildStepModel(b.d, p);
  p.FindMutable("pad_tokens_min")->value = 0;
  auto exact = RebuildStepModel(b.d, p);
  auto prefill = [](const StepTimeModel& m, int32_t n) {
    const PrefillChunk pf[] = {{n, 0}};
    return m.Cost(StepBatch{pf, {}});
  };
  // At a bucket size token padding changes nothing; between buckets the
  // GEMMs run the bucket's rows; the host work counts the real tokens.
  EXPECT_EQ(prefill(*tokens_only, 2048).device_ns, prefill(*exact, 2048).device_ns);
  EXPECT_GT(prefill(*tokens_only, 1100).device_ns, prefill(*exact, 1100).device_ns);
  EXPECT_EQ(prefill(*padded, 1100).host_ns, prefill(*exact, 1100).host_ns);
  // One sequence's logits run as 8 rows: never cheaper.
  EXPECT_GE(prefill(*padded, 2048).device_ns, prefill(*tokens_only, 2048).device_ns);
  // Decodes: 9 sequences run as 16 (tokens and LM head rows), never
  // cheaper than 9 exactly; 16 as 16.
  EXPECT_GE(DecodeCost(*padded, 9, 100).device_ns, DecodeCost(*exact, 9, 100).device_ns);
  EXPECT_EQ(DecodeCost(*padded, 16, 100).device_ns,
            DecodeCost(*exact, 16, 100).device_ns);
  // The compiled formula and the operator walk agree with padding on.
  const PrefillChunk pf[] = {{1100, 0}};
  const std::vector<int32_t> ctxs(9, 300);
  const auto* rm = dynamic_cast<const RooflineStepModel*>(padded.get());
  ASSERT_NE(rm, nullptr);
  const StepBatch batch{pf, ctxs};
  EXPECT_NEAR(static_cast<double>(rm->Cost(batch).device_ns),
              static_cast<double>(rm->CostByWalk(batch).device_ns),
              1e-6 * static_cast<double>(rm->CostByWalk(batch).device_ns) + 2);
  // A GPU device has no padding priors.
  Built g = Build("l4", "gemma-4-e2b", "none");
  EXPECT_EQ(g.d.params.Find("pad_tokens_min"), nullptr);
}

// MI300X decode attention has no KV split: one sequence's context is read
// by one work unit per KV head, at attn_unit_gbs, not at the device's
// bandwidth; with sequences x KV heads >= attn_units the roofline rules.
TEST(StepModelTest, FewDecodesReadTheirContextAtOneUnitsBandwidth) {
  Built b = Build("mi300x", "gemma-4-e2b", "none");
  const double unit_bw = b.d.params.Get("attn_unit_gbs") * 1e9;
  // E2B: 7 full layers read K and V of 512-wide heads for every context token
  // (sliding layers stop at the 512-token window).
  const double extra_ns = 7 * 2 * 512 * 2 * (8192.0 - 4096.0) / unit_bw * 1e9;
  const double one = static_cast<double>(DecodeCost(*b.model, 1, 8192).device_ns -
                                         DecodeCost(*b.model, 1, 4096).device_ns);
  EXPECT_NEAR(one, extra_ns, 0.01 * extra_ns + 2);
  // Four sequences: four units in parallel, the same time per step.
  const double four = static_cast<double>(DecodeCost(*b.model, 4, 8192).device_ns -
                                          DecodeCost(*b.model, 4, 4096).device_ns);
  EXPECT_NEAR(four, one, 0.01 * one + 2);
  // Without the per-unit limit the same step is cheaper.
  ParameterSet p = b.d.params;
  p.FindMutable("attn_unit_gbs")->value = 0;
  auto roofline_only = RebuildStepModel(b.d, p);
  EXPECT_LT(DecodeCost(*roofline_only, 1, 8192).device_ns,
            DecodeCost(*b.model, 1, 8192).device_ns);
  // 512 sequences (> 304 units): the full-device roofline, not the unit bound.
  EXPECT_EQ(DecodeCost(*roofline_only, 512, 8192).device_ns,
            DecodeCost(*b.model, 512, 8192).device_ns);
}

// With the priors, single-stream decode lands near the published figures
// (calibration fits them exactly later): within 50%.
// The step-parameter table is the one place a default, bounds, sigma,
// unit and meaning are written: each entry has a unit and a meaning, and
// bounds that hold its default (a kPositive entry's default is 0: off).
TEST(StepParameterTableTest, EveryParameterHasAUnitAMeaningAndBoundsHoldingItsDefault) {
  std::set<std::string> names;
  for (const StepParameterSpec& p : StepParameterTable()) {
    SCOPED_TRACE(p.name);
    EXPECT_TRUE(names.insert(p.name).second) << "declared twice";
    EXPECT_EQ(FindStepParameter(p.name), &p);
    EXPECT_STRNE(p.unit, "");
    EXPECT_STRNE(p.meaning, "");
    EXPECT_LT(p.lower, p.upper);
    EXPECT_GE(p.sigma_rel, 0);
    EXPECT_GE(p.sigma_abs, 0);
    if (p.when == StepParameterWhen::kPositive) {
      EXPECT_EQ(p.default_value, 0) << "a kPositive parameter is off by default";
    } else {
      EXPECT_GE(p.default_value, p.lower);
      EXPECT_LE(p.default_value, p.upper);
    }
  }
  EXPECT_EQ(FindStepParameter("no_such_parameter"), nullptr);
}

// PriorStepParameters and Compile read the same defaults: a device file
// that sets no prior gives the table's values, and compiling an empty set
// (every parameter missing) costs the same steps as compiling those priors
// (a quantized MoE model, so quant_kernel_eff and moe_routing_us count).
TEST(StepParameterTableTest, CompileOfAnEmptySetEqualsThePriorsOfADeviceWithoutPriors) {
  Built b = Build("l4", "gemma-4-26b-a4b", "w4a16");
  proto::Device bare = b.d.device;
  bare.clear_param_priors();
  const ParameterSet priors = PriorStepParameters(bare, b.d.model, b.d.format);
  ASSERT_NE(priors.Find("quant_kernel_eff"), nullptr);
  ASSERT_NE(priors.Find("moe_routing_us"), nullptr);
  for (const Parameter& p : priors.params()) {
    const StepParameterSpec* spec = FindStepParameter(p.name);
    ASSERT_NE(spec, nullptr) << p.name;
    EXPECT_EQ(p.value, spec->default_value) << p.name;
    EXPECT_EQ(p.unit, spec->unit) << p.name;
  }
  auto from_priors = RooflineStepModel::Compile(b.d.graph, priors);
  auto from_nothing = RooflineStepModel::Compile(b.d.graph, ParameterSet());
  for (const int n : {1, 8, 64}) {
    const StepCost a = DecodeCost(*from_priors, n, 1000);
    const StepCost c = DecodeCost(*from_nothing, n, 1000);
    EXPECT_EQ(a.device_ns, c.device_ns) << n;
    EXPECT_EQ(a.host_ns, c.host_ns) << n;
  }
  const std::vector<PrefillChunk> chunk = {
      PrefillChunk{.num_tokens = 2048, .num_computed_before = 0}};
  const StepBatch prefill{chunk, {}};
  EXPECT_EQ(from_priors->Cost(prefill).device_ns, from_nothing->Cost(prefill).device_ns);
}

TEST(StepModelTest, PriorsGiveBallparkSingleStreamDecode) {
  auto tpot_ms = [](const Built& b, int32_t ctx) {
    const StepCost c = DecodeCost(*b.model, 1, ctx);
    const double step = b.d.scheduler.async_scheduling
                            ? std::max(c.host_ns, c.device_ns)
                            : static_cast<double>(c.host_ns + c.device_ns);
    return step / 1e6;
  };
  const Built mi = Build("mi300x", "gemma-4-e2b", "none");
  std::printf(
      "prior TPOT: mi300x e2b %.3f ms (ctx 128) %.3f (1024) %.3f (8192); t4 12b %.1f "
      "tok/s; l4 12b %.1f tok/s\n",
      tpot_ms(mi, 128), tpot_ms(mi, 1024), tpot_ms(mi, 8192),
      1000.0 / tpot_ms(Build("t4", "gemma-4-12b", "w4a16-emb4"), 100),
      1000.0 / tpot_ms(Build("l4", "gemma-4-12b", "w4a16-emb4"), 100));
  EXPECT_NEAR(tpot_ms(mi, 128), 2.85, 2.85 * 0.5);
  const Built t4 = Build("t4", "gemma-4-12b", "w4a16-emb4");
  EXPECT_NEAR(1000.0 / tpot_ms(t4, 100), 28.5, 28.5 * 0.5);
  const Built l4 = Build("l4", "gemma-4-12b", "w4a16-emb4");
  EXPECT_NEAR(1000.0 / tpot_ms(l4, 100), 35.2, 35.2 * 0.5);
}

}  // namespace
}  // namespace servesim
