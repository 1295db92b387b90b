// Paged KV cache manager of one replica, after vLLM V1's KVCacheManager /
// BlockPool / SingleTypeKVCacheManager (full attention and sliding window).
//
// One shared pool of `num_blocks` blocks (the reserved null block is not
// counted) serves every KV cache group; each request holds one block table
// per group. A full-attention group holds ceil(tokens / block_size) blocks.
// A sliding-window group holds only the blocks that overlap the last
// `window - 1` computed tokens plus the tokens being computed: earlier ones
// are released (replaced by the null block) as the request advances.
//
// Prefix caching (when enabled): a full block is identified by a chained
// hash (parent hash, block content, group). Content comes from
// RequestSpec::prefix_hashes: a KV block covering sequence tokens [s, e)
// with e <= the hashed tokens (KvRequestView::HashedTokens: the prompt and
// the first hashed_output_tokens generated tokens, at most the hashes'
// span) is identified by the trace blocks s / hash_block_tokens ..
// (e - 1) / hash_block_tokens and the offset s % hash_block_tokens; other
// blocks (past the hashed part) are unique to the request. Prefix hashes are chained
// (traces/prefix_hash.h: equal hashes at index i mean equal trace blocks 0..i), so the
// first and last trace block stand for every one between. A block that becomes full
// holding a key another block already holds stays uncached: the first keeps the key (vLLM
// keeps both, which differs only once the first is evicted while the second is still
// held). Freed blocks keep their hash and go to the tail of an LRU free queue, tail
// blocks of a request first so they are evicted first; an allocation takes the queue head
// and evicts its hash. A prefix hit is the longest run of cached whole blocks from the
// left, at most num_tokens - 1 tokens, equal for all groups (a multiple of every group's
// block size). Simplification for sliding groups: the hit length is the largest such
// length L <= the full-attention hit for which each sliding group has every
// block overlapping tokens [L - window + 1, L) cached (vLLM searches
// right-to-left for the same condition).
// Unique blocks are registered in the cache only when their request is
// preempted (only that request can ever hit them, when it resumes), which
// saves hash-map work. vLLM registers every block when it becomes full, so
// two outcomes differ: a sliding-window block released before the
// preemption is never registered, so the resumed request misses a hit
// whose window needs it (KvCacheTest.SlidingBlockReleasedBeforePreemption-
// IsNeverHit); and a unique key still held by an earlier copy when a block
// becomes full is taken at the preemption if that copy was evicted since.
//
// Block identity: only a block that holds a prefix-cache key can ever be
// found again, so only such blocks carry an identity (a "label": an index
// into the block metadata, minted when the key is registered and returned
// when the key is evicted). Every other block is anonymous: tables hold a
// marker, and the free queue holds runs of anonymous blocks as counts, in
// their LRU positions, so the order in which keyed blocks are evicted is
// exactly that of a queue of individual blocks. Allocation pops the queue
// head (evicting a key when the head is a keyed block) and always yields an
// anonymous block. With no shared content (a trace without prefix hashes)
// no block is ever labelled and the pool is a few counters.
//
// kv_cache_model_test drives this class and a literal reference
// (ReferenceKvCache in sim/kv_cache_model.h) with the same random
// operations and compares them after each one.
//
// Thread-compatible. Allocate/Free are O(blocks touched); no heap
// allocation in steady state (slot tables keep their capacity). Without
// prefix caching, blocks are only counted (no block ids).
#ifndef SERVESIM_SIM_KV_CACHE_H_
#define SERVESIM_SIM_KV_CACHE_H_

#include <algorithm>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "sim/request.h"
#include "sim/server_config.h"

