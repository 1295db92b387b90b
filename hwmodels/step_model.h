// The roofline step-time model.
//
// CompiledStepGraph: one engine step as an operator DAG (Boost.Graph):
// embeddings, per layer QKV projection, attention (decode and prefill
// parts, over the layer's window or full context), output projection, FFN
// or routed experts, then LM head and sampling. Each operator's FLOPs and
// bytes are linear in a few batch aggregates (BatchAggregates). Built once
// per (model, device, format, dtype); immutable, thread-safe.
//
// RooflineStepModel: the graph compiled against one ParameterSet into a
// compact formula: piecewise-linear functions of the token and sequence
// counts (weight GEMMs, LM head, sampling), linear terms (decode attention)
// and a few explicit max() terms (prefill attention, experts). Each
// operator costs max(flops / (peak x eff), bytes / (bandwidth x eff)) with
// eff <= 1, so no step beats the device's peak FLOP/s or bandwidth.
// Cost() is O(batch) with no allocation.
#ifndef SERVESIM_HWMODELS_STEP_MODEL_H_
#define SERVESIM_HWMODELS_STEP_MODEL_H_

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "hwmodels/model_arch.h"
#include "hwmodels/params.h"
#include "proto/hwmodels.pb.h"
#include "sim/step_time_model.h"

namespace servesim {

// Batch aggregates the operator costs are linear in.
enum Agg : int {
  kAggOne = 0,              // 1 per step
  kAggTokens,               // tokens computed (prefill chunk tokens + decodes)
  kAggSeqs,                 // sequences sampled (decodes + prefill chunks)
  kAggDecCtxFull,           // sum over decodes of (context + 1)
  kAggDecCtxSliding,        // sum over decodes of min(context + 1, window)
  kAggPrefillPairsFull,     // (query, key) pairs of prefill chunks, full attention
  kAggPrefillPairsSliding,  // same within the sliding window
  kAggPrefillKvFull,        // KV tokens a prefill chunk reads: computed_before + chunk
  kAggPrefillKvSliding,     // min(computed_before + chunk, window + chunk)
  kAggExpertsTouched,       // expected distinct experts per MoE layer
  kNumAggs
};
using AggVector = std::array<double, kNumAggs>;

struct BatchAggregates {
  AggVector v{};
  int32_t num_decodes = 0;
  int32_t num_prefills = 0;
};

// O(batch). `window` 0: the model has no sliding layers.
BatchAggregates ComputeAggregates(const StepBatch& batch, int32_t window,
                                  int32_t num_experts, int32_t top_k);

enum class OpClass {
  kGemm,       // weight-streaming matrix multiply (GEMM/GEMV)
  kAttention,  // attention over the KV cache
  kMemory,     // lookups, element-wise, sampling
};

// One operator (possibly standing for `count` identical layers).
struct Operator {
  std::string name;  // "layer[0-3].sliding.ffn", "lm_head", ...
  OpClass op_class = OpClass::kGemm;
  bool quantized = false;  // runs the quantized-format kernel
  double count = 1;        // identical instances (layers)
  AggVector flops{};       // per instance, per unit of each aggregate
  AggVector bytes{};
  // Decode attention only: bytes one (sequence, KV head) work unit streams
  // per context token (K and V of one head), and the KV heads per layer.
  // While sequences x KV heads are fewer than the device's parallel units
  // and the kernel does not split the KV, the op cannot use the whole
  // bandwidth: see attn_unit_gbs in StepParameterTable().
  double unit_bytes_per_ctx = 0;
  double kv_heads = 0;
  // Weight GEMMs only: the kernels the operator stands for (a fused QKV is
  // one, the FFN two: gate_up and down), each as (share of the operator's
  // FLOPs, weight-matrix elements N x K). The shape factor of
  // gemm_w_half (StepParameterTable()) reads them; empty: no shape factor.
  std::vector<std::pair<double, double>> gemm_kernels;
};

class CompiledStepGraph {
 public:
  // InvalidArgument when the device lacks the dtype (bf16 on t4).
  static absl::StatusOr<std::shared_ptr<const CompiledStepGraph>> Build(
      const servesim::proto::Device& device, const ModelArch& model,
      const WeightFormat& format, const std::string& dtype, int kv_dtype_bytes = 2);

  // Merged operators (identical layers folded into `count`).
  const std::vector<Operator>& ops() const { return ops_; }
  // Per-layer operator names in a topological order of the DAG.
  const std::vector<std::string>& topological_order() const { return topo_; }
  int num_graph_vertices() const { return static_cast<int>(topo_.size()); }

