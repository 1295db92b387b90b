// Model architectures expanded to one entry per decoder layer, weight
// formats (quantization), and the parameter / byte counts derived from them.
// Built once per deployment; plain values, thread-compatible.
#ifndef SERVESIM_HWMODELS_MODEL_ARCH_H_
#define SERVESIM_HWMODELS_MODEL_ARCH_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/hwmodels.pb.h"

namespace servesim {

struct LayerArch {
  bool sliding = false;  // sliding-window attention (else full)
  int32_t window = 0;    // tokens; 0 for full attention
  int32_t num_q_heads = 0;
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;
  bool k_eq_v = false;            // one projection for K and V (no v_proj)
  int32_t intermediate_size = 0;  // dense gated MLP width (0: none)
  // Holds its own KV cache; false for KV-shared layers.
  bool holds_kv = true;
  // Has the routed experts (MoE models; false for DeepSeek's first dense
  // layers).
  bool moe = false;
  // Multi-head latent attention: the cache entry is one latent "head" of
  // head_dim = kv_lora_rank + qk_rope_head_dim values (num_kv_heads 1, no
  // separate V), so LayerKvBytesPerToken counts it once, not twice.
  bool mla = false;
};

// KV cache bytes one token takes in one layer: 2 (K and V) x kv heads x
// head dim x dtype bytes; MLA: head_dim x dtype bytes (the latent alone).
inline int64_t LayerKvBytesPerToken(const LayerArch& l, int kv_dtype_bytes) {
  return int64_t{l.mla ? 1 : 2} * l.num_kv_heads * l.head_dim * kv_dtype_bytes;
}

struct ModelArch {
  std::string id;
  std::string display_name;
  std::string family;
  int64_t vocab_size = 0;
  // Embedding / LM-head / per-layer-embedding rows this model holds: 0 for
  // the whole vocab; set by TensorParallelRank (hwmodels/parallelism.h) to
  // one rank's vocab shard. EmbeddingRows() reads it.
  int64_t vocab_rows_per_rank = 0;
  int64_t EmbeddingRows() const {
    return vocab_rows_per_rank > 0 ? vocab_rows_per_rank : vocab_size;
  }
  int32_t hidden_size = 0;
  std::vector<LayerArch> layers;
  int32_t per_layer_embedding_dim = 0;
  int32_t num_experts = 0;  // 0: dense
  int32_t experts_top_k = 0;
  int32_t expert_intermediate_size = 0;
  // Routed experts this model holds: 0 for all num_experts; set by
  // TensorParallelRank (hwmodels/parallelism.h) under expert parallelism to
  // the most any rank holds. Routing (num_experts, top_k) stays global.
  int32_t experts_per_rank = 0;
  int32_t LocalExperts() const {
    return experts_per_rank > 0 ? experts_per_rank : num_experts;
  }
  // DP attention + EP experts (DP > 1): the DP ranks whose tokens reach
  // this rank's experts, each taken to bring as many as this rank's own
  // batch (set by TensorParallelRank; 1 otherwise).
  int32_t expert_token_sources = 1;
  bool tie_word_embeddings = true;
  // Pipeline parallelism (hwmodels/parallelism.h PipelineStage): the role
  // of the stage this model is; all true for a whole model (PP 1).
  bool runs_embedding = true;   // first stage: embedding lookup (and encoders)
  bool runs_lm_head = true;     // last stage: LM head and sampling
  bool holds_embedding = true;  // the embedding table is in this stage's memory
  int64_t max_position_embeddings = 0;
  int64_t vision_encoder_params = 0;
  int64_t audio_encoder_params = 0;
  // MLA projection sizes (0 without MLA): q_a / kv_a are replicated on
  // every TP rank, q_b / kv_b / o split by heads.
  int32_t kv_lora_rank = 0;
  int32_t q_lora_rank = 0;
  int32_t qk_nope_head_dim = 0;
  int32_t qk_rope_head_dim = 0;
  int32_t v_head_dim = 0;
  servesim::proto::ModelArch source;  // the description it was expanded from
};

// Expands and validates a description (error names the field and value).
absl::StatusOr<ModelArch> ExpandModelArch(const servesim::proto::ModelArch& m);

// Parameter counts by tensor group (counts, not bytes).
struct ParamCounts {
  double embedding = 0;             // vocab x hidden (shared with the LM head when tied)
  double per_layer_embedding = 0;   // PLE table (looked up, not streamed)
  double per_layer_projection = 0;  // PLE projections (streamed linear)
  double attention = 0;             // q, k, v, o projections
  double dense_ffn = 0;             // gated MLP (dense models; MoE's dense branch)
  double experts = 0;               // all routed experts
  double router = 0;
  double lm_head_untied = 0;  // only when not tied
  double vision = 0;
  double audio = 0;
  double Text() const;  // everything but the encoders
  double Total() const { return Text() + vision + audio; }
};
ParamCounts CountParams(const ModelArch& m);

// A weight format (vLLM --quantization plus checkpoint conventions).
struct WeightFormat {
  std::string id;            // none | fp8 | w8a8 | w4a16 | w4a16-emb4 | mxfp4
  int32_t weight_bits = 16;  // linear layers
  int32_t group_size =
      0;  // scale group along the input dim; 0: one scale per output channel
  int32_t scale_bytes = 2;
  bool quantize_embeddings =
      false;  // token embedding (and PLE table) stored at weight_bits
  // When the embedding is quantized the LM head (tied) is kept as a
  // separate 16-bit tensor (compressed-tensors ignores lm_head).
  bool lm_head_16bit = true;
  // MoE: router and the dense (shared) MLP branch stay 16-bit.
  bool moe_dense_16bit = true;
  // GEMM compute precision: "16" (fp16/bf16 tensor cores; W4A16 dequantises
  // in the kernel), "fp8", "int8".
  std::string compute = "16";
  std::string kernel;  // "dense", "marlin", "fp8", "int8"
  std::string description;
  // Formats that quantize only the MoE experts (mxfp4: 4-bit e2m1 values,
  // one e8m0 byte scale per 32 inputs, bf16 biases; everything else at the
  // model dtype, weight_bits 16). 0: the experts follow weight_bits.
  int32_t expert_weight_bits = 0;
  int32_t expert_block = 0;
  int32_t expert_scale_bytes = 0;
  bool expert_bias = false;
  // The MoE kernel pads each expert's intermediate (per rank) and hidden
  // dims up to these multiples (0: none); set per device by
  // ApplyDeviceKernelRules.
  int32_t expert_pad_intermediate = 0;
  int32_t expert_pad_hidden = 0;
};
// Errors name --quantization and the allowed values.
absl::StatusOr<WeightFormat> ResolveWeightFormat(const std::string& name);

// Which kernel the device's vLLM build runs the format with, and its
// padding (mxfp4: Marlin on Ampere/Ada pads intermediate to 128 and hidden
// to 256; Hopper's triton_kernels pad intermediate to 64; Blackwell's
// FlashInfer pads both to 256: vLLM's Mxfp4MoEMethod.create_weights).
void ApplyDeviceKernelRules(const proto::Device& device, WeightFormat* f);

// Bytes of a linear layer of `params` weights with `in_dim` inputs.
double LinearBytes(const WeightFormat& f, double params, double in_dim, int dtype_bytes);

// Bytes of one MoE expert (w13 and w2) of `m` in the format's expert
// encoding (f.expert_weight_bits > 0: mxfp4), as vLLM allocates it: the
// dimensions padded for the kernel, one scale per block of inputs and a
// 16-bit bias per row. The memory plan and the step graph both read it.
double ExpertBytesInExpertFormat(const ModelArch& m, const WeightFormat& f);

struct WeightBytes {
  double linear = 0;     // attention + dense FFN + PLE projections + router
  double experts = 0;    // all experts
  double embedding = 0;  // token embedding table
  double per_layer_embedding = 0;
  double lm_head = 0;   // separate LM head tensor (0 when it is the embedding)
  double encoders = 0;  // vision + audio
  double Total() const {
    return linear + experts + embedding + per_layer_embedding + lm_head + encoders;
  }
};
WeightBytes ComputeWeightBytes(const ModelArch& m, const WeightFormat& f,
                               int dtype_bytes);

// KV bytes per token summed over the layers that hold KV (16-bit: the
// figure in hardware-and-models.md).
int64_t KvBytesPerToken(const ModelArch& m, int kv_dtype_bytes);

}  // namespace servesim

#endif  // SERVESIM_HWMODELS_MODEL_ARCH_H_