namespace servesim {

// The peak-blocks rule, in its two forms (the one home of both; tests in
// kv_cache_test state where they differ).
//
// The most blocks one request holds at once when its KV reaches
// `kv_tokens` tokens and each step computes at most `max_chunk_tokens`:
// full groups ceil(kv_tokens / bs); sliding groups the blocks overlapping
// the last window - 1 computed tokens plus one chunk, at most
// ceil((window - 1 + max_chunk_tokens) / bs) + 1 (the window may start
// inside a block), and never more than ceil(kv_tokens / bs). The scheduler
// rejects a request above the pool with it (Scheduler::CheckFits).
int64_t MaxBlocksHeld(const KvCacheSpec& spec, int64_t kv_tokens,
                      int64_t max_chunk_tokens);
// The same for one group (the sum over groups is MaxBlocksHeld); also
// vLLM's admission cap of a group (apply_admission_cap).
int64_t MaxBlocksHeldInGroup(const KvGroupSpec& group, int64_t kv_tokens,
                             int64_t max_chunk_tokens);
// vLLM's estimate of the same (KVCacheSpec.max_memory_usage_bytes over the
// page size), behind its "Maximum concurrency" line and its start-up check
// that max_model_len fits: sliding groups
// ceil(min(window - 1 + in_flight_tokens, tokens) / bs) + 1. It caps the
// span before adding the boundary block, so for a request shorter than
// window - 1 + in_flight_tokens it counts one block per sliding group more
// than MaxBlocksHeld (a window that has not slid starts at token 0, on a
// block boundary). The memory planner reports this one, as vLLM does.
int64_t VllmMaxBlocksPerRequest(const KvCacheSpec& spec, int64_t tokens,
                                int64_t in_flight_tokens);

// What the KV cache needs to know about a request's content.
struct KvRequestView {
  RequestId id = 0;
  int32_t input_tokens = 0;
  std::span<const uint64_t> prefix_hashes;
  int32_t hash_block_tokens = 0;
  // RequestSpec::hashed_output_tokens.
  int32_t hashed_output_tokens = 0;

  // Leading tokens of the sequence (prompt, then output) whose content the
  // hashes name: min(input + hashed output, hashes x hash_block_tokens).
  int64_t HashedTokens() const {
    if (hash_block_tokens <= 0) return 0;
    return std::min<int64_t>(
        int64_t{input_tokens} + hashed_output_tokens,
        static_cast<int64_t>(prefix_hashes.size()) * hash_block_tokens);
  }
};

// The view of a request the KV cache uses (hashed output capped at the
// tokens the request generates). Inline: the scheduler builds one per
// running request per step.
inline KvRequestView KvViewOf(const RequestSpec& spec) {
  return KvRequestView{spec.id, spec.input_tokens, spec.prefix_hashes,
                       spec.hash_block_tokens,
                       std::clamp(spec.hashed_output_tokens, 0, spec.output_tokens)};
}

class KvCache {
 public:
  // Errors: no groups, num_blocks < 1, block size < 1, negative window.
  static absl::StatusOr<std::unique_ptr<KvCache>> Create(const KvCacheSpec& spec,
                                                         bool enable_prefix_caching);
  KvCache& operator=(const KvCache&) = delete;

  // An independent copy of this cache's whole state (pool, prefix cache,
  // LRU order, slots), e.g. a warmed prefix cache many runs start from.
  std::unique_ptr<KvCache> Clone() const {
    std::unique_ptr<KvCache> copy(new KvCache(*this));
    copy->last_question_ = HitQuestion{};  // names the source's requests
    return copy;
  }

  // Of the cached blocks, keeps the keys that `requests` could hit (each
  // one's shared prompt blocks, every group) and makes every other cached
  // block anonymous in its place in the LRU queue; labels are renumbered
  // and the queue and map shrunk to what is left. For runs whose requests
  // are only `requests`, hits, evictions and free counts are the same as
  // from the cache before the call (a dropped key could only ever be hit
  // by another prompt), and copying the state (Clone) and probing it cost
  // what the kept keys cost. No effect without prefix caching.
  // REQUIRES: no block held (num_used_blocks() == 0).
  void RetainKeysOf(std::span<const KvRequestView> requests);

  // servesim::MaxBlocksHeld for this cache's groups.
  int64_t MaxBlocksHeld(int64_t kv_tokens, int64_t max_chunk_tokens) const {
    return servesim::MaxBlocksHeld(spec_, kv_tokens, max_chunk_tokens);
  }

  // Prefix-cache hit, in tokens, for a request about to be admitted whose
  // sequence has `num_tokens` tokens (prompt plus tokens generated before a
  // preemption). Remembers the hit blocks for the next Allocate(use_hit).
  // `may_have_unique_hits`: the request was preempted before, so its own
  // unique blocks may still be cached. 0 when prefix caching is off.
  int32_t FindPrefixHit(const KvRequestView& req, int32_t num_tokens,
                        bool may_have_unique_hits);

  // vLLM's admission gate (scheduler_reserve_full_isl, allocate_slots'
  // full_sequence_must_fit): whether the free blocks hold the request's
  // whole current sequence of `full_tokens` tokens, given the prefix hit
  // the last FindPrefixHit returned (`hit_tokens`): per group,
  // MaxBlocksHeldInGroup(full_tokens, max_chunk_tokens) less the hit
  // blocks, plus the hit blocks that would leave the free queue.
  // `max_chunk_tokens`: vLLM's max_in_flight_tokens (the token budget x
  // the batches in flight).
  bool FullSequenceFits(int32_t hit_tokens, int64_t full_tokens,
                        int64_t max_chunk_tokens) const;