  double peak_flops_16() const { return peak_flops_16_; }
  double peak_flops_quant() const { return peak_flops_quant_; }
  double bandwidth() const { return bandwidth_; }
  int32_t window() const { return window_; }
  int32_t num_experts() const { return num_experts_; }
  int32_t top_k() const { return top_k_; }
  int32_t num_layers() const { return num_layers_; }
  int32_t num_moe_layers() const { return num_moe_layers_; }
  bool graph_capture() const { return graph_capture_; }
  int32_t max_graph_capture_size() const { return max_capture_; }
  // Parallel units the device spreads a GEMM's output tiles over (SMs,
  // CUs, TensorCores; the device file's compute_units, at least 1).
  double compute_units() const { return compute_units_; }
  const std::string& description() const { return description_; }

  // Total FLOPs and bytes of a batch (for roofline bound checks).
  double TotalFlops(const BatchAggregates& a) const;
  double TotalBytes(const BatchAggregates& a) const;

 private:
  CompiledStepGraph() = default;
  std::vector<Operator> ops_;
  std::vector<std::string> topo_;
  double peak_flops_16_ = 0, peak_flops_quant_ = 0, bandwidth_ = 0;
  int32_t window_ = 0, num_experts_ = 0, top_k_ = 0, num_layers_ = 0, num_moe_layers_ = 0;
  bool graph_capture_ = false;
  int32_t max_capture_ = 0;
  double compute_units_ = 1;
  std::string description_;
};

// Which deployments a step parameter exists for.
enum class StepParameterWhen {
  kAlways,
  kQuantized,       // weight formats below 16 bits (key "<name>.<kernel>")
  kPositive,        // where its prior (device file, else default) is > 0
  kWithUnitGbs,     // with attn_unit_gbs
  kDeviceFileSets,  // where the device file sets it
  kMoe,             // models with routed experts
};

// One parameter RooflineStepModel reads: the one place its default,
// bounds, prior sigma, unit and meaning are written. Both
// PriorStepParameters (the prior set) and RooflineStepModel::Compile (the
// value of a parameter missing from the set) read it.
struct StepParameterSpec {
  const char* name;
  // The prior where the device file does not set the key; for kPositive
  // entries 0 means off (the parameter is then not in the set).
  double default_value;
  double lower;
  double upper;  // +inf: the device's bandwidth in GB/s (attn_unit_gbs)
  // prior sigma = max(sigma_rel x prior, sigma_abs), or sigma_abs when
  // sigma_rel is 0; a sigma of 0: no prior (not fitted).
  double sigma_rel;
  double sigma_abs;
  const char* unit;
  const char* meaning;
  StepParameterWhen when;
};

// Every step parameter, in the order PriorStepParameters lists them.
std::span<const StepParameterSpec> StepParameterTable();

// The table entry named `name`; nullptr if none.
const StepParameterSpec* FindStepParameter(std::string_view name);

// The parameters RooflineStepModel reads (names of ParameterSet entries)
// for this deployment, in StepParameterTable() order. Priors come from the
// device file (param_priors), else the table's defaults.
ParameterSet PriorStepParameters(const servesim::proto::Device& device,
                                 const ModelArch& model, const WeightFormat& format);

class RooflineStepModel final : public StepTimeModel {
 public:
  // Missing parameters take their StepParameterTable() default (not a
  // device file's prior); efficiencies are clamped to
  // [1e-3, 1], times to >= 0. Cost: O(number of operators x log).
  static std::shared_ptr<const RooflineStepModel> Compile(
      std::shared_ptr<const CompiledStepGraph> graph, const ParameterSet& params);

  StepCost Cost(const StepBatch& batch) const override;
  std::string Describe() const override;

  // Same as Cost() but walking every operator (slow reference for tests).
  StepCost CostByWalk(const StepBatch& batch) const;
  const CompiledStepGraph& graph() const { return *graph_; }

