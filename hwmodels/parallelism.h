// Tensor parallelism as vLLM runs it: one replica split over
// tensor_parallel_size (TP) chips of one node. The rules live here, in one
// home; the memory planner and the step graph see only the model ONE RANK
// runs (TensorParallelRank), and the step model gains the collectives as
// precomputed coefficients (TensorParallelStepModel).
//
// Sharding (vllm/model_executor/layers/linear.py, vocab_parallel_embedding.py,
// fused_moe/layer.py):
//   - QKV: column parallel over heads; q heads / TP per rank; KV heads / TP,
//     or 1 head replicated TP / kv_heads times when TP >= kv_heads
//     (QKVParallelLinear). O projection: row parallel (q heads / TP inputs).
//   - MLP: gate/up column parallel, down row parallel: intermediate / TP.
//   - Routed experts without expert parallelism: every expert's intermediate
//     / TP (FusedMoE); the router (gate) is replicated.
//   - Embedding and LM head: vocab parallel, vocab padded to a multiple of
//     64 and split in TP equal parts; the logits are gathered (all ranks
//     sample over the whole vocab).
//   - Per-layer embedding table (Gemma E models): vocab parallel like the
//     embedding; its projections are kept whole here (replicated), and the
//     vision / audio encoders are taken as split in TP equal parts (their
//     linear layers are TP-parallel in vLLM): both approximations.
// Expert parallelism (--enable-expert-parallel, MoE models; vLLM
// FusedMoEParallelConfig.make and determine_expert_map): the EP group is
// all TP x DP ranks; each rank holds whole experts (no TP slice of each),
// ranks 0 .. E mod EP - 1 one more than E / EP (linear placement), so the
// fullest rank holds ceil(E / EP): its memory sets the pool and its expert
// GEMMs the step. Attention stays TP. Under uniform routing a rank runs
// local / E of the top_k x tokens expert rows. With DP = 1 the tokens are
// already replicated over the TP ranks: each rank routes all of them to
// its local experts and the combine is the same all-reduce per MoE layer
// as without EP (FusedMoE reduce_results over the TP group). With DP > 1
// (DP attention) each rank's experts also run the other DP ranks' tokens,
// gathered and scattered back over the DP group (CompileCollectives), and
// the DP engines step in lock-step (sim/engine.h lockstep_group).
// Memory: every rank holds the same shards, so the KV pool (the minimum
// over ranks, as vLLM takes it) is each rank's pool.
// Collectives per step: one all-reduce of tokens x hidden after each
// attention block and each MLP (row-parallel outputs), one more per MoE
// layer for the routed experts, one after the vocab-parallel embedding
// (one more for the per-layer embedding), and one all-gather of the
// sampled rows' logits.
// Pure functions and an immutable StepTimeModel; thread-safe.
#ifndef SERVESIM_HWMODELS_PARALLELISM_H_
#define SERVESIM_HWMODELS_PARALLELISM_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "hwmodels/model_arch.h"
#include "hwmodels/server_spec.h"
#include "proto/hwmodels.pb.h"
#include "sim/step_time_model.h"

