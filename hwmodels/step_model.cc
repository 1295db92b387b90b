#include "hwmodels/step_model.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <map>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace servesim {
namespace {

// Kernels per decoder layer when nothing is graph-captured (norms, QKV,
// rope, attention, O, residual, gate/up, activation, down, ...).
constexpr double kKernelsPerLayer = 12;

// Sum over query positions p = c+1 .. c+n of min(p, w).
double SlidingPairs(int64_t c, int64_t n, int64_t w) {
  const int64_t lo = c + 1, hi = c + n;
  if (hi <= w) return static_cast<double>(lo + hi) * static_cast<double>(n) / 2.0;
  if (lo >= w) return static_cast<double>(n) * static_cast<double>(w);
  const int64_t m = w - lo + 1;
  return static_cast<double>(lo + w) * static_cast<double>(m) / 2.0 +
         static_cast<double>(hi - w) * static_cast<double>(w);
}

}  // namespace

namespace {

// k_log_miss = top_k x log(1 - 1 / num_experts): precomputed per model.
inline BatchAggregates Aggregates(const StepBatch& batch, int32_t window,
                                  int32_t num_experts, double k_log_miss) {
  BatchAggregates a;
  AggVector& v = a.v;
  v[kAggOne] = 1;
  // Integer sums (vectorise well): sum of (c + 1) and of min(c + 1, w).
  int64_t sum_ctx = 0, sum_ctx_capped = 0;
  const int32_t cap = window > 0 ? window - 1 : INT32_MAX;
  for (const int32_t c : batch.decode_context_lens) {
    sum_ctx += c;
    sum_ctx_capped += c < cap ? c : cap;
  }
  const double n_dec = static_cast<double>(batch.decode_context_lens.size());
  const double dec_full = static_cast<double>(sum_ctx) + n_dec;
  const double dec_slide = static_cast<double>(sum_ctx_capped) + n_dec;
  double pf_tokens = 0, pairs_full = 0, pairs_slide = 0, kv_full = 0, kv_slide = 0;
  for (const PrefillChunk& p : batch.prefills) {
    const int64_t n = p.num_tokens, c = p.num_computed_before;
    pf_tokens += static_cast<double>(n);
    const double pf = static_cast<double>(n) * static_cast<double>(c) +
                      static_cast<double>(n) * static_cast<double>(n + 1) / 2.0;
    pairs_full += pf;
    kv_full += static_cast<double>(c + n);
    if (window > 0) {
      pairs_slide += SlidingPairs(c, n, window);
      kv_slide += static_cast<double>(std::min<int64_t>(c + n, int64_t{window} + n));
    } else {
      pairs_slide += pf;
      kv_slide += static_cast<double>(c + n);
    }
  }
  a.num_decodes = static_cast<int32_t>(batch.decode_context_lens.size());
  a.num_prefills = static_cast<int32_t>(batch.prefills.size());
  v[kAggTokens] = pf_tokens + a.num_decodes;
  v[kAggSeqs] = static_cast<double>(a.num_decodes + a.num_prefills);
  v[kAggDecCtxFull] = dec_full;
  v[kAggDecCtxSliding] = dec_slide;
  v[kAggPrefillPairsFull] = pairs_full;
  v[kAggPrefillPairsSliding] = pairs_slide;
  v[kAggPrefillKvFull] = kv_full;
  v[kAggPrefillKvSliding] = kv_slide;
  if (num_experts > 0) {
    v[kAggExpertsTouched] = num_experts * (1.0 - std::exp(v[kAggTokens] * k_log_miss));
  }
  return a;
}

double KLogMiss(int32_t num_experts, int32_t top_k) {
  return num_experts > 0 ? top_k * std::log1p(-1.0 / num_experts) : 0.0;
}

}  // namespace

BatchAggregates ComputeAggregates(const StepBatch& batch, int32_t window,
                                  int32_t num_experts, int32_t top_k) {
  return Aggregates(batch, window, num_experts, KLogMiss(num_experts, top_k));
}

// ---------------------------------------------------------------------------
// Parameters.

