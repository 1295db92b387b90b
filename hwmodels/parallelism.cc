#include "hwmodels/parallelism.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "sim/base/int_math.h"
#include "sim/base/status_macros.h"

namespace servesim {

int32_t KvHeadsPerRank(int32_t num_kv_heads, int32_t tp) {
  return tp >= num_kv_heads ? 1 : num_kv_heads / tp;
}

int32_t KvHeadReplicas(int32_t num_kv_heads, int32_t tp) {
  return tp >= num_kv_heads ? tp / num_kv_heads : 1;
}

int64_t VocabRowsPerRank(int64_t vocab_size, int32_t tp) {
  const int64_t padded = CeilDiv(vocab_size, kVocabPaddingSize) * kVocabPaddingSize;
  return CeilDiv(padded, int64_t{tp});
}

absl::Status CheckParallelism(const proto::Device& device, const ModelArch& m,
                              const ServerSpec& spec) {
  const int32_t pp = spec.pipeline_parallel_size;
  const int32_t num_layers = static_cast<int32_t>(m.layers.size());
  if (pp < 1 || pp > std::min(kMaxParallelSize, num_layers)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--pipeline-parallel-size: ", pp, " is out of range [1, ",
                     std::min(kMaxParallelSize, num_layers), "] (at most the ",
                     num_layers, " layers of ", m.id, ")"));
  }
  const int32_t dp = spec.data_parallel_size;
  if (pp > 1) {
    if (dp != 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--pipeline-parallel-size: ", pp, " with --data-parallel-size ", dp,
          " is not modelled; allowed: --data-parallel-size 1 with PP > 1 (or replicas "
          "in fleet { } of --config)"));
    }
    if (spec.enable_expert_parallel && m.num_experts > 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--pipeline-parallel-size: ", pp,
          " with --enable-expert-parallel is not modelled; allowed: PP 1 with EP, or PP "
          "without --enable-expert-parallel"));
    }
    if (m.per_layer_embedding_dim > 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--pipeline-parallel-size: ", pp, " with the per-layer embeddings of ", m.id,
          " is not modelled (every stage would hold the whole per-layer table); "
          "allowed: 1"));
    }
    const int32_t chips = pp * std::max(1, spec.tensor_parallel_size);
    const int32_t node_devices = device.interconnect().max_devices_per_node();
    if (node_devices <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--pipeline-parallel-size: ", pp, " needs a multi-chip node, but device '",
          device.id(), "' has no interconnect { max_devices_per_node } in its file"));
    }
    if (chips > node_devices) {
      return absl::InvalidArgumentError(
          absl::StrCat("--pipeline-parallel-size: ", pp, " x --tensor-parallel-size ",
                       spec.tensor_parallel_size, " = ", chips, " chips exceed the ",
                       node_devices, " ", device.id(),
                       " devices one node holds; allowed: TP x PP <= ", node_devices));
    }
  }
  if (dp < 1 || dp > kMaxParallelSize) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--data-parallel-size: ", dp, " is out of range [1, ", kMaxParallelSize, "]"));
  }
  if (dp > 1 && m.num_experts > 0 && !spec.enable_expert_parallel) {
    // Without EP vLLM splits each expert over the DP x TP ranks; modelled:
    // DP attention + EP experts only.
    return absl::InvalidArgumentError(absl::StrCat(
        "--data-parallel-size: ", dp, " with the MoE model ", m.id,
        " is modelled with --enable-expert-parallel only (DP attention + experts spread "
        "whole over the DP x TP ranks); add it, or use replicas behind servesim's router "
        "(fleet { replicas { count: N } } in --config)"));
  }
  const int32_t tp = spec.tensor_parallel_size;
  if (tp < 1 || tp > kMaxParallelSize) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--tensor-parallel-size: ", tp, " is out of range [1, ", kMaxParallelSize, "]"));
  }
  const int32_t ep = ExpertParallelSize(m, spec);
  if (ep > m.num_experts && m.num_experts > 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--enable-expert-parallel: the expert-parallel group of ", ep,
        " ranks (--tensor-parallel-size x --data-parallel-size) exceeds the ",
        m.num_experts, " experts of ", m.id, "; allowed: at most ", m.num_experts,
        " ranks"));
  }
  const int32_t node = device.interconnect().max_devices_per_node();
  if (dp > 1 && dp * tp > std::max(node, 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--data-parallel-size: ", dp, " x --tensor-parallel-size ", tp, " = ", dp * tp,
        " chips exceed the ", std::max(node, 1), " ", device.id(),
        " devices one node holds (servesim models one node; more nodes: replicas in "
        "fleet { } of --config)"));
  }
  if (tp == 1) return absl::OkStatus();
  if (node <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--tensor-parallel-size: ", tp, " needs a multi-chip node, but device '",
        device.id(), "' has no interconnect { max_devices_per_node } in its file"));
  }
  if (tp > node) {
    return absl::InvalidArgumentError(
        absl::StrCat("--tensor-parallel-size: ", tp, " exceeds the ", node, " ",
                     device.id(), " devices one node holds; allowed: [1, ", node, "]"));
  }
  for (size_t i = 0; i < m.layers.size(); ++i) {
    const LayerArch& l = m.layers[i];
    if (l.num_q_heads % tp != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("--tensor-parallel-size: ", tp, " does not divide the ",
                       l.num_q_heads, " attention heads of ", m.id,
                       " (vLLM requires it); allowed: a divisor of ", l.num_q_heads));
    }
    if (l.num_kv_heads % tp != 0 && tp % l.num_kv_heads != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("--tensor-parallel-size: ", tp, " and the ", l.num_kv_heads,
                       " KV heads of layer ", i, " of ", m.id,
                       " divide neither way (vLLM requires one to divide the other)"));
    }
    if (l.intermediate_size % tp != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("--tensor-parallel-size: ", tp, " does not divide the MLP width ",
                       l.intermediate_size, " of layer ", i, " of ", m.id));
    }
  }
  if (m.num_experts > 0 && ep == 1 && m.expert_intermediate_size % tp != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--tensor-parallel-size: ", tp, " does not divide the expert width ",
                     m.expert_intermediate_size, " of ", m.id));
  }
  return absl::OkStatus();
}

