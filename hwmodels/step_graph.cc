// CompiledStepGraph::Build: the step as a Boost.Graph operator DAG, folded
// into distinct operators. Kept apart from step_model.cc, which holds the
// per-step hot path (compiled with -O3).
#include <algorithm>
#include <iterator>
#include <optional>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "boost/graph/adjacency_list.hpp"
#include "boost/graph/topological_sort.hpp"
#include "hwmodels/step_model.h"

namespace servesim {

// ---------------------------------------------------------------------------
// Graph construction.

namespace {

struct VertexProp {
  std::string name;
  Operator op;
};
using OpGraph =
    boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS, VertexProp>;
using Vertex = boost::graph_traits<OpGraph>::vertex_descriptor;

std::string FfnTag(const LayerArch& l) {
  return absl::StrCat(l.sliding ? "sliding" : "full", ".ffn", l.intermediate_size);
}

}  // namespace

absl::StatusOr<std::shared_ptr<const CompiledStepGraph>> CompiledStepGraph::Build(
    const proto::Device& device, const ModelArch& m, const WeightFormat& f,
    const std::string& dtype, int kv_dtype_bytes) {
  auto g = std::shared_ptr<CompiledStepGraph>(new CompiledStepGraph());
  if (dtype == "bf16") {
    if (!device.supports_bf16() || device.peak_flops_bf16() <= 0) {
      return absl::InvalidArgumentError(absl::StrCat("--dtype: bf16 is not supported on ",
                                                     device.id(),
                                                     "; allowed: fp16 (or auto)"));
    }
    g->peak_flops_16_ = device.peak_flops_bf16();
  } else if (dtype == "fp16") {
    g->peak_flops_16_ = device.peak_flops_fp16();
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("--dtype: unknown value '", dtype, "'; allowed: auto, bf16, fp16"));
  }
  g->peak_flops_quant_ = g->peak_flops_16_;
  if (f.compute == "fp8" && device.peak_flops_fp8() > 0)
    g->peak_flops_quant_ = device.peak_flops_fp8();
  if (f.compute == "int8" && device.peak_ops_int8() > 0)
    g->peak_flops_quant_ = device.peak_ops_int8();
  // A power-capped card runs its tensor cores below the boost clock the
  // datasheet peaks assume (proto/hwmodels.proto sustained_clock_ratio).
  if (device.sustained_clock_ratio() > 0) {
    g->peak_flops_16_ *= device.sustained_clock_ratio();
    g->peak_flops_quant_ *= device.sustained_clock_ratio();
  }
  g->bandwidth_ = device.bandwidth_bytes_per_s();
  if (g->peak_flops_16_ <= 0 || g->bandwidth_ <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "device '", device.id(), "': peak FLOP/s and bandwidth must be > 0"));
  }
  g->graph_capture_ = device.graph_capture();
  g->max_capture_ = device.max_graph_capture_size();
  g->compute_units_ = std::max(1, device.compute_units());
  g->num_layers_ = static_cast<int32_t>(m.layers.size());
  g->num_experts_ = m.num_experts;
  // The experts a step touches: top_k rows per token of every DP rank
  // feeding them (expert_token_sources; 1 without DP attention).
  g->top_k_ = m.experts_top_k * m.expert_token_sources;
  g->num_moe_layers_ = m.num_experts > 0 ? g->num_layers_ : 0;
  for (const LayerArch& l : m.layers)
    if (l.sliding) g->window_ = l.window;

  const double h = m.hidden_size;
  const double act = 2;               // activations and KV in the 16-bit model dtype
  const double kvb = kv_dtype_bytes;  // KV elements (1: --kv-cache-dtype fp8)
  const double vocab = static_cast<double>(m.vocab_size);
  const double ple = m.per_layer_embedding_dim;
  const double nl = static_cast<double>(m.layers.size());
  const bool quant = f.weight_bits < 16;

  OpGraph graph;
  auto add = [&](std::string name, Operator op) {
    op.name = name;
    const Vertex v = boost::add_vertex(graph);
    graph[v].name = std::move(name);
    graph[v].op = std::move(op);
    return v;
  };
  auto edge = [&](Vertex a, Vertex b) { boost::add_edge(a, b, graph); };

  // Embedding lookup (plus the per-layer embedding lookup, not streamed).
  Operator emb;
  emb.op_class = OpClass::kMemory;
  emb.bytes[kAggTokens] = 2 * h * act;
  if (ple > 0) {
    const double ple_elem = f.quantize_embeddings ? f.weight_bits / 8.0 : act;
    emb.bytes[kAggTokens] += nl * ple * (ple_elem + act);
  }
  // Pipeline parallelism: only the first stage looks tokens up, only the
  // last runs the LM head and sampling (ModelArch::runs_*).
  std::optional<Vertex> first;
  Vertex prev{};
  auto chain = [&](Vertex v) {
    if (first) edge(prev, v);
    first = first.value_or(v);
    prev = v;
  };
  if (m.runs_embedding) chain(add("embedding", emb));
  if (ple > 0 && m.runs_embedding) {
    Operator proj;
    proj.quantized = quant;
    const double params = h * nl * ple;
    proj.flops[kAggTokens] = 2 * params;
    proj.bytes[kAggOne] = LinearBytes(f, params, h, static_cast<int>(act));
    proj.bytes[kAggTokens] = (h + nl * ple) * act;
    proj.gemm_kernels = {{1.0, params}};
    chain(add("per_layer_projection", proj));
  }
  for (size_t i = 0; i < m.layers.size(); ++i) {
    const LayerArch& l = m.layers[i];
    const std::string p = absl::StrCat("layer", i, ".");
    const double q = static_cast<double>(l.num_q_heads) * l.head_dim;
    const double kv = static_cast<double>(l.num_kv_heads) * l.head_dim;
    const Agg dec = l.sliding ? kAggDecCtxSliding : kAggDecCtxFull;
    const Agg pairs = l.sliding ? kAggPrefillPairsSliding : kAggPrefillPairsFull;
    const Agg kvread = l.sliding ? kAggPrefillKvSliding : kAggPrefillKvFull;

    Operator qkv;
    qkv.quantized = quant;
    const double qkv_params = h * (q + kv * (l.k_eq_v ? 1 : 2));
    qkv.flops[kAggTokens] = 2 * qkv_params;
    qkv.bytes[kAggOne] = LinearBytes(f, qkv_params, h, static_cast<int>(act));
    qkv.bytes[kAggTokens] = (h + q + 2 * kv) * act + 4 * h * act;  // + norms, residual
    qkv.gemm_kernels = {{1.0, qkv_params}};
    Vertex vqkv = add(p + "qkv_proj", qkv);

    Operator ad;  // decode attention: one query per sequence
    ad.op_class = OpClass::kAttention;
    ad.flops[dec] = 4 * q;         // QK^T and PV per (query, key)
    ad.bytes[dec] = 2 * kv * kvb;  // K and V of every attended token
    ad.unit_bytes_per_ctx = 2 * l.head_dim * kvb;
    ad.kv_heads = l.num_kv_heads;
    Vertex vad = add(p + "attention_decode", ad);

    Operator ap;  // prefill attention (flash): pairs of compute, KV read once per chunk
    ap.op_class = OpClass::kAttention;
    ap.flops[pairs] = 4 * q;
    ap.bytes[kvread] = 2 * kv * kvb;
    Vertex vap = add(p + "attention_prefill", ap);

    Operator o;
    o.quantized = quant;
    const double o_params = q * h + (ple > 0 ? 2 * h * ple : 0);
    o.flops[kAggTokens] = 2 * o_params;
    o.bytes[kAggOne] = LinearBytes(f, o_params, h, static_cast<int>(act));
    o.bytes[kAggTokens] = (q + h) * act;
    o.gemm_kernels = {{1.0, q * h}};
    Vertex vo = add(p + "o_proj", o);

    chain(vqkv);
    edge(vqkv, vad);
    edge(vqkv, vap);
    edge(vad, vo);
    edge(vap, vo);
    prev = vo;

    if (l.intermediate_size > 0) {
      Operator ffn;
      const bool dense16 = m.num_experts > 0 && f.moe_dense_16bit;
      ffn.quantized = quant && !dense16;
      const double params = 3 * h * l.intermediate_size;
      ffn.flops[kAggTokens] = 2 * params;
      ffn.bytes[kAggOne] =
          dense16 ? params * act : LinearBytes(f, params, h, static_cast<int>(act));
      ffn.bytes[kAggTokens] = (2 * h + 6.0 * l.intermediate_size) * act + 4 * h * act;
      // gate_up (fused, 2 x h x I) and down (I x h).
      ffn.gemm_kernels = {{2.0 / 3.0, 2 * h * l.intermediate_size},
                          {1.0 / 3.0, h * l.intermediate_size}};
      Vertex v = add(p + "ffn", ffn);
      edge(prev, v);
      prev = v;
    }
    if (m.num_experts > 0) {
      Operator moe;
      // mxfp4 quantizes the experts alone, dequantized in the kernel as
      // W4A16 is (Marlin on Ampere/Ada).
      const bool expert_format = f.expert_weight_bits > 0;
      moe.quantized = quant || expert_format;
      const double ie = m.expert_intermediate_size;
      const double expert_params = 3 * h * ie;
      const double router_params = h * m.num_experts;
      // Expert parallelism: this rank holds local of the num_experts; under
      // uniform routing it runs local / num_experts of the top_k x tokens
      // expert rows and touches that share of the experts the batch hits.
      // DP attention: the experts also run the other DP ranks' tokens.
      const double local_share = static_cast<double>(m.LocalExperts()) / m.num_experts;
      // Rows: this rank's share of every DP rank's top_k x tokens. Weights:
      // its share of the experts hit, which already counts every DP rank's
      // tokens (top_k_ above), so no second factor of DP.
      const double local = local_share * m.expert_token_sources;
      moe.flops[kAggTokens] =
          2 * (local * m.experts_top_k * expert_params + router_params);
      // The bytes the memory plan counts for an expert (mxfp4: 4-bit values,
      // block scales, biases, padding; it read them as bf16).
      moe.bytes[kAggExpertsTouched] =
          local_share * (expert_format
                             ? ExpertBytesInExpertFormat(m, f)
                             : LinearBytes(f, expert_params, h, static_cast<int>(act)));
      moe.bytes[kAggOne] = router_params * act;
      moe.bytes[kAggTokens] = local * m.experts_top_k * (2 * h + 6 * ie) * act;
      Vertex v = add(p + "experts", moe);
      edge(prev, v);
      prev = v;
    }
  }
  if (m.runs_lm_head) {
    Operator head;  // LM head over the sampled positions only (16-bit)
    // Tensor parallelism: one rank's vocab shard (hwmodels/parallelism.h).
    const double head_rows = static_cast<double>(m.EmbeddingRows());
    head.flops[kAggSeqs] = 2 * h * head_rows;
    head.bytes[kAggOne] = h * head_rows * act;
    head.bytes[kAggSeqs] = head_rows * 4 + 2 * h * act;
    head.gemm_kernels = {{1.0, h * head_rows}};
    chain(add("lm_head", head));
    Operator samp;  // softmax + sampling over fp32 logits
    samp.op_class = OpClass::kMemory;
    samp.flops[kAggSeqs] = 8 * vocab;
    samp.bytes[kAggSeqs] = 3 * vocab * 4;
    chain(add("sampling", samp));
  }

  std::vector<Vertex> order;
  try {
    boost::topological_sort(graph, std::back_inserter(order));
  } catch (const boost::not_a_dag&) {
    return absl::InternalError("step operator graph has a cycle");
  }
  std::reverse(order.begin(), order.end());
  // Fold identical operators (same class, kernel and coefficients) into one
  // with a count, in topological order of first appearance.
  for (Vertex v : order) {
    const VertexProp& vp = graph[v];
    g->topo_.push_back(vp.name);
    auto same = [&](const Operator& o) {
      return o.op_class == vp.op.op_class && o.quantized == vp.op.quantized &&
             o.flops == vp.op.flops && o.bytes == vp.op.bytes &&
             o.unit_bytes_per_ctx == vp.op.unit_bytes_per_ctx &&
             o.kv_heads == vp.op.kv_heads && o.gemm_kernels == vp.op.gemm_kernels;
    };
    auto it = std::find_if(g->ops_.begin(), g->ops_.end(), same);
    if (it != g->ops_.end()) {
      it->count += 1;
      continue;
    }
    Operator op = vp.op;
    // "layer7.ffn" -> "ffn" (+ attention type for layer ops).
    std::string name = vp.name;
    if (name.rfind("layer", 0) == 0) {
      const size_t dot = name.find('.');
      const int idx = std::stoi(name.substr(5, dot - 5));
      const LayerArch& l = m.layers[idx];
      name = absl::StrCat(
          name.substr(dot + 1), "[", l.sliding ? "sliding" : "full",
          name.substr(dot + 1) == "ffn" ? absl::StrCat(",", FfnTag(l)) : "", "]");
    }
    op.name = name;
    g->ops_.push_back(std::move(op));
  }
  g->description_ = absl::StrCat(
      "roofline over ", g->topo_.size(), " operators (", g->ops_.size(), " distinct) on ",
      device.id(), " ", dtype, ", format ", f.id,
      absl::StrFormat(": peak %.4g FLOP/s (quantized GEMM %.4g), %.4g B/s",
                      g->peak_flops_16_, g->peak_flops_quant_, g->bandwidth_));
  return std::shared_ptr<const CompiledStepGraph>(std::move(g));
}

double CompiledStepGraph::TotalFlops(const BatchAggregates& a) const {
  double t = 0;
  for (const Operator& op : ops_)
    for (int i = 0; i < kNumAggs; ++i) t += op.count * op.flops[i] * a.v[i];
  return t;
}

double CompiledStepGraph::TotalBytes(const BatchAggregates& a) const {
  double t = 0;
  for (const Operator& op : ops_)
    for (int i = 0; i < kNumAggs; ++i) t += op.count * op.bytes[i] * a.v[i];
  return t;
}

}  // namespace servesim