namespace {

using When = StepParameterWhen;
constexpr double kInf = HUGE_VAL;

// Fractions: sigma 0.15 (0.2 for quant_kernel_eff); times in us:
// max(0.5 x prior, 1 us).
constexpr StepParameterSpec kStepParameters[] = {
    {.name = "bw_eff_weights",
     .default_value = 0.8,
     .lower = 0.05,
     .upper = 1.0,
     .sigma_rel = 0,
     .sigma_abs = 0.15,
     .unit = "fraction",
     .meaning = "achieved fraction of peak bandwidth streaming weights (GEMM/GEMV), "
                "embeddings, sampling",
     .when = When::kAlways},
    {.name = "flops_eff_gemm",
     .default_value = 0.6,
     .lower = 0.02,
     .upper = 1.0,
     .sigma_rel = 0,
     .sigma_abs = 0.15,
     .unit = "fraction",
     .meaning = "achieved fraction of peak FLOP/s in weight GEMMs",
     .when = When::kAlways},
    {.name = "bw_eff_attention",
     .default_value = 0.4,
     .lower = 0.01,
     .upper = 1.0,
     .sigma_rel = 0,
     .sigma_abs = 0.15,
     .unit = "fraction",
     .meaning = "achieved fraction of peak bandwidth reading the KV cache",
     .when = When::kAlways},
    {.name = "flops_eff_attention",
     .default_value = 0.35,
     .lower = 0.01,
     .upper = 1.0,
     .sigma_rel = 0,
     .sigma_abs = 0.15,
     .unit = "fraction",
     .meaning = "achieved fraction of peak FLOP/s in attention",
     .when = When::kAlways},
    // The meaning is completed with the format's kernel and id.
    {.name = "quant_kernel_eff",
     .default_value = 0.8,
     .lower = 0.02,
     .upper = 1.0,
     .sigma_rel = 0,
     .sigma_abs = 0.2,
     .unit = "fraction",
     .meaning = "relative to 16-bit GEMM, multiplies bw and FLOP efficiency",
     .when = When::kQuantized},
    // Decode attention kernels without split-KV (Triton unified attention
    // on ROCm and on the Turing-patched T4) give each (sequence, KV head)
    // pair one work unit that streams its context alone: with few sequences
    // and one or two KV heads most compute units idle and the time grows
    // with context at one unit's bandwidth, hidden by the full-device
    // roofline only once sequences x KV heads fill the device. Only where
    // the device file gives a prior (0 or absent: the backend splits the
    // KV, e.g. FlashAttention).
    {.name = "attn_unit_gbs",
     .default_value = 0,
     .lower = 1.0,
     .upper = kInf,
     .sigma_rel = 0.5,
     .sigma_abs = 0,
     .unit = "GB/s",
     .meaning = "KV-read bandwidth of one (sequence, KV head) work unit of the decode "
                "attention kernel; limits decode attention while sequences x KV heads "
                "< attn_units",
     .when = When::kPositive},
    {.name = "attn_units",
     .default_value = 1,
     .lower = 1.0,
     .upper = 1e6,
     .sigma_rel = 0,
     .sigma_abs = 0,
     .unit = "count",
     .meaning = "parallel units of the device (compute units / SMs) that decode "
                "attention work units spread over",
     .when = When::kWithUnitGbs},
    {.name = "host_step_us",
     .default_value = 2000,
     .lower = 0.0,
     .upper = 100000,
     .sigma_rel = 0.5,
     .sigma_abs = 1.0,
     .unit = "us",
     .meaning = "host time per step (scheduler, input prep, output processing)",
     .when = When::kAlways},
    // Weakly informative: the serving stack's per-request cost per step
    // differs by an order of magnitude between builds (tens of us on the
    // CUDA/ROCm builds, ~0.4-0.6 ms on the TPU builds' chat server), so the
    // prior only keeps it positive and sub-ms where no cell informs it.
    {.name = "host_seq_us",
     .default_value = 30,
     .lower = 0.0,
     .upper = 5000,
     .sigma_rel = 2.0,
     .sigma_abs = 200.0,
     .unit = "us",
     .meaning = "host time per scheduled sequence per step",
     .when = When::kAlways},
    {.name = "host_token_us",
     .default_value = 0.5,
     .lower = 0.0,
     .upper = 200,
     .sigma_rel = 0.5,
     .sigma_abs = 1.0,
     .unit = "us",
     .meaning = "host time per scheduled token per step",
     .when = When::kAlways},
    {.name = "kernel_launch_us",
     .default_value = 5,
     .lower = 0.0,
     .upper = 200,
     .sigma_rel = 0.5,
     .sigma_abs = 1.0,
     .unit = "us",
     .meaning = "cost per kernel launched outside a captured graph (x eager kernels "
                "per step)",
     .when = When::kAlways},
    {.name = "gemm_rows_exp",
     .default_value = 0,
     .lower = 0.0,
     .upper = 0.6,
     .sigma_rel = 0,
     .sigma_abs = 0.15,
     .unit = "exponent",
     .meaning = "GEMM FLOP efficiency grows as rows^exp up to gemm_rows_sat rows",
     .when = When::kAlways},
    {.name = "gemm_rows_sat",
     .default_value = 16384,
     .lower = 16.0,
     .upper = 1e6,
     .sigma_rel = 0.5,
     .sigma_abs = 0,
     .unit = "rows",
     .meaning = "rows (tokens) from which GEMMs reach flops_eff_gemm",
     .when = When::kAlways},
    {.name = "gemm_rows_floor",
     .default_value = 512,
     .lower = 1.0,
     .upper = 1e6,
     .sigma_rel = 0.5,
     .sigma_abs = 0,
     .unit = "rows",
     .meaning = "rows below which the rows factor stops falling (decode batches: "
                "their GEMMs stream weights, bandwidth bound)",
     .when = When::kAlways},
    // Shape law (docs/step_model.md): a GEMM whose weight matrix gives each
    // compute unit few elements (few output tiles per unit, short
    // reductions) spends a larger share of its time in tile prologue and
    // epilogue. 0: no shape dependence. Only where the device file sets it
    // (other devices keep their formula).
    {.name = "gemm_w_half",
     .default_value = 0,
     .lower = 0.0,
     .upper = 1e7,
     .sigma_rel = 0,
     .sigma_abs = 5e5,
     .unit = "elements/unit",
     .meaning = "weight-matrix elements (N x K) per compute unit at which a GEMM "
                "reaches half of flops_eff_gemm",
     .when = When::kDeviceFileSets},
    // XLA runs static shapes: the vLLM TPU model runner pads each step's
    // token count to the next power of two from pad_tokens_min and its
    // request count (logits, sampling) to the next power of two from
    // pad_seqs_min (tpu_model_runner: _get_token_paddings with padding gap
    // 0, _get_req_paddings). 0: no padding (CUDA/ROCm builds). Not fitted.
    {.name = "pad_tokens_min",
     .default_value = 0,
     .lower = 1.0,
     .upper = 65536.0,
     .sigma_rel = 0,
     .sigma_abs = 0,
     .unit = "count",
     .meaning = "smallest token bucket: GEMM rows are padded to the next power of "
                "two >= max(tokens, this)",
     .when = When::kPositive},
    {.name = "pad_seqs_min",
     .default_value = 0,
     .lower = 1.0,
     .upper = 65536.0,
     .sigma_rel = 0,
     .sigma_abs = 0,
     .unit = "count",
     .meaning = "smallest request bucket: LM head and sampling rows are padded to "
                "the next power of two >= max(sequences, this)",
     .when = When::kPositive},
    {.name = "device_step_us",
     .default_value = 300,
     .lower = 0.0,
     .upper = 50000,
     .sigma_rel = 0.5,
     .sigma_abs = 1.0,
     .unit = "us",
     .meaning = "fixed device time per step (graph launch, synchronisation, small "
                "kernels)",
     .when = When::kAlways},
    {.name = "moe_routing_us",
     .default_value = 20,
     .lower = 0.0,
     .upper = 5000,
     .sigma_rel = 0.5,
     .sigma_abs = 1.0,
     .unit = "us",
     .meaning = "per MoE layer per step: routing, permute and unpermute",
     .when = When::kMoe},
};

}  // namespace

