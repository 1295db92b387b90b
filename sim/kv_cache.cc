#include "sim/kv_cache.h"

#include <algorithm>
#include <bit>
#include <numeric>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_format.h"
#include "sim/base/hash.h"
#include "sim/base/int_math.h"
#include "sim/base/status_macros.h"

namespace servesim {

namespace {

constexpr uint64_t kUniqueSalt = 0x5eed0f00dULL;

}  // namespace

absl::StatusOr<std::unique_ptr<KvCache>> KvCache::Create(const KvCacheSpec& spec,
                                                         bool enable_prefix_caching) {
  if (spec.groups.empty()) {
    return absl::InvalidArgumentError(
        "KvCacheSpec.groups: empty; need at least one group");
  }
  if (spec.num_blocks < 1 || spec.num_blocks > (int64_t{1} << 30)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "KvCacheSpec.num_blocks: %d is out of range [1, 2^30]", spec.num_blocks));
  }
  for (size_t g = 0; g < spec.groups.size(); ++g) {
    const KvGroupSpec& gs = spec.groups[g];
    if (gs.block_size_tokens < 1 || gs.block_size_tokens > 4096) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "KvCacheSpec.groups[%d].block_size_tokens: %d is out of range [1, 4096]", g,
          gs.block_size_tokens));
    }
    if (gs.sliding_window < 0 || gs.sliding_window == 1) {
      // A window of 1 attends to no earlier token: its prefix-cache hit
      // would need no cached block, which vLLM never reports.
      return absl::InvalidArgumentError(absl::StrFormat(
          "KvCacheSpec.groups[%d].sliding_window: %d is out of range (0 = full "
          "attention, else >= 2)",
          g, gs.sliding_window));
    }
  }
  return std::unique_ptr<KvCache>(new KvCache(spec, enable_prefix_caching));
}

KvCache::KvCache(const KvCacheSpec& spec, bool caching)
    : spec_(spec),
      caching_(caching),
      num_blocks_(spec.num_blocks),
      num_free_(spec.num_blocks),
      num_groups_(static_cast<int32_t>(spec.groups.size())) {
  align_tokens_ = 1;
  for (const KvGroupSpec& gs : spec.groups) {
    GroupInfo gi{gs.block_size_tokens, gs.sliding_window};
    if ((gi.block_size & (gi.block_size - 1)) == 0)
      gi.shift = std::countr_zero(static_cast<uint32_t>(gi.block_size));
    groups_.push_back(gi);
    align_tokens_ = std::lcm(align_tokens_, gs.block_size_tokens);
  }
  for (int pass = 0; pass < 2; ++pass) {
    for (int g = 0; g < num_groups_; ++g) {
      if ((groups_[g].window > 0) == (pass == 1)) scan_order_.push_back(g);
    }
  }
  if (caching_) {
    meta_.assign(1, BlockMeta{});
    meta_[0].ref = 1;  // the null block is never free
    ring_.resize(64);
    ring_mask_ = ring_.size() - 1;
    PushAnonTail(num_blocks_);
    hit_ids_.resize(num_groups_);
    hit_hashes_.resize(num_groups_);
    watch_.assign(kWatchBits / 64, 0);
  }
}

int64_t MaxBlocksHeldInGroup(const KvGroupSpec& g, int64_t kv_tokens,
                             int64_t max_chunk_tokens) {
  const int64_t full = CeilDiv(kv_tokens, g.block_size_tokens);
  if (g.sliding_window <= 0) return full;
  const int64_t sliding =
      CeilDiv(g.sliding_window - 1 + max_chunk_tokens, g.block_size_tokens) + 1;
  return std::min(full, sliding);
}

int64_t MaxBlocksHeld(const KvCacheSpec& spec, int64_t kv_tokens,
                      int64_t max_chunk_tokens) {
  int64_t total = 0;
  for (const KvGroupSpec& g : spec.groups) {
    total += MaxBlocksHeldInGroup(g, kv_tokens, max_chunk_tokens);
  }
  return total;
}

