#include "hwmodels/model_arch.h"

#include <algorithm>
#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace servesim {
namespace {

absl::Status Bad(const proto::ModelArch& m, const std::string& field,
                 const std::string& what) {
  return absl::InvalidArgumentError(
      absl::StrCat("model '", m.id(), "': field ", field, ": ", what));
}

}  // namespace

absl::StatusOr<ModelArch> ExpandModelArch(const proto::ModelArch& m) {
  if (m.vocab_size() <= 0) return Bad(m, "vocab_size", "must be > 0");
  if (m.hidden_size() <= 0) return Bad(m, "hidden_size", "must be > 0");
  if (m.num_layers() <= 0 || m.num_layers() > 1000)
    return Bad(m, "num_layers", "must be in [1, 1000]");
  if (m.num_q_heads() <= 0) return Bad(m, "num_q_heads", "must be > 0");
  if (m.num_kv_heads_full() <= 0) return Bad(m, "num_kv_heads_full", "must be > 0");
  if (m.head_dim_full() <= 0) return Bad(m, "head_dim_full", "must be > 0");
  if (m.num_kv_shared_layers() < 0 || m.num_kv_shared_layers() >= m.num_layers())
    return Bad(m, "num_kv_shared_layers", "must be in [0, num_layers)");
  if (!m.layer_pattern().empty() &&
      static_cast<int>(m.layer_pattern().size()) != m.num_layers())
    return Bad(m, "layer_pattern",
               absl::StrCat("has ", m.layer_pattern().size(), " entries, num_layers is ",
                            m.num_layers()));
  if (m.num_experts() < 0 || m.experts_top_k() < 0 || m.experts_top_k() > m.num_experts())
    return Bad(m, "experts_top_k", "must be in [0, num_experts]");
  if (m.first_k_dense_layers() < 0 || m.first_k_dense_layers() > m.num_layers())
    return Bad(m, "first_k_dense_layers", "must be in [0, num_layers]");
  if (m.kv_lora_rank() < 0) return Bad(m, "kv_lora_rank", "must be >= 0");
  if (m.kv_lora_rank() > 0) {
    if (m.qk_rope_head_dim() <= 0 || m.qk_nope_head_dim() <= 0 || m.v_head_dim() <= 0 ||
        m.q_lora_rank() < 0)
      return Bad(m, "qk_rope_head_dim/qk_nope_head_dim/v_head_dim",
                 "must be > 0 with kv_lora_rank (MLA), q_lora_rank >= 0");
    if (m.sliding_window() > 0 || m.num_kv_shared_layers() > 0)
      return Bad(m, "kv_lora_rank",
                 "MLA with sliding-window or KV-shared layers is not modelled");
  }

  ModelArch a;
  a.id = m.id();
  a.display_name = m.display_name().empty() ? m.id() : m.display_name();
  a.family = m.family();
  a.vocab_size = m.vocab_size();
  a.hidden_size = m.hidden_size();
  a.per_layer_embedding_dim = m.per_layer_embedding_dim();
  a.num_experts = m.num_experts();
  a.experts_top_k = m.experts_top_k();
  a.expert_intermediate_size = m.expert_intermediate_size();
  a.tie_word_embeddings = m.tie_word_embeddings();
  a.max_position_embeddings = m.max_position_embeddings();
  a.vision_encoder_params = m.vision_encoder_params();
  a.audio_encoder_params = m.audio_encoder_params();
  a.kv_lora_rank = m.kv_lora_rank();
  a.q_lora_rank = m.q_lora_rank();
  a.qk_nope_head_dim = m.qk_nope_head_dim();
  a.qk_rope_head_dim = m.qk_rope_head_dim();
  a.v_head_dim = m.v_head_dim();
  a.source = m;

  std::vector<int32_t> ffn;
  for (const auto& run : m.ffn_runs()) {
    if (run.count() <= 0 || run.intermediate_size() < 0)
      return Bad(m, "ffn_runs", "count must be > 0 and intermediate_size >= 0");
    for (int i = 0; i < run.count(); ++i) ffn.push_back(run.intermediate_size());
  }
  if (static_cast<int>(ffn.size()) != m.num_layers())
    return Bad(
        m, "ffn_runs",
        absl::StrCat("counts sum to ", ffn.size(), ", num_layers is ", m.num_layers()));

  const int first_shared = m.num_layers() - m.num_kv_shared_layers();
  for (int i = 0; i < m.num_layers(); ++i) {
    LayerArch l;
    bool sliding;
    if (!m.layer_pattern().empty()) {
      const char c = m.layer_pattern()[i];
      if (c != 'S' && c != 'F')
        return Bad(
            m, "layer_pattern",
            absl::StrCat("entry ", i, " is '", std::string(1, c), "', allowed: S, F"));
      sliding = c == 'S';
    } else {
      sliding = m.sliding_pattern() > 1 && (i + 1) % m.sliding_pattern() != 0;
    }
    if (sliding && m.sliding_window() <= 0) sliding = false;
    l.sliding = sliding;
    l.window = sliding ? m.sliding_window() : 0;
    l.num_q_heads = m.num_q_heads();
    l.num_kv_heads = sliding ? m.num_kv_heads_sliding() : m.num_kv_heads_full();
    l.head_dim = sliding ? m.head_dim_sliding() : m.head_dim_full();
    if (l.num_kv_heads <= 0 || l.head_dim <= 0)
      return Bad(m,
                 sliding ? "num_kv_heads_sliding/head_dim_sliding" : "num_kv_heads_full",
                 "must be > 0 for the layers of that type");
    l.k_eq_v = !sliding && m.full_attention_k_eq_v();
    l.intermediate_size = ffn[i];
    l.holds_kv = i < first_shared;
    l.moe = m.num_experts() > 0 && i >= m.first_k_dense_layers();
    if (m.kv_lora_rank() > 0) {
      l.mla = true;
      l.num_kv_heads = 1;
      l.head_dim = m.kv_lora_rank() + m.qk_rope_head_dim();
    }
    a.layers.push_back(l);
  }
  return a;
}