std::span<const StepParameterSpec> StepParameterTable() { return kStepParameters; }

const StepParameterSpec* FindStepParameter(std::string_view name) {
  for (const StepParameterSpec& p : kStepParameters) {
    if (name == p.name) return &p;
  }
  return nullptr;
}

ParameterSet PriorStepParameters(const proto::Device& device, const ModelArch& model,
                                 const WeightFormat& format) {
  auto prior = [&](const std::string& key, double def) {
    auto it = device.param_priors().find(key);
    return it == device.param_priors().end() ? def : it->second;
  };
  // Where a prior comes from: the device file when it sets the key, else the
  // default written in the table.
  const std::string device_file =
      device.origin().empty()
          ? absl::StrCat("hwmodels/devices/", device.id(), ".textproto")
          : device.origin();
  auto source = [&](const std::string& key) {
    return device.param_priors().contains(key)
               ? absl::StrCat("prior: ", device_file)
               : absl::StrCat("prior: hwmodels/step_model.cc default (", key,
                              " not set in ", device_file, ")");
  };
  std::vector<Parameter> ps;
  bool unit_gbs = false;
  for (const StepParameterSpec& spec : kStepParameters) {
    std::string key = spec.name;
    std::string meaning = spec.meaning;
    switch (spec.when) {
      case When::kAlways:
      case When::kPositive:
      case When::kWithUnitGbs:
        break;
      case When::kQuantized:
        if (format.weight_bits >= 16) continue;
        key = absl::StrCat(spec.name, ".", format.kernel);
        meaning = absl::StrCat("efficiency of the ", format.kernel, " kernel (",
                               format.id, ") ", spec.meaning);
        break;
      case When::kDeviceFileSets:
        if (!device.param_priors().contains(key)) continue;
        break;
      case When::kMoe:
        if (model.num_experts <= 0) continue;
        break;
    }
    if (spec.when == When::kWithUnitGbs && !unit_gbs) continue;
    const double v = prior(key, spec.default_value);
    if (spec.when == When::kPositive && v <= 0) continue;
    if (std::string_view(spec.name) == "attn_unit_gbs") unit_gbs = true;
    const double upper =
        spec.upper == kInf ? device.bandwidth_bytes_per_s() / 1e9 : spec.upper;
    const double sigma = spec.sigma_rel > 0 ? std::max(spec.sigma_rel * v, spec.sigma_abs)
                                            : spec.sigma_abs;
    std::string src = source(key);
    if (spec.when == When::kQuantized) absl::StrAppend(&src, " (", key, ")");
    ps.push_back({spec.name, v, spec.lower, upper, v, sigma, 0, spec.unit,
                  std::move(meaning), std::move(src)});
  }
  return ParameterSet(std::move(ps));
}