int64_t VllmMaxBlocksPerRequest(const KvCacheSpec& spec, int64_t tokens,
                                int64_t in_flight_tokens) {
  int64_t total = 0;
  for (const KvGroupSpec& g : spec.groups) {
    if (g.sliding_window <= 0) {
      total += CeilDiv(tokens, g.block_size_tokens);
    } else {
      const int64_t span =
          std::min<int64_t>(g.sliding_window - 1 + in_flight_tokens, tokens);
      total += CeilDiv(span, g.block_size_tokens) + 1;
    }
  }
  return total;
}

KvCache::GroupTable& KvCache::Table(int32_t slot, int g) {
  return tables_[static_cast<size_t>(slot) * num_groups_ + g];
}

void KvCache::EnsureSlot(int32_t slot) {
  SERVESIM_CHECK(slot >= 0);
  const size_t need = (static_cast<size_t>(slot) + 1) * num_groups_;
  if (tables_.size() < need) tables_.resize(std::max(need, tables_.size() * 2));
  if (fast_.size() <= static_cast<size_t>(slot)) {
    fast_.resize(std::max(static_cast<size_t>(slot) + 1, fast_.size() * 2));
  }
}

uint64_t KvCache::SeedHash(int g) const {
  return HashCombine(0x7a11ULL + static_cast<uint64_t>(g),
                     static_cast<uint64_t>(groups_[g].block_size));
}

uint64_t KvCache::BlockHash(uint64_t parent, const KvRequestView& req, int g, int32_t j,
                            bool* shared) const {
  const int64_t bs = groups_[g].block_size;
  const int64_t s = j * bs;
  const int64_t e = s + bs;
  if (e <= req.HashedTokens()) {
    *shared = true;
    const int64_t hbt = req.hash_block_tokens;
    uint64_t content =
        HashCombine(req.prefix_hashes[s / hbt], req.prefix_hashes[(e - 1) / hbt]);
    content = HashCombine(content, static_cast<uint64_t>(s % hbt));
    return HashCombine(parent, content) | 1;  // nonzero: 0 means "no key"
  }
  *shared = false;
  return HashCombine(parent, HashCombine(kUniqueSalt ^ static_cast<uint64_t>(req.id),
                                         static_cast<uint64_t>(j))) |
         1;
}

void KvCache::PopFree(int64_t n) {
  while (n > 0) {
    SERVESIM_CHECK(ring_head_ < ring_tail_);
    FreeEntry& e = ring_[ring_head_ & ring_mask_];
    if (e.block == kAnon) {
      const int64_t take = std::min<int64_t>(n, e.stamp);
      e.stamp -= static_cast<uint32_t>(take);
      n -= take;
      if (e.stamp == 0) ++ring_head_;
      continue;
    }
    ++ring_head_;
    BlockMeta& m = meta_[e.block];
    if (m.ref == 0 && m.stamp == e.stamp) {
      // Evict the key; the block leaves as an anonymous block.
      auto it = cached_.find(m.key);
      if (it != cached_.end() && it->second == e.block) cached_.erase(it);
      KeyMoved(m.key);
      m.key = 0;
      ++m.stamp;  // any entry still naming the label is stale
      free_labels_.push_back(e.block);
      --n;
    }
  }
}

int32_t KvCache::NewLabel() {
  if (!free_labels_.empty()) {
    const int32_t b = free_labels_.back();
    free_labels_.pop_back();
    return b;
  }
  meta_.push_back(BlockMeta{});
  return static_cast<int32_t>(meta_.size() - 1);
}

void KvCache::PushFreeTail(int32_t label) {
  if (ring_tail_ - ring_head_ == ring_.size()) GrowOrCompactRing();
  BlockMeta& m = meta_[label];
  ++m.stamp;
  ring_[ring_tail_ & ring_mask_] = FreeEntry{label, m.stamp};
  ++ring_tail_;
}

void KvCache::PushAnonTail(int64_t n) {
  while (n > 0) {
    if (ring_tail_ > ring_head_) {
      FreeEntry& last = ring_[(ring_tail_ - 1) & ring_mask_];
      if (last.block == kAnon && last.stamp < (1u << 31)) {
        const int64_t add = std::min<int64_t>(n, (int64_t{1} << 31) - last.stamp);
        last.stamp += static_cast<uint32_t>(add);
        n -= add;
        continue;
      }
    }
    if (ring_tail_ - ring_head_ == ring_.size()) GrowOrCompactRing();
    const int64_t add = std::min<int64_t>(n, int64_t{1} << 31);
    ring_[ring_tail_ & ring_mask_] = FreeEntry{kAnon, static_cast<uint32_t>(add)};
    ++ring_tail_;
    n -= add;
  }
}

