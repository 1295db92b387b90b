#include "sim/kv_cache.h"

#include <algorithm>
#include <numeric>

#include "absl/strings/str_format.h"
#include "sim/status_macros.h"

namespace servesim {
namespace {

inline uint64_t Mix(uint64_t h, uint64_t v) {
  // splitmix64-style combine: deterministic, well spread.
  uint64_t x = h ^ (v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2));
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

constexpr uint64_t kUniqueSalt = 0x5eed0f00dULL;

inline int32_t CeilDiv(int64_t a, int64_t b) { return static_cast<int32_t>((a + b - 1) / b); }

}  // namespace

absl::StatusOr<std::unique_ptr<KvCache>> KvCache::Create(const KvCacheSpec& spec,
                                                         bool enable_prefix_caching) {
  if (spec.groups.empty()) {
    return absl::InvalidArgumentError("KvCacheSpec.groups: empty; need at least one group");
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
    if (gs.sliding_window < 0) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "KvCacheSpec.groups[%d].sliding_window: %d is negative (0 = full attention)", g,
          gs.sliding_window));
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
    groups_.push_back(GroupInfo{gs.block_size_tokens, gs.sliding_window});
    align_tokens_ = std::lcm(align_tokens_, gs.block_size_tokens);
  }
  if (caching_) {
    const size_t n = static_cast<size_t>(num_blocks_) + 1;
    ref_.assign(n, 0);
    prev_.assign(n, -1);
    next_.assign(n, -1);
    key_.assign(n, 0);
    has_key_.assign(n, 0);
    ref_[0] = 1;  // the null block is never free
    for (int32_t b = 1; b <= num_blocks_; ++b) {
      prev_[b] = b - 1 >= 1 ? b - 1 : -1;
      next_[b] = b + 1 <= num_blocks_ ? b + 1 : -1;
    }
    head_ = 1;
    tail_ = static_cast<int32_t>(num_blocks_);
    hit_ids_.resize(num_groups_);
    hit_hashes_.resize(num_groups_);
    hit_prefix_.resize(num_groups_);
  }
}