double ParamCounts::Text() const {
  return embedding + per_layer_embedding + per_layer_projection + attention + dense_ffn +
         experts + router + lm_head_untied;
}

ParamCounts CountParams(const ModelArch& m) {
  ParamCounts c;
  const double h = m.hidden_size;
  const double nl = static_cast<double>(m.layers.size());
  c.embedding = static_cast<double>(m.EmbeddingRows()) * h;
  if (m.per_layer_embedding_dim > 0) {
    const double ple = m.per_layer_embedding_dim;
    c.per_layer_embedding = static_cast<double>(m.EmbeddingRows()) * nl * ple;
    // Model-level projection hidden -> layers x ple, and per layer a gate
    // (hidden -> ple) and a projection (ple -> hidden).
    c.per_layer_projection = h * nl * ple + nl * 2 * h * ple;
  }
  for (const LayerArch& l : m.layers) {
    if (l.mla) {
      // q_a (h -> q_lora_rank) and kv_a (h -> kv_lora_rank + rope) are
      // replicated; q_b / q_proj, kv_b and o are split by heads.
      const double heads = l.num_q_heads;
      const double qk = m.qk_nope_head_dim + m.qk_rope_head_dim;
      const double qlr = m.q_lora_rank;
      c.attention += qlr > 0 ? h * qlr + qlr * heads * qk : h * heads * qk;
      c.attention += h * (m.kv_lora_rank + m.qk_rope_head_dim);
      c.attention += static_cast<double>(m.kv_lora_rank) * heads *
                     (m.qk_nope_head_dim + m.v_head_dim);
      c.attention += heads * m.v_head_dim * h;
    } else {
      const double q = static_cast<double>(l.num_q_heads) * l.head_dim;
      const double kv = static_cast<double>(l.num_kv_heads) * l.head_dim;
      c.attention += h * q * 2 + h * kv * (l.k_eq_v ? 1 : 2);
    }
    c.dense_ffn += 3 * h * l.intermediate_size;
    if (l.moe) {
      c.experts +=
          static_cast<double>(m.LocalExperts()) * 3 * h * m.expert_intermediate_size;
      c.router += h * m.num_experts;
    }
  }
  if (!m.tie_word_embeddings) c.lm_head_untied = c.embedding;
  c.vision = static_cast<double>(m.vision_encoder_params);
  c.audio = static_cast<double>(m.audio_encoder_params);
  return c;
}