int32_t ExpertParallelSize(const ModelArch& m, const ServerSpec& spec) {
  if (!spec.enable_expert_parallel || m.num_experts <= 0) return 1;
  return std::max(1, spec.tensor_parallel_size) * std::max(1, spec.data_parallel_size);
}

int32_t ExpertsPerRank(int32_t num_experts, int32_t ep) {
  return ep <= 1 ? num_experts : static_cast<int32_t>(CeilDiv(num_experts, ep));
}

ModelArch TensorParallelRank(const ModelArch& m, int32_t tp, int32_t ep, int32_t dp) {
  if (tp <= 1 && ep <= 1) return m;
  ModelArch r = m;
  if (ep > 1) r.experts_per_rank = ExpertsPerRank(m.num_experts, ep);
  if (ep > 1 && dp > 1) r.expert_token_sources = dp;
  if (tp <= 1) return r;
  for (LayerArch& l : r.layers) {
    l.num_q_heads /= tp;
    l.num_kv_heads = KvHeadsPerRank(l.num_kv_heads, tp);
    l.intermediate_size /= tp;
  }
  if (ep <= 1) r.expert_intermediate_size /= tp;  // EP: whole experts
  r.vocab_rows_per_rank = VocabRowsPerRank(m.vocab_size, tp);
  r.vision_encoder_params = CeilDiv(m.vision_encoder_params, int64_t{tp});
  r.audio_encoder_params = CeilDiv(m.audio_encoder_params, int64_t{tp});
  return r;
}

std::string DescribeKvHeadSplit(const ModelArch& m, int32_t tp) {
  std::vector<std::pair<bool, int32_t>> seen;  // (sliding, kv heads), first seen
  std::string out;
  for (const LayerArch& l : m.layers) {
    if (!l.holds_kv) continue;
    const std::pair<bool, int32_t> key{l.sliding, l.num_kv_heads};
    if (std::find(seen.begin(), seen.end(), key) != seen.end()) continue;
    seen.push_back(key);
    absl::StrAppend(&out, out.empty() ? "" : "; ", l.sliding ? "sliding" : "full",
                    " layers: ", l.num_kv_heads, " KV heads -> ",
                    KvHeadsPerRank(l.num_kv_heads, tp), " per rank");
    if (const int32_t r = KvHeadReplicas(l.num_kv_heads, tp); r > 1) {
      absl::StrAppend(&out, " (each held by ", r, " ranks)");
    }
  }
  return out;
}