int64_t KvCache::MaxBlocksHeld(int64_t kv_tokens, int64_t max_chunk_tokens) const {
  int64_t total = 0;
  for (const GroupInfo& gi : groups_) {
    const int64_t full = CeilDiv(kv_tokens, gi.block_size);
    if (gi.window == 0) {
      total += full;
    } else {
      const int64_t sliding = CeilDiv(gi.window - 1 + max_chunk_tokens, gi.block_size) + 1;
      total += std::min(full, sliding);
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
}

uint64_t KvCache::SeedHash(int g) const {
  return Mix(0x7a11ULL + static_cast<uint64_t>(g), static_cast<uint64_t>(groups_[g].block_size));
}

uint64_t KvCache::BlockHash(uint64_t parent, const KvRequestView& req, int g, int32_t j,
                            bool* shared) const {
  const int64_t bs = groups_[g].block_size;
  const int64_t s = j * bs;
  const int64_t e = s + bs;
  int64_t hashed_limit = 0;
  if (req.hash_block_tokens > 0) {
    hashed_limit = std::min<int64_t>(
        req.input_tokens, static_cast<int64_t>(req.prefix_hashes.size()) * req.hash_block_tokens);
  }
  if (e <= hashed_limit) {
    *shared = true;
    const int64_t hbt = req.hash_block_tokens;
    uint64_t content = Mix(req.prefix_hashes[s / hbt], req.prefix_hashes[(e - 1) / hbt]);
    content = Mix(content, static_cast<uint64_t>(s % hbt));
    return Mix(parent, content);
  }
  *shared = false;
  return Mix(parent, Mix(kUniqueSalt ^ static_cast<uint64_t>(req.id), static_cast<uint64_t>(j)));
}

int32_t KvCache::PopFree() {
  const int32_t b = head_;
  SERVESIM_CHECK(b > 0);
  RemoveFromFree(b);
  if (has_key_[b]) {
    auto it = cached_.find(key_[b]);
    if (it != cached_.end() && it->second == b) cached_.erase(it);
    has_key_[b] = 0;
  }
  return b;
}

void KvCache::PushFreeTail(int32_t b) {
  prev_[b] = tail_;
  next_[b] = -1;
  if (tail_ >= 0) next_[tail_] = b; else head_ = b;
  tail_ = b;
}

void KvCache::RemoveFromFree(int32_t b) {
  if (prev_[b] >= 0) next_[prev_[b]] = next_[b]; else head_ = next_[b];
  if (next_[b] >= 0) prev_[next_[b]] = prev_[b]; else tail_ = prev_[b];
  prev_[b] = next_[b] = -1;
}

void KvCache::Release(int32_t b) {
  SERVESIM_CHECK(b > 0 && ref_[b] > 0);
  if (--ref_[b] == 0) {
    PushFreeTail(b);
    ++num_free_;
    --num_used_;
  }
}

void KvCache::Register(int32_t b, uint64_t key) {
  if (has_key_[b]) return;
  auto [it, inserted] = cached_.try_emplace(key, b);
  if (inserted) {
    key_[b] = key;
    has_key_[b] = 1;
  }
}

void KvCache::ReleaseSkipped(GroupTable& t, const GroupInfo& gi, int32_t num_computed) {
  if (gi.window == 0) return;
  const int64_t skipped_tokens = static_cast<int64_t>(num_computed) - gi.window + 1;
  if (skipped_tokens <= 0) return;
  const int32_t new_first = std::min<int32_t>(static_cast<int32_t>(skipped_tokens / gi.block_size),
                                              t.num_blocks);
  if (new_first <= t.first_live) return;
  if (caching_) {
    for (int32_t j = new_first - 1; j >= t.first_live; --j) {
      Release(t.blocks[j]);
      t.blocks[j] = 0;
    }
  } else {
    const int64_t n = new_first - t.first_live;
    num_free_ += n;
    num_used_ -= n;
  }
  t.first_live = new_first;
}

void KvCache::RegisterShared(GroupTable& t, const KvRequestView& req, int g, int32_t num_full) {
  // Chain hashes advance only while the content is shared; unique blocks
  // are registered lazily on preemption (see the header).
  while (t.num_hashed < num_full) {
    bool shared = false;
    const uint64_t h = BlockHash(t.num_hashed == 0 ? SeedHash(g) : t.last_hash, req, g,
                                 t.num_hashed, &shared);
    if (!shared) break;
    if (t.num_hashed >= t.first_live) Register(t.blocks[t.num_hashed], h);
    t.last_hash = h;
    ++t.num_hashed;
  }
}

int32_t KvCache::FindPrefixHit(const KvRequestView& req, int32_t num_tokens,
                               bool may_have_unique_hits) {
  hit_tokens_ = 0;
  if (!caching_ || num_tokens <= 1) return 0;
  const int32_t max_hit = num_tokens - 1;
  int32_t full_hit = max_hit - max_hit % align_tokens_;
  bool any_full = false;
  for (int g = 0; g < num_groups_; ++g) {
    const GroupInfo& gi = groups_[g];
    const int32_t max_blocks = max_hit / gi.block_size;
    auto& ids = hit_ids_[g];
    auto& hashes = hit_hashes_[g];
    auto& prefix = hit_prefix_[g];
    ids.clear();
    hashes.clear();
    prefix.clear();
    prefix.push_back(0);
    uint64_t h = SeedHash(g);
    int32_t run = 0;  // leading consecutive found blocks
    bool in_run = true;
    for (int32_t j = 0; j < max_blocks; ++j) {
      bool shared = false;
      h = BlockHash(h, req, g, j, &shared);
      if (!shared && !may_have_unique_hits) break;
      auto it = cached_.find(h);
      const int32_t id = it == cached_.end() ? -1 : it->second;
      if (gi.window == 0 && id < 0) break;  // full attention: stop at the first miss
      ids.push_back(id);
      hashes.push_back(h);
      prefix.push_back(prefix.back() + (id >= 0 ? 1 : 0));
      if (in_run && id >= 0) ++run; else in_run = false;
    }
    if (gi.window == 0) {
      any_full = true;
      full_hit = std::min(full_hit, run * gi.block_size);
    } else {
      // Blocks beyond what was examined are misses.
      full_hit = std::min(full_hit, static_cast<int32_t>(ids.size()) * gi.block_size);
    }
  }
  (void)any_full;
  int32_t hit = full_hit - full_hit % align_tokens_;
  // Sliding groups need every block overlapping [L - window + 1, L).
  for (; hit > 0; hit -= align_tokens_) {
    bool ok = true;
    for (int g = 0; g < num_groups_ && ok; ++g) {
      const GroupInfo& gi = groups_[g];
      if (gi.window == 0) continue;
      const int32_t end = hit / gi.block_size;
      const int32_t begin = std::max<int32_t>(0, hit - gi.window + 1) / gi.block_size;
      ok = hit_prefix_[g][end] - hit_prefix_[g][begin] == end - begin;
    }
    if (ok) break;
  }
  hit_tokens_ = std::max(hit, 0);
  return hit_tokens_;
}

bool KvCache::Allocate(int32_t slot, const KvRequestView& req, int32_t num_computed,
                       int32_t num_new, bool use_hit) {
  EnsureSlot(slot);
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
          if (ref_[hit_ids_[g][j]] == 0) ++need;  // taken out of the free queue
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
      if (caching_) {
        t.blocks.clear();
        for (int32_t j = 0; j < hit_blocks; ++j) {
          if (j < t.first_live) {
            t.blocks.push_back(0);
            continue;
          }
          const int32_t b = hit_ids_[g][j];
          if (ref_[b] == 0) {
            RemoveFromFree(b);
            --num_free_;
            ++num_used_;
          }
          ++ref_[b];
          t.blocks.push_back(b);
        }
        t.num_hashed = hit_blocks;
        t.last_hash = hit_blocks > 0 ? hit_hashes_[g][hit_blocks - 1] : 0;
      }
    }
    hit_tokens_ = 0;
  } else {
    for (int g = 0; g < num_groups_; ++g) {
      ReleaseSkipped(Table(slot, g), groups_[g], num_computed);
    }
    int64_t need = 0;
    for (int g = 0; g < num_groups_; ++g) {
      need += std::max<int64_t>(0, CeilDiv(end_tokens, groups_[g].block_size) -
                                       Table(slot, g).num_blocks);
    }
    if (need > num_free_) return false;
  }
  for (int g = 0; g < num_groups_; ++g) {
    const GroupInfo& gi = groups_[g];
    GroupTable& t = Table(slot, g);
    const int32_t want = CeilDiv(end_tokens, gi.block_size);
    if (want > t.num_blocks) {
      const int32_t n = want - t.num_blocks;
      if (caching_) {
        for (int32_t k = 0; k < n; ++k) {
          const int32_t b = PopFree();
          ref_[b] = 1;
          t.blocks.push_back(b);
        }
      }
      num_free_ -= n;
      num_used_ += n;
      t.num_blocks = want;
    }
    if (caching_) RegisterShared(t, req, g, static_cast<int32_t>(end_tokens / gi.block_size));
  }
  return true;
}