  // Makes `slot` hold KV for tokens [0, num_computed + num_new). First
  // releases sliding-window blocks that fell out of the window (as vLLM
  // does, even when the allocation then fails). Returns false, and
  // allocates nothing, when the free blocks do not suffice (a simulated
  // outcome). `use_hit`: the slot is empty and num_computed is the value
  // the last FindPrefixHit returned; the hit blocks are taken.
  // `num_in_flight`: of the num_computed tokens, those of a step whose
  // outputs are not yet processed (async scheduling); the window is slid
  // on the processed tokens only, as vLLM 0.26+ does (remove_skipped_blocks
  // with total_computed_tokens - num_in_flight_tokens), so the in-flight
  // step can still read its window.
  bool Allocate(int32_t slot, const KvRequestView& req, int32_t num_computed,
                int32_t num_new, bool use_hit, int32_t num_in_flight = 0) {
    // The common decode step stays inside the blocks already held.
    if (!use_hit && static_cast<size_t>(slot) < fast_.size()) {
      const SlotFast& f = fast_[slot];
      if (static_cast<int64_t>(num_computed) + num_new <= f.alloc_limit &&
          num_computed - num_in_flight < f.release_at &&
          static_cast<int64_t>(num_computed) + num_new < f.hash_at) {
        return true;
      }
    }
    return AllocateSlow(slot, req, num_computed, num_new, use_hit, num_in_flight);
  }

  // Releases every block of `slot` (tail blocks first). `preempted`: also
  // registers the request's full unique blocks (KV of the first
  // `num_computed` tokens) so it can hit them when it resumes.
  void Free(int32_t slot, const KvRequestView& req, int32_t num_computed, bool preempted);

  int64_t num_blocks() const { return num_blocks_; }
  int64_t num_free_blocks() const { return num_free_; }
  int64_t num_used_blocks() const { return num_used_; }
  // Blocks registered in the prefix cache, in use or free (0 without
  // prefix caching).
  int64_t num_cached_blocks() const { return static_cast<int64_t>(cached_.size()); }
  bool prefix_caching() const { return caching_; }
  const KvCacheSpec& spec() const { return spec_; }

  // free + used == total and counters non-negative; O(1). With `deep`,
  // also walks the free queue and every table (O(num_blocks + tables)).
  bool CheckInvariant(bool deep = false) const;

 private:
  struct GroupTable {
    // Caching mode: entries 0 (null), kAnon or a label; entries at and past
    // blocks.size() (up to num_blocks) are kAnon and not stored.
    std::vector<int32_t> blocks;
    int32_t num_blocks = 0;  // logical table length, null entries included
    int32_t first_live = 0;  // entries before this are the null block
    int32_t num_hashed = 0;  // leading blocks whose chain hash is known
    uint64_t last_hash = 0;  // chain hash of block num_hashed - 1
    bool hash_done = false;  // reached the request's unique content
  };
  // Per slot: while a step stays below these limits, Allocate has nothing
  // to do (the common decode step), so it returns at once.
  struct SlotFast {
    int64_t alloc_limit = 0;         // tokens the tables already cover
    int64_t release_at = INT64_MAX;  // num_computed that frees a sliding block
    // KV length at which a shared block becomes full and needs registering.
    int64_t hash_at = INT64_MAX;
  };
  struct GroupInfo {
    int32_t block_size = 16;
    int32_t window = 0;  // 0: full attention
    int32_t shift = -1;  // log2(block_size) when a power of two, else -1
    // Blocks covering `tokens` >= 0 tokens (floor / ceil), without a
    // division in the common power-of-two case (this is the decode path).
    int64_t Floor(int64_t tokens) const {
      return shift >= 0 ? tokens >> shift : tokens / block_size;
    }
    int64_t Ceil(int64_t tokens) const { return Floor(tokens + block_size - 1); }
  };