// ---------------------------------------------------------------------------
// Compilation and evaluation.

namespace {

// The set's value of `name`, else the table's default.
double ParamOr(const ParameterSet& p, const char* name) {
  if (const Parameter* x = p.Find(name); x != nullptr) return x->value;
  return FindStepParameter(name)->default_value;
}
double Clamp01(double v) { return std::clamp(v, 1e-3, 1.0); }

}  // namespace

double RooflineStepModel::OpNs(const Operator& op, const AggVector& v) const {
  double fl = 0, by = 0;
  for (int i = 0; i < kNumAggs; ++i) {
    fl += op.flops[i] * v[i];
    by += op.bytes[i] * v[i];
  }
  const CompiledStepGraph& g = *graph_;
  double ef, eb, peak;
  switch (op.op_class) {
    case OpClass::kAttention:
      ef = eff_fl_a_;
      eb = eff_bw_a_;
      peak = g.peak_flops_16();
      break;
    default:
      ef = eff_fl_w_;
      eb = eff_bw_w_;
      peak = g.peak_flops_16();
  }
  double fl_scale = 1;
  if (op.op_class == OpClass::kGemm)
    fl_scale = RowsScale(v[GemmRowsIdx(op)]) * ShapeScale(op);
  if (op.quantized) {
    ef *= quant_eff_;
    eb *= quant_eff_;
    peak = g.peak_flops_quant();
  }
  return op.count * std::max(fl_scale * fl / (peak * ef), by / (g.bandwidth() * eb)) *
         1e9;
}

double RooflineStepModel::GemmLinesNs(int rows_idx, double x, double scale) const {
  const std::vector<double>& table =
      rows_idx == kAggTokens ? gemm_tokens_ns_ : gemm_seqs_ns_;
  const auto i = static_cast<size_t>(x);
  if (i < table.size() && static_cast<double>(i) == x) return table[i];
  double ns = 0;
  for (const GemmLine& l : gemm_lines_) {
    if (l.rows_idx != rows_idx) continue;
    ns += std::max((l.f0 + l.f1 * x) * scale, l.b0 + l.b1 * x);
  }
  return ns;
}