void KvCache::Free(int32_t slot, const KvRequestView& req, int32_t num_computed, bool preempted) {
  EnsureSlot(slot);
  for (int g = 0; g < num_groups_; ++g) {
    const GroupInfo& gi = groups_[g];
    GroupTable& t = Table(slot, g);
    if (caching_) {
      if (preempted) {
        const int32_t num_full = std::min(num_computed / gi.block_size, t.num_blocks);
        while (t.num_hashed < num_full) {
          bool shared = false;
          const uint64_t h = BlockHash(t.num_hashed == 0 ? SeedHash(g) : t.last_hash, req, g,
                                       t.num_hashed, &shared);
          if (t.num_hashed >= t.first_live) Register(t.blocks[t.num_hashed], h);
          t.last_hash = h;
          ++t.num_hashed;
        }
      }
      for (int32_t j = t.num_blocks - 1; j >= t.first_live; --j) Release(t.blocks[j]);
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
  }
}

bool KvCache::CheckInvariant(bool deep) const {
  if (num_free_ < 0 || num_used_ < 0 || num_free_ + num_used_ != num_blocks_) return false;
  if (!deep) return true;
  if (caching_) {
    int64_t free_count = 0;
    int32_t prev = -1;
    for (int32_t b = head_; b >= 0; b = next_[b]) {
      if (ref_[b] != 0 || prev_[b] != prev) return false;
      prev = b;
      if (++free_count > num_blocks_) return false;
    }
    if (free_count != num_free_ || tail_ != prev) return false;
    int64_t used = 0;
    for (int32_t b = 1; b <= num_blocks_; ++b) used += ref_[b] > 0 ? 1 : 0;
    if (used != num_used_) return false;
    // References from tables equal the reference counts.
    std::vector<int32_t> refs(ref_.size(), 0);
    for (const GroupTable& t : tables_) {
      for (int32_t j = t.first_live; j < t.num_blocks; ++j) ++refs[t.blocks[j]];
    }
    for (int32_t b = 1; b <= num_blocks_; ++b) {
      if (refs[b] != ref_[b]) return false;
    }
  } else {
    int64_t held = 0;
    for (const GroupTable& t : tables_) held += t.num_blocks - t.first_live;
    if (held != num_used_) return false;
  }
  return true;
}

}  // namespace servesim