namespace servesim {

// Largest --tensor/pipeline/data-parallel-size accepted.
constexpr int32_t kMaxParallelSize = 64;
// vLLM's DEFAULT_VOCAB_PADDING_SIZE (vocab_parallel_embedding.py).
constexpr int64_t kVocabPaddingSize = 64;

// KV heads one rank holds. REQUIRES: num_kv_heads >= 1, tp >= 1.
int32_t KvHeadsPerRank(int32_t num_kv_heads, int32_t tp);
// Times each KV head is held across the TP group (1 when TP <= kv heads).
int32_t KvHeadReplicas(int32_t num_kv_heads, int32_t tp);
// Embedding / LM-head rows one rank holds: ceil(vocab / 64) x 64 / tp.
int64_t VocabRowsPerRank(int64_t vocab_size, int32_t tp);

// The expert-parallel group size: TP x DP with --enable-expert-parallel
// and an MoE model, else 1 (vLLM ignores the flag for dense models).
int32_t ExpertParallelSize(const ModelArch& m, const ServerSpec& spec);
// Experts the fullest of `ep` ranks holds: ceil(num_experts / ep).
int32_t ExpertsPerRank(int32_t num_experts, int32_t ep);

// The parallel sizes of `spec` checked against the model and the device
// as vLLM checks them: q heads divisible by TP; KV heads divisible by TP
// or TP divisible by KV heads; FFN and expert widths divisible by TP; TP
// at most the devices one node holds (interconnect.max_devices_per_node).
// Data parallelism: DP x TP at most the node's devices
// (the engines themselves are the fleet's replicas, experiments/
// run_experiment.h); an MoE model with DP > 1 needs
// --enable-expert-parallel (DP attention + EP experts, engines in
// lock-step). Expert parallelism: EP at most the number of experts.
// Pipeline parallelism: PP at most the model's layers, TP x PP (x DP) at
// most the node's devices; refused with DP > 1, with expert parallelism
// and for models with per-layer embeddings (not modelled).
// Errors name the flag, the value and the allowed values.
absl::Status CheckParallelism(const proto::Device& device, const ModelArch& m,
                              const ServerSpec& spec);

// The model one rank runs (see the header comment): attention, MLP and
// vocab split over tp; routed experts split over tp when ep == 1, else
// ExpertsPerRank(ep) whole experts. tp == ep == 1: `m` itself.
// REQUIRES: CheckParallelism passed for this tp.
// dp > 1 with ep > 1 (DP attention): expert_token_sources = dp.
ModelArch TensorParallelRank(const ModelArch& m, int32_t tp, int32_t ep = 1,
                             int32_t dp = 1);

// "128 experts -> 32 whole experts per rank (expert parallel 4)", or
// "128 experts, each split over TP 4" without EP; empty for a dense model.
std::string DescribeExpertSplit(const ModelArch& m, int32_t tp, int32_t ep);

// "sliding layers: 16 KV heads -> 2 per rank; full layers: 4 KV heads -> 1
// per rank (each held by 2 ranks)", over the distinct attention types.
std::string DescribeKvHeadSplit(const ModelArch& m, int32_t tp);

// The link the collectives of a group of `group_size` devices use:
// device-to-device links at half their quoted both-directions bandwidth
// (in a mesh, the min(group_size - 1, mesh_links) of the mesh_links that
// reach the group's peers), else PCIe through the host at
// host_link_bytes_per_s per direction (no device links, or a group larger
// than link_group_max); latency_s per collective. `point_to_point`: one
// device sending to one other (a pipeline stage handoff) in a replica of
// group_size devices: one mesh link, or the bridge when the whole replica
// fits in it. `span`: the devices the group's members are spread over (a
// DP group of one rank per TP x DP engine spans TP x DP chips; a link
// that joins at most link_group_max devices reaches the group only when
// the span fits in it); 0: group_size. group_size <= 0: the whole node.
struct CollectiveLink {
  double bytes_per_s = 0;  // per direction, per device
  double latency_s = 0;    // one small-message collective
  std::string description;
};
// InvalidArgument naming the device file when it has no interconnect.
absl::StatusOr<CollectiveLink> TensorParallelLink(const proto::Device& device,
                                                  int32_t group_size = 0,
                                                  bool point_to_point = false,
                                                  int32_t span = 0);

// Ring all-reduce of a `bytes` buffer (each rank's whole buffer) over n
// ranks: latency + 2 (n - 1) / n x bytes / bandwidth. 0 when n == 1.
// CompileCollectives builds its coefficients from these two.
double AllReduceSeconds(double bytes, int32_t n, const CollectiveLink& link);
// All-gather of a `total_bytes` result (each rank holds 1/n of it):
// latency + (n - 1) / n x total_bytes / bandwidth. 0 when n == 1.
double AllGatherSeconds(double total_bytes, int32_t n, const CollectiveLink& link);

// The collectives of one TP step as coefficients: device ns = step_ns +
// token_ns x tokens + seq_ns x sampled sequences. Computed once.
struct TensorParallelCollectives {
  int32_t tp = 1;
  int32_t all_reduces_per_step = 0;
  // DP attention + EP experts (dp > 1): one all-gather (dispatch) and one
  // reduce-scatter (combine) of the hidden states over the DP group per
  // MoE layer, included in the coefficients below; 0 otherwise.
  int32_t dp = 1;
  int32_t dp_expert_collectives_per_step = 0;
  bool empty() const { return tp <= 1 && dp_expert_collectives_per_step == 0; }
  double step_ns = 0;   // latencies of every collective of the step
  double token_ns = 0;  // all-reduce bandwidth, per token computed
  double seq_ns = 0;    // logits all-gather bandwidth, per sequence sampled
  std::string Describe() const;
};
// `full` is the whole model (not the rank's); act_bytes the activation dtype.
// dp > 1 and ep > 1 (an MoE model, DP attention): the DP group's expert
// dispatch and combine as vLLM's default all2all backend
// (allgather_reducescatter) runs them: per MoE layer an all-gather of every
// DP rank's tokens and a reduce-scatter back, each L + (dp - 1) / dp x
// (dp x tokens) x hidden x act_bytes / B with every DP rank taken to have
// this rank's tokens (balanced; an upper bound for the busiest rank).
// `link` is the TP group's; `dp_link` the DP group's (nullptr: `link`).
TensorParallelCollectives CompileCollectives(const ModelArch& full, int32_t tp,
                                             const CollectiveLink& link, int act_bytes,
                                             int32_t dp = 1, int32_t ep = 1,
                                             const CollectiveLink* dp_link = nullptr);

// One TP replica's step: the rank's own step (`rank_model`, built on
// TensorParallelRank) plus the collectives on the device side (vLLM does
// not overlap them with compute). Cost() adds O(prefills) to the rank's.
class TensorParallelStepModel final : public StepTimeModel {
 public:
  TensorParallelStepModel(std::shared_ptr<const StepTimeModel> rank_model,
                          TensorParallelCollectives collectives);
  StepCost Cost(const StepBatch& batch) const override;
  std::string Describe() const override;
  const TensorParallelCollectives& collectives() const { return c_; }