int RooflineStepModel::GemmRowsIdx(const Operator& op) {
  // The LM head and sampling run once per sequence, the rest once per token.
  return op.flops[kAggTokens] == 0 && op.flops[kAggSeqs] != 0 ? kAggSeqs : kAggTokens;
}

double RooflineStepModel::RowsScale(double rows) const {
  if (gemm_exp_ <= 0 || rows >= gemm_sat_) return 1;
  // Row counts are whole numbers: small ones (every decode batch) from the
  // table filled at compile time, no pow() on the per-step path.
  const auto i = static_cast<size_t>(std::max(rows, 1.0));
  if (i < rows_scale_.size() && static_cast<double>(i) == std::max(rows, 1.0))
    return rows_scale_[i];
  return std::pow(gemm_sat_ / std::max(rows, gemm_floor_), gemm_exp_);
}

double RooflineStepModel::ShapeScale(const Operator& op) const {
  if (gemm_w_half_ <= 0 || op.gemm_kernels.empty()) return 1;
  const double units = graph_->compute_units();
  double s = 0;
  for (const auto& [share, elems] : op.gemm_kernels)
    s += share * (1 + gemm_w_half_ * units / std::max(elems, 1.0));
  return s;
}

double RooflineStepModel::UnitNs(const Operator& op, const AggVector& v,
                                 int32_t num_decodes) const {
  if (op.unit_bytes_per_ctx <= 0 || attn_unit_bw_ <= 0 || num_decodes <= 0) return 0;
  double ctx = 0;
  for (int i = 0; i < kNumAggs; ++i)
    if (op.bytes[i] != 0) ctx += v[i];
  const double cap = std::max(1.0, attn_units_ / std::max(1.0, op.kv_heads));
  return op.count * op.unit_bytes_per_ctx * ctx /
         (std::min<double>(num_decodes, cap) * attn_unit_bw_) * 1e9;
}