void KvCache::GrowOrCompactRing() {
  // Drop stale label entries and merge the anonymous runs they separated;
  // double the ring when it stays more than half full (amortised O(1) per
  // push).
  std::vector<FreeEntry> live;
  live.reserve(ring_tail_ - ring_head_);
  for (uint64_t r = ring_head_; r < ring_tail_; ++r) {
    const FreeEntry e = ring_[r & ring_mask_];
    if (e.block != kAnon) {
      const BlockMeta& m = meta_[e.block];
      if (m.ref != 0 || m.stamp != e.stamp) continue;
    } else if (!live.empty() && live.back().block == kAnon &&
               static_cast<uint64_t>(live.back().stamp) + e.stamp <=
                   (uint64_t{1} << 31)) {
      live.back().stamp += e.stamp;
      continue;
    }
    live.push_back(e);
  }
  size_t cap = ring_.size();
  while (2 * live.size() >= cap) cap *= 2;
  if (cap != ring_.size()) {
    ring_.assign(cap, FreeEntry{0, 0});
    ring_mask_ = cap - 1;
  }
  ring_head_ = 0;
  ring_tail_ = live.size();
  std::copy(live.begin(), live.end(), ring_.begin());
}

void KvCache::RetainKeysOf(std::span<const KvRequestView> requests) {
  SERVESIM_CHECK(num_used_ == 0);
  if (!caching_) return;
  absl::flat_hash_set<uint64_t> keep;
  for (const KvRequestView& req : requests) {
    for (int g = 0; g < num_groups_; ++g) {
      uint64_t h = SeedHash(g);
      // Shared prompt blocks, and the hashed answer's (a resumed request
      // can hit those too).
      const auto full_blocks =
          static_cast<int32_t>(req.HashedTokens() / groups_[g].block_size);
      for (int32_t j = 0; j < full_blocks; ++j) {
        bool shared = false;
        h = BlockHash(h, req, g, j, &shared);
        if (!shared) break;
        keep.insert(h);
      }
    }
  }
  // Walk the queue head to tail: a live label whose key is kept gets a new
  // label (in queue order), every other live label becomes one anonymous
  // block in its place, stale entries go, adjacent anonymous runs merge.
  std::vector<FreeEntry> live;
  std::vector<BlockMeta> meta(1, meta_[0]);
  for (uint64_t r = ring_head_; r < ring_tail_; ++r) {
    FreeEntry e = ring_[r & ring_mask_];
    if (e.block != kAnon) {
      const BlockMeta& m = meta_[e.block];
      SERVESIM_CHECK(m.ref == 0);
      if (m.stamp != e.stamp) continue;  // stale
      if (keep.contains(m.key)) {
        meta.push_back(m);
        e.block = static_cast<int32_t>(meta.size() - 1);
        live.push_back(e);
        continue;
      }
      e = FreeEntry{kAnon, 1};
    }
    if (!live.empty() && live.back().block == kAnon &&
        static_cast<uint64_t>(live.back().stamp) + e.stamp <= (uint64_t{1} << 31)) {
      live.back().stamp += e.stamp;
    } else {
      live.push_back(e);
    }
  }
  absl::flat_hash_map<uint64_t, int32_t> cached;
  cached.reserve(meta.size() - 1);
  for (size_t b = 1; b < meta.size(); ++b) cached.emplace(meta[b].key, b);
  size_t cap = 64;
  while (2 * live.size() >= cap) cap *= 2;
  ring_.assign(cap, FreeEntry{0, 0});
  std::copy(live.begin(), live.end(), ring_.begin());
  ring_mask_ = cap - 1;
  ring_head_ = 0;
  ring_tail_ = live.size();
  meta_ = std::move(meta);
  free_labels_.clear();
  cached_ = std::move(cached);
  ++keys_version_;
}