 private:
  std::shared_ptr<const StepTimeModel> rank_;
  TensorParallelCollectives c_;
};

// Pipeline parallelism (--pipeline-parallel-size, vLLM V1):
//   - Layers: vllm/distributed/utils.py get_pp_indices: num_layers / PP per
//     stage; the num_layers % PP remainder layers go one each to the stages
//     before the last, from the second-to-last backwards (the last stage
//     runs the final norm and LM head). VLLM_PP_LAYER_PARTITION is not
//     modelled.
//   - Embedding and LM head: the first stage looks tokens up, the last runs
//     the LM head and sampling. Gemma 4 (vllm/model_executor/models/
//     gemma4.py) builds embed_tokens on every stage, the tied LM head is
//     that table: every stage holds it. Other models hold the embedding on
//     the first stage (PPMissingLayer elsewhere) and the LM head on the
//     last, the tied one being the embedding table there again. Vision /
//     audio encoders: on the first stage.
//   - KV: each stage caches its own layers. The KV cache groups are global
//     (over all layers, as vLLM's get_kv_cache_configs forms them); a stage
//     allocates, per block, one page for each layer slot of its fullest
//     projected group, so its block bytes are page x the most layers of one
//     group it holds; each worker profiles its own memory and the engine
//     takes the minimum number of blocks over workers.
//   - Transfer between stages: the IntermediateTensors of the model, per
//     token: hidden + residual (Llama, DeepSeek: both tensors) or hidden
//     alone (Gemma 4: its layers return no residual) x activation bytes,
//     split over the TP ranks and all-gathered in the next stage
//     (send_tensor_dict with all_gather_group).
// [begin, end) layer ranges of the PP stages. REQUIRES: 1 <= pp <= layers.
std::vector<std::pair<int32_t, int32_t>> PipelineStageLayers(int32_t num_layers,
                                                             int32_t pp);
// Stage `stage` of `pp` of the (rank) model `m`: its layers and roles.
ModelArch PipelineStage(const ModelArch& m, int32_t stage, int32_t pp);
// The most layers of one global KV group (`layers_per_group` layers of each
// attention type in layer order, PlanKvLayout) among `stage`'s layers:
// the stage's block is that many pages.
int32_t PipelineStageBlockLayers(const ModelArch& m, int32_t layers_per_group,
                                 int32_t stage, int32_t pp);
// Activation bytes per token one stage sends to the next.
double PipelineTransferBytesPerToken(const ModelArch& full, int act_bytes);

// The point-to-point transfer between two stages as coefficients: one
// transfer costs step_ns + token_ns x tokens (latency + bytes / TP over the
// link, plus the receiving TP group's all-gather when TP > 1).
struct PipelineTransfer {
  double step_ns = 0;
  double token_ns = 0;
};
PipelineTransfer CompilePipelineTransfer(const ModelArch& full, int32_t tp,
                                         const CollectiveLink& link, int act_bytes);

// The batch queue of a pipeline, exactly: batch b enters stage 0 when stage
// 0 is free and batch b - 1 has left it (and not before `ready_ns[b]`),
// and stage s + 1 when it leaves stage s, the transfer done, and stage
// s + 1 is free. stage_ns[s]: a batch's time in stage s; transfer_ns: each
// hop. Returns each batch's finish time (leaves the last stage). One batch
// alone: sum of stages + (PP - 1) transfers; a stream of equal batches
// ready at 0: one finishes every max(stage time) (transfers overlap: each
// hop is its own link). REQUIRES: stage_ns non-empty.
std::vector<double> PipelineFinishTimes(const std::vector<double>& stage_ns,
                                        double transfer_ns,
                                        const std::vector<double>& ready_ns);

// One PP replica's step model. The engine runs vLLM V1's batch queue on it
// (sim/engine.h: up to PP batches in flight, each stage one batch at a
// time, as PipelineFinishTimes) from PipelineStageCosts: each stage's
// device time, host time once (the first stage's: the scheduler runs
// once) and one transfer a hop. Cost is one batch's whole pass, the sum of
// the stages + (PP - 1) transfers: the time of a batch alone.
class PipelineStepModel final : public StepTimeModel {
 public:
  PipelineStepModel(std::vector<std::shared_ptr<const StepTimeModel>> stages,
                    PipelineTransfer transfer);
  StepCost Cost(const StepBatch& batch) const override;
  std::string Describe() const override;
  int32_t num_pipeline_stages() const override { return num_stages(); }
  // Per stage device times, the first stage's host time and one hop
  // (TransferNs rounded to ns): the engine's batch queue (sim/engine.h).
  PipelineCost PipelineStageCosts(const StepBatch& batch,
                                  std::span<TimeNs> stage_device_ns) const override;
  // Each stage's cost of `batch` (device_ns as Cost adds them).
  std::vector<StepCost> StageCosts(const StepBatch& batch) const;
  double TransferNs(const StepBatch& batch) const;
  int32_t num_stages() const { return static_cast<int32_t>(stages_.size()); }

 private:
  std::vector<std::shared_ptr<const StepTimeModel>> stages_;
  PipelineTransfer transfer_;
};

}  // namespace servesim

#endif  // SERVESIM_HWMODELS_PARALLELISM_H_