std::shared_ptr<const RooflineStepModel> RooflineStepModel::Compile(
    std::shared_ptr<const CompiledStepGraph> graph, const ParameterSet& params) {
  auto m = std::shared_ptr<RooflineStepModel>(new RooflineStepModel());
  m->graph_ = std::move(graph);
  m->params_ = params;
  const CompiledStepGraph& g = *m->graph_;
  m->window_ = g.window();
  m->num_experts_ = g.num_experts();
  m->k_log_miss_ = KLogMiss(g.num_experts(), g.top_k());
  m->eff_bw_w_ = Clamp01(ParamOr(params, "bw_eff_weights"));
  m->eff_fl_w_ = Clamp01(ParamOr(params, "flops_eff_gemm"));
  m->eff_bw_a_ = Clamp01(ParamOr(params, "bw_eff_attention"));
  m->eff_fl_a_ = Clamp01(ParamOr(params, "flops_eff_attention"));
  m->quant_eff_ = Clamp01(ParamOr(params, "quant_kernel_eff"));
  m->attn_unit_bw_ = std::max(0.0, ParamOr(params, "attn_unit_gbs")) * 1e9;
  m->attn_units_ = std::max(1.0, ParamOr(params, "attn_units"));
  auto us = [&](const char* n) { return std::max(0.0, ParamOr(params, n)) * 1e3; };
  m->host_step_ns_ = us("host_step_us");
  m->host_seq_ns_ = us("host_seq_us");
  m->host_token_ns_ = us("host_token_us");
  m->device_step_ns_ = us("device_step_us");
  m->pad_tokens_min_ = std::max(0.0, ParamOr(params, "pad_tokens_min"));
  m->pad_seqs_min_ = std::max(0.0, ParamOr(params, "pad_seqs_min"));
  // The per-unit coefficients below are taken at full GEMM efficiency; the
  // rows factor is applied per step (gemm_lines_, MaxTerm::rows_idx).
  // gemm_exp_ stays 0 (no factor in OpNs) until the coefficients are taken:
  // it is set after the operator loop below.
  const double gemm_exp = std::max(0.0, ParamOr(params, "gemm_rows_exp"));
  m->gemm_sat_ = std::max(1.0, ParamOr(params, "gemm_rows_sat"));
  m->gemm_floor_ = std::clamp(ParamOr(params, "gemm_rows_floor"), 1.0, m->gemm_sat_);
  m->gemm_w_half_ = std::max(0.0, ParamOr(params, "gemm_w_half"));
  m->launch_ns_ = us("kernel_launch_us");
  m->moe_routing_ns_ = us("moe_routing_us") * g.num_moe_layers();
  m->eager_kernels_full_graph_ =
      g.graph_capture() ? 0 : kKernelsPerLayer * g.num_layers() + 4;
  m->eager_kernels_piecewise_ =
      g.graph_capture() ? g.num_layers() : kKernelsPerLayer * g.num_layers() + 4;

  // Per-op ns coefficients; sort ops into the compact formula's parts.
  struct Line {
    double a, b, c, d;  // max(a + b x, c + d x)
  };
  std::vector<Line> tok_lines, seq_lines;
  for (const Operator& op : g.ops()) {
    AggVector f{}, b{};
    for (int i = 0; i < kNumAggs; ++i) {
      AggVector unit{};
      unit[i] = 1;
      Operator one = op;
      one.bytes = AggVector{};
      f[i] = op.flops[i] == 0 ? 0 : m->OpNs(one, unit);
      one = op;
      one.flops = AggVector{};
      b[i] = op.bytes[i] == 0 ? 0 : m->OpNs(one, unit);
    }
    // Recover per-unit ns of each side (OpNs applies the max; one side zero).
    auto only = [&](std::initializer_list<int> allowed) {
      for (int i = 0; i < kNumAggs; ++i) {
        if (f[i] == 0 && b[i] == 0) continue;
        if (std::find(allowed.begin(), allowed.end(), i) == allowed.end()) return false;
      }
      return true;
    };
    int nz_f = -1, nz_b = -1, count_f = 0, count_b = 0;
    for (int i = 0; i < kNumAggs; ++i) {
      if (f[i] != 0) {
        nz_f = i;
        ++count_f;
      }
      if (b[i] != 0) {
        nz_b = i;
        ++count_b;
      }
    }
    const bool rows_gemm = gemm_exp > 0 && op.op_class == OpClass::kGemm;
    const int rows_idx = GemmRowsIdx(op);
    if (rows_gemm && only({kAggOne, rows_idx})) {
      m->gemm_lines_.push_back(
          {rows_idx, f[kAggOne], f[rows_idx], b[kAggOne], b[rows_idx]});
    } else if (only({kAggOne, kAggTokens})) {
      tok_lines.push_back({f[kAggOne], f[kAggTokens], b[kAggOne], b[kAggTokens]});
    } else if (only({kAggOne, kAggSeqs})) {
      seq_lines.push_back({f[kAggOne], f[kAggSeqs], b[kAggOne], b[kAggSeqs]});
    } else if (count_f <= 1 && count_b <= 1 && (nz_f == nz_b || nz_f < 0 || nz_b < 0)) {
      const int i = nz_f >= 0 ? nz_f : nz_b;
      if (op.unit_bytes_per_ctx > 0 && m->attn_unit_bw_ > 0) {
        m->unit_terms_.push_back(
            {i, std::max(f[i], b[i]),
             op.count * op.unit_bytes_per_ctx / m->attn_unit_bw_ * 1e9,
             std::max(1.0, m->attn_units_ / std::max(1.0, op.kv_heads))});
      } else {
        m->linear_[i] += std::max(f[i], b[i]);
      }
    } else {
      MaxTerm t;
      t.rows_idx = rows_gemm ? rows_idx : -1;
      for (int i = 0; i < kNumAggs; ++i) {
        if (f[i] != 0) {
          t.f_idx[t.num_f] = static_cast<uint8_t>(i);
          t.f_coef[t.num_f++] = f[i];
        }
        if (b[i] != 0) {
          t.b_idx[t.num_b] = static_cast<uint8_t>(i);
          t.b_coef[t.num_b++] = b[i];
        }
      }
      m->max_terms_.push_back(t);
    }
  }
  for (int i = 0; i < kNumAggs; ++i) {
    if (m->linear_[i] == 0) continue;
    m->linear_idx_[m->num_linear_] = static_cast<uint8_t>(i);
    m->linear_coef_[m->num_linear_++] = m->linear_[i];
  }
  auto build_pwl = [](const std::vector<Line>& lines) {
    std::vector<double> bps = {0.0};
    for (const Line& l : lines) {
      if (l.b != l.d) {
        const double x = (l.c - l.a) / (l.b - l.d);
        if (x > 0 && std::isfinite(x)) bps.push_back(x);
      }
    }
    std::sort(bps.begin(), bps.end());
    bps.erase(std::unique(bps.begin(), bps.end()), bps.end());
    std::vector<Segment> segs;
    for (size_t j = 0; j < bps.size(); ++j) {
      const double xm = j + 1 < bps.size() ? 0.5 * (bps[j] + bps[j + 1]) : bps[j] + 1.0;
      Segment s{bps[j], 0, 0};
      for (const Line& l : lines) {
        if (l.a + l.b * xm >= l.c + l.d * xm) {
          s.intercept += l.a;
          s.slope += l.b;
        } else {
          s.intercept += l.c;
          s.slope += l.d;
        }
      }
      segs.push_back(s);
    }
    return segs;
  };
  m->pwl_tokens_ = build_pwl(tok_lines);
  m->pwl_seqs_ = build_pwl(seq_lines);
  m->gemm_exp_ = gemm_exp;
  if (gemm_exp > 0) {
    m->rows_scale_.resize(static_cast<size_t>(std::min(m->gemm_sat_, 1025.0)));
    for (size_t i = 1; i < m->rows_scale_.size(); ++i)
      m->rows_scale_[i] = std::pow(
          m->gemm_sat_ / std::max(static_cast<double>(i), m->gemm_floor_), gemm_exp);
    // The GEMM lines' sums at whole row counts up to 1,024 (every decode
    // batch, small prefills): one lookup per step instead of the lines.
    for (auto [idx, table] : {std::pair{kAggTokens, &m->gemm_tokens_ns_},
                              std::pair{kAggSeqs, &m->gemm_seqs_ns_}}) {
      std::vector<double> t(1025);
      for (size_t i = 0; i < t.size(); ++i)
        t[i] = m->GemmLinesNs(idx, static_cast<double>(i),
                              m->RowsScale(static_cast<double>(i)));
      *table = std::move(t);
    }
  }
  return m;
}