int32_t& KvCache::Entry(GroupTable& t, int32_t j) {
  const int32_t stored = static_cast<int32_t>(t.blocks.size());
  if (j >= stored) {
    // Positions before first_live were released (null); the rest anonymous.
    t.blocks.resize(std::max(stored, std::min(t.first_live, j + 1)), 0);
    t.blocks.resize(j + 1, kAnon);
  }
  return t.blocks[j];
}

void KvCache::ReleaseEntries(std::vector<int32_t>& blocks, int32_t lo, int32_t hi) {
  // Releases blocks[hi - 1] down to blocks[lo] (tail first) in queue order;
  // consecutive anonymous blocks enter the queue as one run. Entries past
  // blocks.size() are anonymous.
  const int32_t stored = static_cast<int32_t>(blocks.size());
  int64_t anon = std::max(0, hi - std::max(lo, stored));
  int64_t freed = anon;
  for (int32_t j = std::min(hi, stored) - 1; j >= lo; --j) {
    const int32_t b = blocks[j];
    if (b == kAnon) {
      ++anon;
      ++freed;
      continue;
    }
    SERVESIM_CHECK(b > 0 && meta_[b].ref > 0);
    if (--meta_[b].ref == 0) {
      if (anon > 0) {
        PushAnonTail(anon);
        anon = 0;
      }
      PushFreeTail(b);
      ++freed;
    }
  }
  if (anon > 0) PushAnonTail(anon);
  num_free_ += freed;
  num_used_ -= freed;
}

void KvCache::Register(int32_t& entry, uint64_t key) {
  if (entry != kAnon) return;  // a label: already keyed
  auto [it, inserted] = cached_.try_emplace(key, 0);
  if (!inserted) return;  // another block holds the key: this one stays anonymous
  KeyMoved(key);
  const int32_t b = NewLabel();
  BlockMeta& m = meta_[b];
  m.key = key;
  m.ref = 1;
  it->second = b;
  entry = b;
}

void KvCache::ReleaseSkipped(GroupTable& t, const GroupInfo& gi, int32_t num_computed) {
  if (gi.window == 0) return;
  const int64_t skipped_tokens = static_cast<int64_t>(num_computed) - gi.window + 1;
  if (skipped_tokens <= 0) return;
  const int32_t new_first =
      std::min<int32_t>(static_cast<int32_t>(gi.Floor(skipped_tokens)), t.num_blocks);
  if (new_first <= t.first_live) return;
  if (caching_) {
    ReleaseEntries(t.blocks, t.first_live, new_first);
    const int32_t stored =
        std::min<int32_t>(new_first, static_cast<int32_t>(t.blocks.size()));
    if (stored > t.first_live) {
      std::fill(t.blocks.begin() + t.first_live, t.blocks.begin() + stored, 0);
    }
  } else {
    const int64_t n = new_first - t.first_live;
    num_free_ += n;
    num_used_ -= n;
  }
  t.first_live = new_first;
}

void KvCache::RegisterShared(GroupTable& t, const KvRequestView& req, int g,
                             int32_t num_full) {
  // Chain hashes advance only while the content is shared; unique blocks
  // are registered lazily on preemption (see the header).
  if (t.hash_done) return;
  const int64_t hashed_limit = req.HashedTokens();
  const int64_t bs = groups_[g].block_size;
  while (t.num_hashed < num_full) {
    if ((t.num_hashed + 1) * bs > hashed_limit) {
      t.hash_done = true;
      return;
    }
    bool shared = false;
    const uint64_t h = BlockHash(t.num_hashed == 0 ? SeedHash(g) : t.last_hash, req, g,
                                 t.num_hashed, &shared);
    SERVESIM_CHECK(shared);
    if (t.num_hashed >= t.first_live) Register(Entry(t, t.num_hashed), h);
    t.last_hash = h;
    ++t.num_hashed;
  }
}