std::string DescribeExpertSplit(const ModelArch& m, int32_t tp, int32_t ep) {
  if (m.num_experts <= 0) return "";
  if (ep <= 1) {
    return absl::StrCat(m.num_experts, " experts, each split over TP ", tp, " (width ",
                        m.expert_intermediate_size, " -> ",
                        m.expert_intermediate_size / std::max(tp, 1), " per rank)");
  }
  const int32_t most = ExpertsPerRank(m.num_experts, ep);
  std::string out = absl::StrCat(m.num_experts, " experts -> ", most,
                                 " whole experts per rank (expert parallel ", ep, ")");
  if (const int32_t fewer = m.num_experts % ep; fewer != 0) {
    absl::StrAppend(&out, "; ", fewer, " ranks hold ", most, ", the others ", most - 1,
                    " (the fullest rank sets the pool)");
  }
  return out;
}

absl::StatusOr<CollectiveLink> TensorParallelLink(const proto::Device& device,
                                                  int32_t group_size, bool point_to_point,
                                                  int32_t span) {
  const proto::Interconnect& ic = device.interconnect();
  CollectiveLink link;
  link.latency_s = ic.latency_s();
  const int32_t n = group_size > 0 ? group_size : ic.max_devices_per_node();
  const int32_t spread = std::max(n, span);
  const bool beyond_links = ic.link_group_max() > 0 && spread > ic.link_group_max();
  if (ic.bandwidth_bytes_per_s() > 0 && !beyond_links) {
    link.bytes_per_s = ic.bandwidth_bytes_per_s() / 2;
    link.description = absl::StrFormat("%s %s, %.4g B/s per direction", ic.kind(),
                                       ic.topology(), link.bytes_per_s);
    if (ic.mesh_links() > 0) {
      // A mesh: only the links to the group's peers carry its traffic.
      const int32_t used =
          point_to_point ? 1 : std::clamp(n - 1, int32_t{1}, ic.mesh_links());
      link.bytes_per_s *= static_cast<double>(used) / ic.mesh_links();
      link.description = absl::StrFormat(
          "%s %s, %d of its %d links (%s), %.4g B/s per direction", ic.kind(),
          ic.topology(), used, ic.mesh_links(),
          point_to_point ? "one peer" : absl::StrCat("a group of ", n), link.bytes_per_s);
    }
  } else {
    link.bytes_per_s = ic.host_link_bytes_per_s();
    link.description = absl::StrFormat("%s through the host, %.4g B/s per direction",
                                       ic.kind(), link.bytes_per_s);
    if (beyond_links && ic.bandwidth_bytes_per_s() > 0) {
      absl::StrAppendFormat(
          &link.description,
          " (a group over %d devices: its device links join at most %d)", spread,
          ic.link_group_max());
    }
  }
  absl::StrAppendFormat(&link.description, ", %.3g us per collective",
                        link.latency_s * 1e6);
  if (!(link.bytes_per_s > 0) || !(link.latency_s >= 0) ||
      !std::isfinite(link.latency_s)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--tensor-parallel-size: device '", device.id(),
        "' has no usable interconnect in its file (interconnect { bandwidth_bytes_per_s "
        "or host_link_bytes_per_s > 0, latency_s >= 0 })"));
  }
  return link;
}

double AllReduceSeconds(double bytes, int32_t n, const CollectiveLink& link) {
  if (n <= 1) return 0;
  return link.latency_s + 2.0 * (n - 1) / n * bytes / link.bytes_per_s;
}

double AllGatherSeconds(double total_bytes, int32_t n, const CollectiveLink& link) {
  if (n <= 1) return 0;
  return link.latency_s + static_cast<double>(n - 1) / n * total_bytes / link.bytes_per_s;
}