double RooflineStepModel::EvalPwl(const std::vector<Segment>& segs, double x) {
  // Forward scan: breakpoints sit at a few hundred tokens, so typical
  // decode batches stop after a step or two (predictable branches).
  const Segment* s = segs.data();
  const Segment* end = s + segs.size();
  while (s + 1 != end && s[1].start <= x) ++s;
  return s->intercept + s->slope * x;
}

namespace {
// The next power of two >= max(x, lo); x itself when lo is 0 (no padding).
double PadPow2(double x, double lo) {
  if (lo <= 0 || x <= 0) return x;
  double p = 1;
  while (p < lo) p *= 2;
  while (p < x) p *= 2;
  return p;
}
}  // namespace

void RooflineStepModel::Pad(BatchAggregates* a) const {
  if (pad_tokens_min_ <= 0 && pad_seqs_min_ <= 0) return;
  a->v[kAggTokens] = PadPow2(a->v[kAggTokens], pad_tokens_min_);
  a->v[kAggSeqs] = PadPow2(a->v[kAggSeqs], pad_seqs_min_);
}

double RooflineStepModel::OverheadNs(const BatchAggregates& a, double* host_ns) const {
  const double seqs = a.v[kAggSeqs], tokens = a.v[kAggTokens];
  *host_ns = host_step_ns_ + host_seq_ns_ * seqs + host_token_ns_ * tokens;
  const bool full_graph =
      a.num_prefills == 0 && a.num_decodes <= graph_->max_graph_capture_size();
  const double eager = full_graph ? eager_kernels_full_graph_ : eager_kernels_piecewise_;
  return device_step_ns_ + launch_ns_ * eager + moe_routing_ns_;
}