int32_t KvCache::FindPrefixHit(const KvRequestView& req, int32_t num_tokens,
                               bool may_have_unique_hits) {
  hit_tokens_ = 0;
  if (!caching_ || num_tokens <= 1) return 0;
  // The same question with no key added or evicted since: the same answer,
  // and the scratch (hit_ids_, hit_hashes_) still holds it. The scheduler
  // asks again each step while the waiting head's allocation fails.
  const HitQuestion q{req.id,
                      req.input_tokens,
                      req.prefix_hashes.data(),
                      req.prefix_hashes.size(),
                      req.hash_block_tokens,
                      req.hashed_output_tokens,
                      num_tokens,
                      may_have_unique_hits,
                      keys_version_};
  if (q == last_question_) {
    hit_tokens_ = last_answer_;
    return hit_tokens_;
  }
  std::fill(watch_.begin(), watch_.end(), 0);
  const int32_t max_hit = num_tokens - 1;
  int32_t full_hit = max_hit - max_hit % align_tokens_;
  // Full-attention groups first: their leading run of found blocks bounds
  // the hit, so a sliding group is hashed only up to it.
  for (const int g : scan_order_) {
    const GroupInfo& gi = groups_[g];
    int32_t max_blocks = max_hit / gi.block_size;
    if (gi.window > 0) {
      max_blocks =
          std::min(max_blocks, static_cast<int32_t>(CeilDiv(full_hit, gi.block_size)));
    }
    auto& ids = hit_ids_[g];
    auto& hashes = hit_hashes_[g];
    ids.clear();
    hashes.clear();
    uint64_t h = SeedHash(g);
    for (int32_t j = 0; j < max_blocks; ++j) {
      bool shared = false;
      h = BlockHash(h, req, g, j, &shared);
      if (!shared && !may_have_unique_hits) break;
      hashes.push_back(h);
      if (gi.window > 0) {
        ids.push_back(kNotLooked);  // looked up only where a window needs it
        continue;
      }
      const int32_t id = LookUp(h);
      if (id < 0) break;  // full attention: stop at the first miss
      ids.push_back(id);
    }
    // Blocks beyond those examined are misses.
    full_hit = std::min(full_hit, static_cast<int32_t>(ids.size()) * gi.block_size);
  }
  // Sliding groups need every block overlapping [L - window + 1, L). A
  // missing block m rules out every L whose window holds it, so the next
  // candidate is the largest aligned L <= m x block size. Allocate reads
  // the ids of that window only.
  int32_t hit = full_hit - full_hit % align_tokens_;
  while (hit > 0) {
    int32_t next = hit;
    for (int g = 0; g < num_groups_ && next == hit; ++g) {
      const GroupInfo& gi = groups_[g];
      if (gi.window == 0) continue;
      auto& ids = hit_ids_[g];
      const int32_t end = hit / gi.block_size;
      const int32_t begin = std::max<int32_t>(0, hit - gi.window + 1) / gi.block_size;
      for (int32_t j = end - 1; j >= begin; --j) {
        if (ids[j] == kNotLooked) ids[j] = LookUp(hit_hashes_[g][j]);
        if (ids[j] < 0) {
          next = j * gi.block_size;
          next -= next % align_tokens_;
          break;
        }
      }
    }
    if (next == hit) break;
    hit = next;
  }
  hit_tokens_ = std::max(hit, 0);
  last_question_ = q;
  last_answer_ = hit_tokens_;
  return hit_tokens_;
}

bool KvCache::FullSequenceFits(int32_t hit_tokens, int64_t full_tokens,
                               int64_t max_chunk_tokens) const {
  SERVESIM_CHECK(hit_tokens == hit_tokens_);
  int64_t need = 0;
  for (int g = 0; g < num_groups_; ++g) {
    const GroupInfo& gi = groups_[g];
    const int64_t hit_blocks = hit_tokens / gi.block_size;
    need += std::max<int64_t>(
        0, MaxBlocksHeldInGroup(spec_.groups[g], full_tokens, max_chunk_tokens) -
               hit_blocks);
    if (!caching_) continue;
    // Hit blocks in no request's table leave the free queue when taken.
    const int64_t first =
        gi.window > 0 ? std::max<int64_t>(0, hit_tokens - gi.window + 1) / gi.block_size
                      : 0;
    for (int64_t j = first; j < hit_blocks; ++j) {
      if (meta_[hit_ids_[g][j]].ref == 0) ++need;
    }
  }
  return need <= num_free_;
}