namespace {

// `link` without its per-collective latency: the bandwidth term of a
// collective (the latencies are counted per step).
CollectiveLink BandwidthOnly(CollectiveLink link) {
  link.latency_s = 0;
  return link;
}

void AddDataParallelExperts(const ModelArch& full, int32_t dp, int32_t ep,
                            const CollectiveLink& link, int act_bytes,
                            TensorParallelCollectives* c) {
  if (dp <= 1 || ep <= 1 || full.num_experts <= 0) return;
  const int32_t layers = static_cast<int32_t>(full.layers.size());
  c->dp = dp;
  c->dp_expert_collectives_per_step = 2 * layers;
  c->step_ns += 2.0 * layers * link.latency_s * 1e9;
  // Per own token: an all-gather of its row to the dp ranks (and the
  // reduce-scatter back, the same volume), (dp - 1) / dp of dp rows.
  c->token_ns += 2.0 * layers *
                 AllGatherSeconds(static_cast<double>(dp) * full.hidden_size * act_bytes,
                                  dp, BandwidthOnly(link)) *
                 1e9;
}

}  // namespace

TensorParallelCollectives CompileCollectives(const ModelArch& full, int32_t tp,
                                             const CollectiveLink& link, int act_bytes,
                                             int32_t dp, int32_t ep,
                                             const CollectiveLink* dp_link) {
  TensorParallelCollectives c;
  c.tp = tp;
  const CollectiveLink& dp_group = dp_link != nullptr ? *dp_link : link;
  if (tp <= 1) {
    AddDataParallelExperts(full, dp, ep, dp_group, act_bytes, &c);
    return c;
  }
  const double layers = static_cast<double>(full.layers.size());
  const double h = full.hidden_size;
  // Bytes per token of each all-reduce kind, times how many there are.
  double token_bytes = 0;
  int32_t n = 0;
  const int32_t per_layer = 2 + (full.num_experts > 0 ? 1 : 0);
  n += per_layer * static_cast<int32_t>(full.layers.size());
  token_bytes += per_layer * layers * h * act_bytes;
  if (full.runs_embedding) {
    n += 1;  // vocab-parallel embedding
    token_bytes += h * act_bytes;
  }
  if (full.per_layer_embedding_dim > 0 && full.runs_embedding) {
    n += 1;  // vocab-parallel per-layer embedding table
    token_bytes += layers * full.per_layer_embedding_dim * act_bytes;
  }
  c.all_reduces_per_step = n;
  // + the logits all-gather (on the last pipeline stage only).
  const int32_t gathers = full.runs_lm_head ? 1 : 0;
  c.step_ns = (n + gathers) * link.latency_s * 1e9;
  // The bandwidth terms: the ring all-reduces of each token's rows, and
  // the all-gather of each sampled sequence's padded vocab logits.
  const CollectiveLink bw = BandwidthOnly(link);
  c.token_ns = AllReduceSeconds(token_bytes, tp, bw) * 1e9;
  c.seq_ns = gathers *
             AllGatherSeconds(static_cast<double>(VocabRowsPerRank(full.vocab_size, tp)) *
                                  tp * act_bytes,
                              tp, bw) *
             1e9;
  AddDataParallelExperts(full, dp, ep, dp_group, act_bytes, &c);
  return c;
}

std::string TensorParallelCollectives::Describe() const {
  if (dp_expert_collectives_per_step > 0) {
    return absl::StrFormat(
        "TP %d, DP %d collectives: %d all-reduces%s + %d DP expert all-gathers / "
        "reduce-scatters per step = %.4g ns + %.4g ns/token + %.4g ns/sampled sequence",
        tp, dp, all_reduces_per_step, tp > 1 ? " + 1 logits all-gather" : "",
        dp_expert_collectives_per_step, step_ns, token_ns, seq_ns);
  }
  // A pipeline stage before the last gathers no logits (seq_ns 0).
  return absl::StrFormat(
      "TP %d collectives: %d all-reduces%s per step = %.4g ns + %.4g ns/token + %.4g "
      "ns/sampled sequence",
      tp, all_reduces_per_step, seq_ns > 0 ? " + 1 logits all-gather" : "", step_ns,
      token_ns, seq_ns);
}

TensorParallelStepModel::TensorParallelStepModel(
    std::shared_ptr<const StepTimeModel> rank_model,
    TensorParallelCollectives collectives)
    : rank_(std::move(rank_model)), c_(collectives) {}