  KvCache(const KvCacheSpec& spec, bool caching);
  KvCache(const KvCache&) = default;  // Clone()
  GroupTable& Table(int32_t slot, int g);
  void EnsureSlot(int32_t slot);
  uint64_t BlockHash(uint64_t parent, const KvRequestView& req, int g, int32_t j,
                     bool* shared) const;
  uint64_t SeedHash(int g) const;
  // Caching mode. Table entries: 0 the null block, kAnon an anonymous
  // block, > 0 a label.
  static constexpr int32_t kAnon = -1;
  bool AllocateSlow(int32_t slot, const KvRequestView& req, int32_t num_computed,
                    int32_t num_new, bool use_hit, int32_t num_in_flight);
  void PopFree(int64_t n);  // takes n blocks off the LRU head (evicting keys)
  void PushFreeTail(int32_t label);
  void PushAnonTail(int64_t n);
  void GrowOrCompactRing();
  void ReleaseEntries(std::vector<int32_t>& blocks, int32_t lo, int32_t hi);
  int32_t& Entry(GroupTable& t, int32_t j);  // grows the stored part
  void Register(int32_t& entry, uint64_t key);
  int32_t NewLabel();
  void ReleaseSkipped(GroupTable& t, const GroupInfo& gi, int32_t num_computed);
  void RegisterShared(GroupTable& t, const KvRequestView& req, int g, int32_t num_full);
  void UpdateFast(int32_t slot);

  KvCacheSpec spec_;
  bool caching_;
  int64_t num_blocks_;
  int64_t num_free_;
  int64_t num_used_ = 0;
  std::vector<GroupInfo> groups_;
  std::vector<int> scan_order_;  // FindPrefixHit: full-attention groups first
  int32_t num_groups_;
  int32_t align_tokens_;            // lcm of block sizes
  std::vector<GroupTable> tables_;  // slot * num_groups + g
  std::vector<SlotFast> fast_;      // per slot

  // Caching mode: per label (index 0 is the null block).
  struct BlockMeta {
    uint64_t key = 0;    // prefix-cache key (odd) of a live label; 0: unused label
    uint32_t stamp = 0;  // bumped each time the label enters the free queue
    int32_t ref = 0;     // requests holding the block; 0 <=> in the free queue
  };
  struct FreeEntry {
    int32_t block;   // a label, or kAnon: a run of anonymous blocks
    uint32_t stamp;  // label: live iff equal to the label's stamp while ref == 0;
                     // kAnon: the number of blocks in the run (> 0)
  };
  std::vector<BlockMeta> meta_;       // 16 bytes per label ever live at once
  std::vector<int32_t> free_labels_;  // labels whose key was evicted
  // The LRU free queue as a ring of entries with lazy deletion of labels
  // taken by a prefix hit (their entry goes stale).
  std::vector<FreeEntry> ring_;
  uint64_t ring_mask_ = 0;
  uint64_t ring_head_ = 0, ring_tail_ = 0;
  absl::flat_hash_map<uint64_t, int32_t> cached_;  // lookup only, never iterated

  // Bumped whenever a key the last FindPrefixHit examined may have entered
  // or left cached_ (KeyMoved): that answer stays valid while it does not
  // move. The examined keys are kept as a bitmap of their hash bits, so a
  // key outside them bumps it only by a collision (a needless recount).
  uint64_t keys_version_ = 0;
  static constexpr int kWatchBits = 1 << 14;
  std::vector<uint64_t> watch_;  // kWatchBits / 64 words, empty: no caching
  static uint32_t WatchBit(uint64_t key) {
    return static_cast<uint32_t>(key >> 40) & (kWatchBits - 1);
  }
  void KeyMoved(uint64_t key) {
    if (watch_.empty()) return;
    const uint32_t b = WatchBit(key);
    if ((watch_[b >> 6] >> (b & 63)) & 1) ++keys_version_;
  }
  struct HitQuestion {
    RequestId id = -1;
    int32_t input_tokens = 0;
    const uint64_t* hashes = nullptr;
    size_t num_hashes = 0;
    int32_t hash_block_tokens = 0;
    int32_t hashed_output_tokens = 0;
    int32_t num_tokens = 0;
    bool may_have_unique_hits = false;
    uint64_t keys_version = 0;
    bool operator==(const HitQuestion&) const = default;
  };
  HitQuestion last_question_;
  int32_t last_answer_ = 0;
  // Scratch of the last FindPrefixHit (reused, no per-call allocation).
  int32_t hit_tokens_ = 0;
  // Per group, per block examined: the label (-1 missing; kNotLooked: a
  // sliding group's block no window needed) and the chain hash.
  static constexpr int32_t kNotLooked = -2;
  std::vector<std::vector<int32_t>> hit_ids_;
  std::vector<std::vector<uint64_t>> hit_hashes_;
  // cached_'s label for `key` (-1: none), marked in watch_.
  int32_t LookUp(uint64_t key) {
    const uint32_t b = WatchBit(key);
    watch_[b >> 6] |= uint64_t{1} << (b & 63);
    const auto it = cached_.find(key);
    return it == cached_.end() ? -1 : it->second;
  }
};

}  // namespace servesim

#endif  // SERVESIM_SIM_KV_CACHE_H_