bool KvCache::AllocateSlow(int32_t slot, const KvRequestView& req, int32_t num_computed,
                           int32_t num_new, bool use_hit, int32_t num_in_flight) {
  EnsureSlot(slot);
  SERVESIM_CHECK(num_in_flight >= 0 && (!use_hit || num_in_flight == 0));
  const int64_t end_tokens = static_cast<int64_t>(num_computed) + num_new;
  if (use_hit) {
    SERVESIM_CHECK(num_computed == hit_tokens_);
    int64_t need = 0;
    for (int g = 0; g < num_groups_; ++g) {
      const GroupInfo& gi = groups_[g];
      const GroupTable& t = Table(slot, g);
      SERVESIM_CHECK(t.num_blocks == 0);
      const int32_t hit_blocks = num_computed / gi.block_size;
      int32_t first = 0;
      if (gi.window > 0) {
        first = std::max<int32_t>(0, num_computed - gi.window + 1) / gi.block_size;
      }
      if (caching_) {
        for (int32_t j = first; j < hit_blocks; ++j) {
          if (meta_[hit_ids_[g][j]].ref == 0) ++need;  // taken out of the free queue
        }
      }
      need += std::max<int64_t>(0, CeilDiv(end_tokens, gi.block_size) - hit_blocks);
    }
    if (need > num_free_) return false;
    for (int g = 0; g < num_groups_; ++g) {
      const GroupInfo& gi = groups_[g];
      GroupTable& t = Table(slot, g);
      const int32_t hit_blocks = num_computed / gi.block_size;
      int32_t first = 0;
      if (gi.window > 0) {
        first = std::max<int32_t>(0, num_computed - gi.window + 1) / gi.block_size;
      }
      t.first_live = std::min(first, hit_blocks);
      t.num_blocks = hit_blocks;
      t.num_hashed = 0;
      t.last_hash = 0;
      t.hash_done = false;
      if (caching_) {
        t.blocks.clear();
        for (int32_t j = 0; j < hit_blocks; ++j) {
          if (j < t.first_live) {
            t.blocks.push_back(0);
            continue;
          }
          const int32_t b = hit_ids_[g][j];
          if (meta_[b].ref == 0) {  // its queue entry goes stale
            --num_free_;
            ++num_used_;
          }
          ++meta_[b].ref;
          t.blocks.push_back(b);
        }
        t.num_hashed = hit_blocks;
        t.last_hash = hit_blocks > 0 ? hit_hashes_[g][hit_blocks - 1] : 0;
      }
    }
    hit_tokens_ = 0;
  } else {
    const int32_t processed = std::max(0, num_computed - num_in_flight);
    for (int g = 0; g < num_groups_; ++g) {
      ReleaseSkipped(Table(slot, g), groups_[g], processed);
    }
    int64_t need = 0;
    for (int g = 0; g < num_groups_; ++g) {
      need +=
          std::max<int64_t>(0, groups_[g].Ceil(end_tokens) - Table(slot, g).num_blocks);
    }
    if (need > num_free_) return false;
  }
  for (int g = 0; g < num_groups_; ++g) {
    const GroupInfo& gi = groups_[g];
    GroupTable& t = Table(slot, g);
    const int32_t want = static_cast<int32_t>(gi.Ceil(end_tokens));
    if (want > t.num_blocks) {
      const int32_t n = want - t.num_blocks;
      if (caching_) {
        PopFree(n);
        // New blocks are anonymous: entries past t.blocks.size() are kAnon
        // implicitly (nothing to write).
      }
      num_free_ -= n;
      num_used_ += n;
      t.num_blocks = want;
    }
    if (caching_) RegisterShared(t, req, g, static_cast<int32_t>(gi.Floor(end_tokens)));
  }
  UpdateFast(slot);
  return true;
}

void KvCache::UpdateFast(int32_t slot) {
  SlotFast f;
  f.alloc_limit = INT64_MAX;
  for (int g = 0; g < num_groups_; ++g) {
    const GroupInfo& gi = groups_[g];
    const GroupTable& t = Table(slot, g);
    f.alloc_limit = std::min<int64_t>(f.alloc_limit,
                                      static_cast<int64_t>(t.num_blocks) * gi.block_size);
    if (gi.window > 0) {
      f.release_at = std::min<int64_t>(
          f.release_at,
          static_cast<int64_t>(t.first_live + 1) * gi.block_size + gi.window - 1);
    }
    // The next block to hash becomes full when the KV reaches its end.
    if (caching_ && !t.hash_done) {
      f.hash_at = std::min<int64_t>(
          f.hash_at, static_cast<int64_t>(t.num_hashed + 1) * gi.block_size);
    }
  }
  fast_[slot] = f;
}