StepCost TensorParallelStepModel::Cost(const StepBatch& batch) const {
  StepCost cost = rank_->Cost(batch);
  int64_t tokens = static_cast<int64_t>(batch.decode_context_lens.size());
  for (const PrefillChunk& p : batch.prefills) tokens += p.num_tokens;
  const double seqs =
      static_cast<double>(batch.decode_context_lens.size() + batch.prefills.size());
  cost.device_ns += static_cast<TimeNs>(std::llround(
      c_.step_ns + c_.token_ns * static_cast<double>(tokens) + c_.seq_ns * seqs));
  return cost;
}

std::string TensorParallelStepModel::Describe() const {
  return absl::StrCat(rank_->Describe(), "; per rank, plus ", c_.Describe());
}

std::vector<std::pair<int32_t, int32_t>> PipelineStageLayers(int32_t num_layers,
                                                             int32_t pp) {
  std::vector<int32_t> parts(static_cast<size_t>(pp), num_layers / pp);
  // get_pp_indices: partitions[-i] += 1 for i in 2 .. remaining + 1.
  const int32_t remaining = num_layers % pp;
  for (int32_t i = 2; i < remaining + 2; ++i) ++parts[static_cast<size_t>(pp - i)];
  std::vector<std::pair<int32_t, int32_t>> out;
  out.reserve(parts.size());
  int32_t begin = 0;
  for (const int32_t n : parts) {
    out.emplace_back(begin, begin + n);
    begin += n;
  }
  return out;
}

ModelArch PipelineStage(const ModelArch& m, int32_t stage, int32_t pp) {
  if (pp <= 1) return m;
  const auto [begin, end] =
      PipelineStageLayers(static_cast<int32_t>(m.layers.size()), pp)[stage];
  ModelArch s = m;
  s.layers.assign(m.layers.begin() + begin, m.layers.begin() + end);
  s.runs_embedding = stage == 0;
  s.runs_lm_head = stage == pp - 1;
  // Gemma 4 builds embed_tokens on every stage (its tied LM head); other
  // models hold it on the first stage, and on the last when it is the tied
  // LM head.
  s.holds_embedding = m.family == "gemma4" || s.runs_embedding ||
                      (s.runs_lm_head && m.tie_word_embeddings);
  return s;
}

int32_t PipelineStageBlockLayers(const ModelArch& m, int32_t layers_per_group,
                                 int32_t stage, int32_t pp) {
  const auto [begin, end] =
      PipelineStageLayers(static_cast<int32_t>(m.layers.size()), pp)[stage];
  // Per attention type (as PlanKvLayout keys it), its KV layers in order,
  // chunked into groups of layers_per_group: count this stage's per group.
  struct Type {
    bool sliding;
    int32_t window;
    int64_t bytes_per_token;
    int32_t seen = 0;
  };
  std::vector<Type> types;
  std::vector<std::pair<size_t, int32_t>> counts;  // (type, group) -> layers here
  std::vector<int32_t> here;
  int32_t most = 0;
  for (int32_t i = 0; i < static_cast<int32_t>(m.layers.size()); ++i) {
    const LayerArch& l = m.layers[static_cast<size_t>(i)];
    if (!l.holds_kv) continue;
    const int64_t bpt = LayerKvBytesPerToken(l, 2);
    auto it = std::find_if(types.begin(), types.end(), [&](const Type& t) {
      return t.sliding == l.sliding && t.window == l.window && t.bytes_per_token == bpt;
    });
    if (it == types.end()) {
      types.push_back({l.sliding, l.window, bpt, 0});
      it = types.end() - 1;
    }
    const std::pair<size_t, int32_t> key{static_cast<size_t>(it - types.begin()),
                                         it->seen / std::max(1, layers_per_group)};
    ++it->seen;
    if (i < begin || i >= end) continue;
    auto c = std::find(counts.begin(), counts.end(), key);
    if (c == counts.end()) {
      counts.push_back(key);
      here.push_back(0);
      c = counts.end() - 1;
    }
    most = std::max(most, ++here[static_cast<size_t>(c - counts.begin())]);
  }
  return most;
}

