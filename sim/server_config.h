// The plain structs that configure one simulated replica: its scheduler
// and its paged KV cache. hwmodels' memory planner fills KvCacheSpec.
#ifndef SERVESIM_SIM_SERVER_CONFIG_H_
#define SERVESIM_SIM_SERVER_CONFIG_H_

#include <cstdint>
#include <vector>

namespace servesim {

// vLLM V1 scheduler settings (names as `vllm serve` flags).
struct SchedulerConfig {
  int32_t max_num_seqs = 256;
  int32_t max_num_batched_tokens = 2048;
  int32_t max_model_len = 8192;
  bool enable_chunked_prefill = true;
  bool enable_prefix_caching = true;
  // Two batches in flight: host work of step n+1 overlaps device work of
  // step n (see StepCost).
  bool async_scheduling = false;
  // vLLM's scheduler_reserve_full_isl (on by default since vLLM PR #37307,
  // spring 2026; docs/architecture.md on which builds): a waiting request is
  // admitted only when the free blocks hold its whole current sequence
  // (KvCache::FullSequenceFits), not just its first chunk.
  bool reserve_full_isl = true;
};

// One KV cache group of the hybrid allocator: layers of one attention type
// sharing a block table. All groups draw blocks from one shared pool.
struct KvGroupSpec {
  // Tokens per block in this group (page-size equalisation gives sliding
  // groups with smaller heads a larger block size).
  int32_t block_size_tokens = 16;
  // 0 for full attention; otherwise the sliding window in tokens: blocks
  // wholly outside the window are freed as the request advances.
  int32_t sliding_window = 0;
  // Layers in this group (informational; capacity is in blocks).
  int32_t num_layers = 1;

  bool operator==(const KvGroupSpec&) const = default;
};

struct KvCacheSpec {
  // Blocks in the shared pool, excluding the reserved null block.
  int64_t num_blocks = 0;
  std::vector<KvGroupSpec> groups;

  bool operator==(const KvCacheSpec&) const = default;
};

}  // namespace servesim

#endif  // SERVESIM_SIM_SERVER_CONFIG_H_