void KvCache::Free(int32_t slot, const KvRequestView& req, int32_t num_computed,
                   bool preempted) {
  EnsureSlot(slot);
  for (int g = 0; g < num_groups_; ++g) {
    const GroupInfo& gi = groups_[g];
    GroupTable& t = Table(slot, g);
    if (caching_) {
      if (preempted) {
        const int32_t num_full = std::min(num_computed / gi.block_size, t.num_blocks);
        while (t.num_hashed < num_full) {
          bool shared = false;
          const uint64_t h = BlockHash(t.num_hashed == 0 ? SeedHash(g) : t.last_hash, req,
                                       g, t.num_hashed, &shared);
          if (t.num_hashed >= t.first_live) Register(Entry(t, t.num_hashed), h);
          t.last_hash = h;
          ++t.num_hashed;
        }
      }
      ReleaseEntries(t.blocks, t.first_live, t.num_blocks);
      t.blocks.clear();
    } else {
      const int64_t n = t.num_blocks - t.first_live;
      num_free_ += n;
      num_used_ -= n;
    }
    t.num_blocks = 0;
    t.first_live = 0;
    t.num_hashed = 0;
    t.last_hash = 0;
    t.hash_done = false;
  }
  fast_[slot] = SlotFast{};
}

bool KvCache::CheckInvariant(bool deep) const {
  if (num_free_ < 0 || num_used_ < 0 || num_free_ + num_used_ != num_blocks_)
    return false;
  if (!deep) return true;
  if (caching_) {
    int64_t free_count = 0;
    std::vector<int32_t> refs(meta_.size(), 0);
    for (uint64_t r = ring_head_; r < ring_tail_; ++r) {
      const FreeEntry e = ring_[r & ring_mask_];
      if (e.block == kAnon) {
        if (e.stamp == 0) return false;
        free_count += e.stamp;
        continue;
      }
      if (e.block <= 0 || e.block >= static_cast<int32_t>(meta_.size())) return false;
      const BlockMeta& m = meta_[e.block];
      if (m.ref != 0 || m.stamp != e.stamp) continue;
      if (m.key == 0 || ++refs[e.block] > 1) return false;  // live once, keyed
      ++free_count;
    }
    if (free_count != num_free_) return false;
    // Every keyed label is in the map, and free (ref 0) or held.
    int64_t held_labels = 0;
    for (size_t b = 1; b < meta_.size(); ++b) {
      const BlockMeta& m = meta_[b];
      if (m.key == 0) {
        if (m.ref != 0) return false;
        continue;
      }
      auto it = cached_.find(m.key);
      if (it == cached_.end() || it->second != static_cast<int32_t>(b)) return false;
      if (m.ref == 0 && refs[b] != 1) return false;  // free label not queued
      if (m.ref > 0) ++held_labels;
    }
    // References from tables equal the reference counts; anonymous blocks
    // are held once.
    std::fill(refs.begin(), refs.end(), 0);
    int64_t held_anon = 0;
    for (const GroupTable& t : tables_) {
      if (static_cast<int32_t>(t.blocks.size()) > t.num_blocks) return false;
      for (int32_t j = t.first_live; j < t.num_blocks; ++j) {
        const int32_t b = j < static_cast<int32_t>(t.blocks.size()) ? t.blocks[j] : kAnon;
        if (b == kAnon) {
          ++held_anon;
        } else if (b <= 0) {
          return false;
        } else {
          ++refs[b];
        }
      }
    }
    if (held_anon + held_labels != num_used_) return false;
    for (size_t b = 1; b < meta_.size(); ++b) {
      if (refs[b] != meta_[b].ref) return false;
    }
  } else {
    int64_t held = 0;
    for (const GroupTable& t : tables_) held += t.num_blocks - t.first_live;
    if (held != num_used_) return false;
  }
  return true;
}

}  // namespace servesim