double PipelineTransferBytesPerToken(const ModelArch& full, int act_bytes) {
  // Gemma 4's layers return no residual: its IntermediateTensors carry the
  // hidden states alone (per_layer_inputs too with PLE, refused with PP).
  const int tensors = full.family == "gemma4" ? 1 : 2;
  return static_cast<double>(tensors) * full.hidden_size * act_bytes;
}

PipelineTransfer CompilePipelineTransfer(const ModelArch& full, int32_t tp,
                                         const CollectiveLink& link, int act_bytes) {
  const double bytes = PipelineTransferBytesPerToken(full, act_bytes);
  PipelineTransfer t;
  // Each TP rank sends bytes / tp; the next stage's TP group all-gathers
  // the rest: (tp - 1) / tp x bytes more, one more latency.
  t.step_ns = (tp > 1 ? 2.0 : 1.0) * link.latency_s * 1e9;
  t.token_ns =
      (bytes / tp + (tp > 1 ? bytes * (tp - 1) / tp : 0.0)) / link.bytes_per_s * 1e9;
  return t;
}

std::vector<double> PipelineFinishTimes(const std::vector<double>& stage_ns,
                                        double transfer_ns,
                                        const std::vector<double>& ready_ns) {
  std::vector<double> free_at(stage_ns.size(), 0.0);
  std::vector<double> finish;
  finish.reserve(ready_ns.size());
  for (const double ready : ready_ns) {
    double t = ready;
    for (size_t s = 0; s < stage_ns.size(); ++s) {
      if (s > 0) t += transfer_ns;
      t = std::max(t, free_at[s]) + stage_ns[s];
      free_at[s] = t;
    }
    finish.push_back(t);
  }
  return finish;
}

PipelineStepModel::PipelineStepModel(
    std::vector<std::shared_ptr<const StepTimeModel>> stages, PipelineTransfer transfer)
    : stages_(std::move(stages)), transfer_(transfer) {}

double PipelineStepModel::TransferNs(const StepBatch& batch) const {
  int64_t tokens = static_cast<int64_t>(batch.decode_context_lens.size());
  for (const PrefillChunk& p : batch.prefills) tokens += p.num_tokens;
  return transfer_.step_ns + transfer_.token_ns * static_cast<double>(tokens);
}

StepCost PipelineStepModel::Cost(const StepBatch& batch) const {
  StepCost out;
  for (size_t s = 0; s < stages_.size(); ++s) {
    const StepCost c = stages_[s]->Cost(batch);
    if (s == 0) out.host_ns = c.host_ns;
    out.device_ns += c.device_ns;
  }
  out.device_ns += static_cast<TimeNs>(
      std::llround(static_cast<double>(stages_.size() - 1) * TransferNs(batch)));
  return out;
}

StepTimeModel::PipelineCost PipelineStepModel::PipelineStageCosts(
    const StepBatch& batch, std::span<TimeNs> stage_device_ns) const {
  SERVESIM_CHECK(stage_device_ns.size() == stages_.size());
  PipelineCost out;
  for (size_t s = 0; s < stages_.size(); ++s) {
    const StepCost c = stages_[s]->Cost(batch);
    if (s == 0) out.host_ns = c.host_ns;
    stage_device_ns[s] = c.device_ns;
  }
  out.transfer_ns = static_cast<TimeNs>(std::llround(TransferNs(batch)));
  return out;
}

std::vector<StepCost> PipelineStepModel::StageCosts(const StepBatch& batch) const {
  std::vector<StepCost> out;
  out.reserve(stages_.size());
  for (const auto& s : stages_) out.push_back(s->Cost(batch));
  return out;
}

std::string PipelineStepModel::Describe() const {
  std::string out = absl::StrCat(
      "pipeline of ", stages_.size(), " stages, up to ", stages_.size(),
      " batches in flight (a batch alone: sum of stages + ", stages_.size() - 1,
      " transfers of ",
      absl::StrFormat("%.4g ns + %.4g ns/token", transfer_.step_ns, transfer_.token_ns),
      ")");
  for (size_t s = 0; s < stages_.size(); ++s) {
    absl::StrAppend(&out, "; stage ", s, ": ", stages_[s]->Describe());
  }
  return out;
}

}  // namespace servesim