 private:
  struct Segment {
    double start;      // segment applies for x >= start
    double intercept;  // ns
    double slope;      // ns per unit x
  };
  // max(compute side, memory side), each a sparse dot product with the
  // aggregates (ns per unit).
  struct MaxTerm {
    int num_f = 0, num_b = 0;
    int rows_idx = -1;  // a GEMM: flops side x RowsScale(v[rows_idx]); -1: none
    std::array<uint8_t, kNumAggs> f_idx{}, b_idx{};
    std::array<double, kNumAggs> f_coef{}, b_coef{};
  };
  RooflineStepModel() = default;
  static double EvalPwl(const std::vector<Segment>& segs, double x);
  double OpNs(const Operator& op, const AggVector& v) const;
  // 1 / (GEMM FLOP efficiency at `rows` relative to flops_eff_gemm):
  // max(1, (gemm_rows_sat / max(rows, gemm_rows_floor))^gemm_rows_exp); 1
  // when the exponent is 0.
  double RowsScale(double rows) const;
  // 1 / (GEMM FLOP efficiency from the operator's shape relative to
  // flops_eff_gemm): sum over its kernels of share x (1 + gemm_w_half / w),
  // w = N x K / compute units; 1 when gemm_w_half is 0 or the op has no
  // kernel shapes.
  double ShapeScale(const Operator& op) const;
  // The aggregate a GEMM's rows are counted in: sequences for an operator
  // with flops per sequence only (LM head), tokens otherwise.
  static int GemmRowsIdx(const Operator& op);
  // Sum of the gemm_lines_ on aggregate rows_idx at x rows, scale =
  // RowsScale(x) (tabulated up to 1,024 rows).
  double GemmLinesNs(int rows_idx, double x, double scale) const;
  // The per-work-unit bandwidth bound of a decode attention op (0 if none).
  double UnitNs(const Operator& op, const AggVector& v, int32_t num_decodes) const;
  double OverheadNs(const BatchAggregates& a, double* host_ns) const;
  // TPU static shapes: tokens and sequences up to their padding buckets
  // (pad_tokens_min, pad_seqs_min; no-op when both are 0).
  void Pad(BatchAggregates* a) const;

  std::shared_ptr<const CompiledStepGraph> graph_;
  ParameterSet params_;
  int32_t window_ = 0, num_experts_ = 0;
  double k_log_miss_ = 0;
  // Compiled formula.
  std::vector<Segment> pwl_tokens_;  // ops depending on (1, tokens) only
  std::vector<Segment> pwl_seqs_;    // ops depending on (1, seqs) only
  AggVector linear_{};               // ops with flops and bytes on one same aggregate
  int num_linear_ = 0;               // linear_ compacted to its non-zero entries
  std::array<uint8_t, kNumAggs> linear_idx_{};
  std::array<double, kNumAggs> linear_coef_{};
  std::vector<MaxTerm> max_terms_;  // the rest
  // GEMMs on (1, rows) when gemm_rows_exp > 0 (not piecewise linear then):
  // max((f0 + f1 x) x RowsScale(x), b0 + b1 x), x = v[rows_idx].
  struct GemmLine {
    int rows_idx;
    double f0, f1, b0, b1;
  };
  std::vector<GemmLine> gemm_lines_;
  std::vector<double> rows_scale_;  // RowsScale(i) for i < min(gemm_rows_sat, 1025)
  std::vector<double> gemm_tokens_ns_, gemm_seqs_ns_;  // GemmLinesNs at 0..1024 rows
  // Decode attention with a per-work-unit bandwidth limit:
  // max(coef x v[idx], unit_coef x v[idx] / min(decodes, unit_cap)).
  struct UnitTerm {
    int idx;
    double coef, unit_coef, unit_cap;
  };
  std::vector<UnitTerm> unit_terms_;
  // Per-op efficiencies resolved (for CostByWalk).
  double eff_bw_w_ = 1, eff_fl_w_ = 1, eff_bw_a_ = 1, eff_fl_a_ = 1, quant_eff_ = 1;
  double attn_unit_bw_ = 0, attn_units_ = 1;  // bytes/s per work unit (0: off); units
  // Overheads (ns).
  double host_step_ns_ = 0, host_seq_ns_ = 0, host_token_ns_ = 0;
  double gemm_exp_ = 0, gemm_sat_ = 16384, gemm_floor_ = 512;
  double gemm_w_half_ = 0;  // weight elements per compute unit (0: no shape factor)
  double device_step_ns_ = 0, launch_ns_ = 0, moe_routing_ns_ = 0;
  double pad_tokens_min_ = 0, pad_seqs_min_ = 0;
  double eager_kernels_full_graph_ = 0, eager_kernels_piecewise_ = 0;
};

}  // namespace servesim

#endif  // SERVESIM_HWMODELS_STEP_MODEL_H_