absl::StatusOr<WeightFormat> ResolveWeightFormat(const std::string& name_in) {
  const std::string name = absl::AsciiStrToLower(name_in);
  WeightFormat f;
  if (name == "none" || name.empty() || name == "bf16" || name == "fp16") {
    f.id = "none";
    f.weight_bits = 16;
    f.kernel = "dense";
    f.description = "16-bit weights (the model dtype)";
  } else if (name == "fp8") {
    f.id = "fp8";
    f.weight_bits = 8;
    f.group_size = 0;
    f.scale_bytes = 4;
    f.compute = "fp8";
    f.kernel = "fp8";
    f.description =
        "fp8 weights, per-channel fp32 scales; fp8 GEMM where the device has it";
  } else if (name == "w8a8" || name == "int8") {
    f.id = "w8a8";
    f.weight_bits = 8;
    f.group_size = 0;
    f.scale_bytes = 4;
    f.compute = "int8";
    f.kernel = "int8";
    f.description = "int8 weights and activations, per-channel fp32 scales";
  } else if (name == "w4a16" || name == "w4a16-emb4") {
    f.id = name;
    f.weight_bits = 4;
    // Modelled as one 16-bit scale per output channel: reproduces the
    // measured 12B load (7.36 GiB) within 1%; group-128 scales would add
    // 0.125 bit per weight (+2.3%).
    f.group_size = 0;
    f.scale_bytes = 2;
    f.compute = "16";
    f.kernel = "marlin";
    f.quantize_embeddings = name == "w4a16-emb4";
    f.lm_head_16bit = true;
    f.moe_dense_16bit = true;
    f.description =
        f.quantize_embeddings
            ? "4-bit weights and 4-bit embeddings (LM head kept 16-bit), 16-bit "
              "activations (compressed-tensors, Marlin kernel)"
            : "4-bit weights, 16-bit activations (compressed-tensors, Marlin kernel)";
  } else if (name == "mxfp4") {
    // OCP MX fp4 as gpt-oss ships it: only the MoE experts are quantized
    // (4-bit e2m1 values, one e8m0 scale byte per 32 inputs, bf16 biases);
    // attention, router, embeddings and LM head stay bf16. vLLM's
    // Mxfp4Config quantizes FusedMoE layers only (linear layers fall back to
    // UnquantizedLinearMethod) and dequantizes in the kernel (bf16
    // activations).
    f.id = "mxfp4";
    f.weight_bits = 16;
    f.compute = "16";
    f.kernel = "dense";
    f.expert_weight_bits = 4;
    f.expert_block = 32;
    f.expert_scale_bytes = 1;
    f.expert_bias = true;
    f.description =
        "MoE experts in mxfp4 (4-bit e2m1, one e8m0 scale per 32 values), the rest "
        "bf16";
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("--quantization: unknown value '", name_in,
                     "'; allowed: none, fp8, w8a8, w4a16, w4a16-emb4, mxfp4"));
  }
  return f;
}

void ApplyDeviceKernelRules(const proto::Device& device, WeightFormat* f) {
  if (f->expert_weight_bits <= 0) return;
  const std::string& arch = device.architecture();
  if (device.vendor() == "nvidia" && (arch == "ampere" || arch == "ada")) {
    // Marlin MoE: n % 256 == 0 and k % 128 == 0 for both GEMMs.
    f->expert_pad_intermediate = 128;
    f->expert_pad_hidden = 256;
    f->kernel = "marlin";
  } else if (device.vendor() == "nvidia" && arch == "blackwell") {
    f->expert_pad_intermediate = 256;  // FlashInfer SM100 MXFP4 BF16
    f->expert_pad_hidden = 256;
  } else {
    // Hopper (triton_kernels) pads the intermediate size to 64; ROCm's
    // alignment (get_padding_alignment) is not modelled.
    f->expert_pad_intermediate = 64;
    f->expert_pad_hidden = 0;
  }
}