StepCost RooflineStepModel::Cost(const StepBatch& batch) const {
  BatchAggregates a = Aggregates(batch, window_, num_experts_, k_log_miss_);
  double host = 0;
  double dev = OverheadNs(a, &host);  // host work counts the real tokens and sequences
  Pad(&a);
  dev += EvalPwl(pwl_tokens_, a.v[kAggTokens]) + EvalPwl(pwl_seqs_, a.v[kAggSeqs]);
  for (int k = 0; k < num_linear_; ++k) dev += linear_coef_[k] * a.v[linear_idx_[k]];
  if (a.num_decodes > 0) {
    const double n = a.num_decodes;
    for (const UnitTerm& t : unit_terms_) {
      const double x = a.v[t.idx];
      dev += std::max(t.coef * x, t.unit_coef * x / std::min(n, t.unit_cap));
    }
  }
  // One rows factor per step and aggregate (table lookup up to 1,024 rows).
  const double tok_scale = RowsScale(a.v[kAggTokens]);
  const double seq_scale =
      a.v[kAggSeqs] == a.v[kAggTokens] ? tok_scale : RowsScale(a.v[kAggSeqs]);
  if (!gemm_lines_.empty()) {
    dev += GemmLinesNs(kAggTokens, a.v[kAggTokens], tok_scale) +
           GemmLinesNs(kAggSeqs, a.v[kAggSeqs], seq_scale);
  }
  for (const MaxTerm& t : max_terms_) {
    double f = 0, b = 0;
    for (int k = 0; k < t.num_f; ++k) f += t.f_coef[k] * a.v[t.f_idx[k]];
    for (int k = 0; k < t.num_b; ++k) b += t.b_coef[k] * a.v[t.b_idx[k]];
    if (t.rows_idx >= 0) f *= t.rows_idx == kAggSeqs ? seq_scale : tok_scale;
    dev += std::max(f, b);
  }
  return StepCost{static_cast<TimeNs>(std::llround(host)),
                  std::max<TimeNs>(1, static_cast<TimeNs>(std::ceil(dev)))};
}

StepCost RooflineStepModel::CostByWalk(const StepBatch& batch) const {
  BatchAggregates a =
      ComputeAggregates(batch, graph_->window(), graph_->num_experts(), graph_->top_k());
  double host = 0;
  double dev = OverheadNs(a, &host);
  Pad(&a);
  for (const Operator& op : graph_->ops())
    dev += std::max(OpNs(op, a.v), UnitNs(op, a.v, a.num_decodes));
  return StepCost{static_cast<TimeNs>(std::llround(host)),
                  std::max<TimeNs>(1, static_cast<TimeNs>(std::ceil(dev)))};
}

std::string RooflineStepModel::Describe() const {
  std::string s = absl::StrCat(
      graph_->description(),
      ". step: host_ns = host_step + host_seq x seqs + host_token x tokens; device_ns = "
      "device_step + kernel_launch x eager kernels (0 for a captured decode-only batch, "
      "one per layer otherwise; all kernels without graph capture) + moe_routing x MoE "
      "layers + sum over operators of max(flops / (peak x flops_eff), bytes / (bandwidth "
      "x bw_eff)) (GEMM flops_eff x min(1, (max(rows, gemm_rows_floor) / "
      "gemm_rows_sat)^gemm_rows_exp), rows = "
      "tokens, sequences for the LM head; quantized GEMMs also x quant_kernel_eff; "
      "decode attention at least "
      "context bytes of one KV head / (attn_unit_gbs x min(decodes, attn_units / KV "
      "heads)) where attn_unit_gbs is set; where pad_tokens_min / pad_seqs_min are set "
      "(TPU), tokens and sequences padded to the next power of two at or above them "
      "before the operator costs, not the host terms). Compiled into ",
      pwl_tokens_.size(), "+", pwl_seqs_.size(), " piecewise-linear segments and ",
      max_terms_.size(), " max terms, ", unit_terms_.size(), " unit-bandwidth terms.",
      gemm_w_half_ > 0
          ? " GEMM flops_eff also x sum over the op's kernels of FLOP share / (1 + "
            "gemm_w_half x compute units / (N x K)) (shape law)."
          : "",
      " Parameters:");
  for (const Parameter& p : params_.params()) {
    absl::StrAppend(
        &s, absl::StrFormat(" %s=%.6g %s [%s]", p.name, p.value, p.unit, p.source));
    if (p.std_error > 0) absl::StrAppend(&s, absl::StrFormat(" (+-%.3g)", p.std_error));
    absl::StrAppend(&s, ";");
  }
  return s;
}

}  // namespace servesim
