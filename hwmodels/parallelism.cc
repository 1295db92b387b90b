#include "hwmodels/parallelism.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "sim/base/int_math.h"

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
  if (spec.pipeline_parallel_size != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--pipeline-parallel-size: ", spec.pipeline_parallel_size,
                     " is not modelled yet; allowed: 1 (use --tensor-parallel-size)"));
  }
  const int32_t dp = spec.data_parallel_size;
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

double AllToAllBytesPerRank(double tokens, int32_t top_k, int32_t hidden, int act_bytes,
                            int32_t ep) {
  if (ep <= 1) return 0;
  return tokens * top_k * hidden * act_bytes * (ep - 1) / ep;
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

absl::StatusOr<CollectiveLink> TensorParallelLink(const proto::Device& device) {
  const proto::Interconnect& ic = device.interconnect();
  CollectiveLink link;
  link.latency_s = ic.latency_s();
  if (ic.bandwidth_bytes_per_s() > 0) {
    link.bytes_per_s = ic.bandwidth_bytes_per_s() / 2;
    link.description = absl::StrFormat("%s %s, %.4g B/s per direction", ic.kind(),
                                       ic.topology(), link.bytes_per_s);
  } else {
    link.bytes_per_s = ic.host_link_bytes_per_s();
    link.description = absl::StrFormat("%s through the host, %.4g B/s per direction",
                                       ic.kind(), link.bytes_per_s);
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

void AddDataParallelExperts(const ModelArch& full, int32_t dp, int32_t ep,
                            const CollectiveLink& link, int act_bytes,
                            TensorParallelCollectives* c) {
  if (dp <= 1 || ep <= 1 || full.num_experts <= 0) return;
  const int32_t layers = static_cast<int32_t>(full.layers.size());
  c->dp = dp;
  c->dp_expert_collectives_per_step = 2 * layers;
  c->step_ns += 2.0 * layers * link.latency_s * 1e9;
  // Per own token: (dp - 1) / dp of dp x tokens rows, each way.
  c->token_ns += 2.0 * layers * (dp - 1) * static_cast<double>(full.hidden_size) *
                 act_bytes / link.bytes_per_s * 1e9;
}

}  // namespace

TensorParallelCollectives CompileCollectives(const ModelArch& full, int32_t tp,
                                             const CollectiveLink& link, int act_bytes,
                                             int32_t dp, int32_t ep) {
  TensorParallelCollectives c;
  c.tp = tp;
  if (tp <= 1) {
    AddDataParallelExperts(full, dp, ep, link, act_bytes, &c);
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
  n += 1;  // vocab-parallel embedding
  token_bytes += h * act_bytes;
  if (full.per_layer_embedding_dim > 0) {
    n += 1;  // vocab-parallel per-layer embedding table
    token_bytes += layers * full.per_layer_embedding_dim * act_bytes;
  }
  c.all_reduces_per_step = n;
  const double ring = 2.0 * (tp - 1) / tp / link.bytes_per_s;
  c.step_ns = (n + 1) * link.latency_s * 1e9;  // + the logits all-gather
  c.token_ns = token_bytes * ring * 1e9;
  c.seq_ns = static_cast<double>(VocabRowsPerRank(full.vocab_size, tp)) * tp * act_bytes *
             (tp - 1) / tp / link.bytes_per_s * 1e9;
  AddDataParallelExperts(full, dp, ep, link, act_bytes, &c);
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
  return absl::StrFormat(
      "TP %d collectives: %d all-reduces + 1 logits all-gather per step = %.4g ns + "
      "%.4g ns/token + %.4g ns/sampled sequence",
      tp, all_reduces_per_step, step_ns, token_ns, seq_ns);
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

}  // namespace servesim