double LinearBytes(const WeightFormat& f, double params, double in_dim, int dtype_bytes) {
  if (f.weight_bits >= 16) return params * dtype_bytes;
  double bytes = params * f.weight_bits / 8.0;
  // One scale per group of group_size inputs, or per output channel.
  const double groups_per_row = f.group_size > 0 ? std::ceil(in_dim / f.group_size) : 1.0;
  bytes += params / in_dim * groups_per_row * f.scale_bytes;
  return bytes;
}

double ExpertBytesInExpertFormat(const ModelArch& m, const WeightFormat& f) {
  // w13 (2 x I' rows of H' inputs) and w2 (H' rows of I' inputs), each with
  // one scale per block of inputs and a 16-bit bias per row; I', H' padded.
  auto pad = [](int64_t v, int32_t to) { return to > 0 ? (v + to - 1) / to * to : v; };
  const double ip =
      static_cast<double>(pad(m.expert_intermediate_size, f.expert_pad_intermediate));
  const double hp = static_cast<double>(pad(m.hidden_size, f.expert_pad_hidden));
  const double bits = f.expert_weight_bits / 8.0;
  const double blk = f.expert_block;
  const double bias = f.expert_bias ? 2.0 : 0.0;
  return 2 * ip * (hp * bits + std::ceil(hp / blk) * f.expert_scale_bytes + bias) +
         hp * (ip * bits + std::ceil(ip / blk) * f.expert_scale_bytes + bias);
}

WeightBytes ComputeWeightBytes(const ModelArch& m, const WeightFormat& f,
                               int dtype_bytes) {
  const ParamCounts c = CountParams(m);
  const double h = m.hidden_size;
  WeightBytes w;
  w.linear = LinearBytes(f, c.attention, h, dtype_bytes) +
             LinearBytes(f, c.per_layer_projection, h, dtype_bytes);
  if (m.num_experts > 0 && f.expert_weight_bits > 0) {
    double moe_layers = 0;
    for (const LayerArch& l : m.layers) moe_layers += l.moe ? 1 : 0;
    w.experts = moe_layers * m.num_experts * ExpertBytesInExpertFormat(m, f);
    w.linear += (c.dense_ffn + c.router) * dtype_bytes;
  } else if (m.num_experts > 0) {
    w.experts = LinearBytes(f, c.experts, h, dtype_bytes);
    const WeightFormat& dense_fmt = f;
    if (f.moe_dense_16bit) {
      w.linear += (c.dense_ffn + c.router) * dtype_bytes;
    } else {
      w.linear += LinearBytes(dense_fmt, c.dense_ffn + c.router, h, dtype_bytes);
    }
  } else {
    w.linear += LinearBytes(f, c.dense_ffn, h, dtype_bytes);
  }
  if (f.quantize_embeddings && f.weight_bits < 16) {
    // Row-wise scales: one per token row (per layer row for the PLE table).
    w.embedding = c.embedding * f.weight_bits / 8.0 + m.EmbeddingRows() * f.scale_bytes;
    w.per_layer_embedding = c.per_layer_embedding * f.weight_bits / 8.0;
    w.lm_head = f.lm_head_16bit ? c.embedding * dtype_bytes
                                : LinearBytes(f, c.embedding, h, dtype_bytes);
  } else {
    w.embedding = c.embedding * dtype_bytes;
    w.per_layer_embedding = c.per_layer_embedding * dtype_bytes;
    w.lm_head = m.tie_word_embeddings ? 0.0 : c.embedding * dtype_bytes;
  }
  // Encoders stay 16-bit in the quantized checkpoints.
  w.encoders = (c.vision + c.audio) * dtype_bytes;
  // A pipeline stage holds only what its role needs (PipelineStage).
  if (!m.holds_embedding) {
    w.embedding = 0;
    w.per_layer_embedding = 0;
  }
  if (!m.runs_lm_head) w.lm_head = 0;
  if (!m.runs_embedding) w.encoders = 0;
  return w;
}

int64_t KvBytesPerToken(const ModelArch& m, int kv_dtype_bytes) {
  int64_t total = 0;
  for (const LayerArch& l : m.layers) {
    if (!l.holds_kv) continue;
    total += LayerKvBytesPerToken(l, kv_dtype_bytes);
  }
  return total;
}

}  // namespace servesim
