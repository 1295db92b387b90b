// Model-based check of KvCache: a naive reference cache that follows the
// rules in sim/kv_cache.h literally (one object per block, the LRU free
// queue as a deque of block ids, content keys over
// every trace block a KV block spans, from a mixer of its own), and
// a decoder that turns a stream of choices into a random hybrid spec and a
// sequence of scheduler-like operations (admit with a prefix hit, step,
// finish, preempt, probe), applied to both caches and compared after every
// operation. The unit test feeds it a seeded generator; the libFuzzer
// target (sim/fuzz/kv_cache_fuzzer.cc) feeds it the fuzzer's bytes.
//
// Test support only: not linked into the simulator. Thread-compatible.
#ifndef SERVESIM_SIM_KV_CACHE_MODEL_H_
#define SERVESIM_SIM_KV_CACHE_MODEL_H_

#include <cstdint>
#include <deque>
#include <map>
#include <random>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "sim/kv_cache.h"
#include "sim/server_config.h"

namespace servesim {

// The reference. Same contract as KvCache (sim/kv_cache.h), written for
// clarity, not speed: O(num_blocks) per operation.
class ReferenceKvCache {
 public:
  ReferenceKvCache(const KvCacheSpec& spec, bool enable_prefix_caching);

  // Ignores KvCache's `may_have_unique_hits` hint: every block is looked up.
  int32_t FindPrefixHit(const KvRequestView& req, int32_t num_tokens);
  bool FullSequenceFits(int32_t hit_tokens, int64_t full_tokens,
                        int64_t max_chunk_tokens) const;
  bool Allocate(int32_t slot, const KvRequestView& req, int32_t num_computed,
                int32_t num_new, bool use_hit, int32_t num_in_flight = 0);
  void Free(int32_t slot, const KvRequestView& req, int32_t num_computed, bool preempted);

  int64_t num_free_blocks() const { return static_cast<int64_t>(free_.size()); }
  int64_t num_used_blocks() const;
  int64_t num_cached_blocks() const { return static_cast<int64_t>(cached_.size()); }
  // Blocks `slot` holds now (null entries not counted).
  int64_t HeldBy(int32_t slot) const;
  // Cached blocks taken off the free queue head so far.
  int64_t evictions() const { return evictions_; }

 private:
  struct Block {
    int32_t ref = 0;
    bool cached = false;  // holds `key` in the cache
    uint64_t key = 0;
  };
  struct Table {
    std::vector<int32_t> blocks;  // block ids; 0: the null block (released)
    int32_t num_full_seen = 0;    // blocks already offered to the cache when full
    std::vector<uint64_t> keys;   // content keys of the leading blocks
  };
  // Appends the content keys of blocks keys.size() .. n - 1.
  void ExtendKeys(std::vector<uint64_t>& keys, const KvRequestView& req, int g,
                  int32_t n) const;
  bool Shared(const KvRequestView& req, int g, int32_t j) const;
  Table& At(int32_t slot, int g);
  void Release(int32_t b);  // one reference dropped; at 0, to the queue tail
  int32_t TakeHead();       // evicts the head block's key
  void Offer(int32_t b, uint64_t key);

  KvCacheSpec spec_;
  bool caching_;
  std::vector<Block> blocks_;  // index 0 is the null block
  std::deque<int32_t> free_;   // LRU order: front is evicted first
  std::map<uint64_t, int32_t> cached_;
  std::vector<std::vector<Table>> tables_;  // [slot][group]
  int32_t hit_tokens_ = 0;
  std::vector<std::vector<int32_t>> hit_blocks_;  // [group][block index]
  int64_t evictions_ = 0;
};

// A source of bounded choices.
class ChoiceSource {
 public:
  virtual ~ChoiceSource() = default;
  // A value in [0, bound), bound >= 1. After exhaustion, returns 0.
  virtual uint32_t Next(uint32_t bound) = 0;
  virtual bool exhausted() const = 0;
};

// Seeded: never exhausted.
class RandomChoices : public ChoiceSource {
 public:
  explicit RandomChoices(uint64_t seed) : rng_(seed) {}
  uint32_t Next(uint32_t bound) override;
  bool exhausted() const override { return false; }

 private:
  std::mt19937_64 rng_;
};

// Reads the bytes (1 per choice below 256, else 2), for a fuzzer.
class ByteChoices : public ChoiceSource {
 public:
  explicit ByteChoices(std::span<const uint8_t> bytes) : bytes_(bytes) {}
  uint32_t Next(uint32_t bound) override;
  bool exhausted() const override { return pos_ >= bytes_.size(); }

 private:
  std::span<const uint8_t> bytes_;
  size_t pos_ = 0;
};

struct KvModelStats {
  int64_t ops = 0;
  int64_t admits = 0, failed_allocs = 0, preemptions = 0, hits = 0, evictions = 0;
  // Hits of a follow-up prompt that reach into an earlier request's hashed
  // answer (past that request's prompt).
  int64_t answer_hits = 0;
  // Steps allocated with the last step's tokens still in flight.
  int64_t in_flight_steps = 0;
};

// Decodes a spec and up to `max_ops` operations from `src` (stopping early
// when it is exhausted), applies each to a KvCache and a ReferenceKvCache,
// and compares return values, free/used/cached counts, the deep invariant
// and, per request, held blocks <= KvCache::MaxBlocksHeld. Returns the
// first difference as an error naming the operation and both values.
absl::Status RunKvCacheModel(ChoiceSource& src, int64_t max_ops,
                             KvModelStats* stats = nullptr);

}  // namespace servesim

#endif  // SERVESIM_SIM_KV_CACHE_MODEL_H_
