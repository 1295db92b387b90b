#include "sim/kv_cache_model.h"

#include <algorithm>
#include <numeric>
#include <string>

#include "absl/strings/str_format.h"
#include "sim/base/status_macros.h"

namespace servesim {

// ---------------------------------------------------------------------------
// ReferenceKvCache

ReferenceKvCache::ReferenceKvCache(const KvCacheSpec& spec, bool enable_prefix_caching)
    : spec_(spec), caching_(enable_prefix_caching) {
  blocks_.resize(static_cast<size_t>(spec.num_blocks) + 1);
  for (int32_t b = 1; b <= spec.num_blocks; ++b) free_.push_back(b);
  hit_blocks_.resize(spec.groups.size());
}

int64_t ReferenceKvCache::num_used_blocks() const {
  int64_t used = 0;
  for (size_t b = 1; b < blocks_.size(); ++b) used += blocks_[b].ref > 0 ? 1 : 0;
  return used;
}

int64_t ReferenceKvCache::HeldBy(int32_t slot) const {
  if (static_cast<size_t>(slot) >= tables_.size()) return 0;
  int64_t held = 0;
  for (const Table& t : tables_[slot]) {
    for (int32_t b : t.blocks) held += b != 0 ? 1 : 0;
  }
  return held;
}

ReferenceKvCache::Table& ReferenceKvCache::At(int32_t slot, int g) {
  if (tables_.size() <= static_cast<size_t>(slot)) {
    tables_.resize(slot + 1, std::vector<Table>(spec_.groups.size()));
  }
  return tables_[slot][g];
}

bool ReferenceKvCache::Shared(const KvRequestView& req, int g, int32_t j) const {
  // A block covering sequence tokens [s, e) is shared content when e <= the
  // hashed tokens (min(input + hashed output, hashes * hash_block_tokens)).
  if (req.hash_block_tokens <= 0) return false;
  const int64_t hashed = req.HashedTokens();
  const int64_t bs = spec_.groups[g].block_size_tokens;
  return (static_cast<int64_t>(j) + 1) * bs <= hashed;
}

namespace {

// A 64-bit combine unrelated to KvCache's mixer (keys of the two caches
// never meet; equal keys here mean equal content up to a 2^-64 chance).
uint64_t Combine(uint64_t h, uint64_t v) {
  h ^= v + 0x2545F4914F6CDD1DULL;
  h *= 0x9FB21C651E98DF25ULL;
  h ^= h >> 29;
  h *= 0xC2B2AE3D27D4EB4FULL;
  return h ^ (h >> 32);
}

}  // namespace

void ReferenceKvCache::ExtendKeys(std::vector<uint64_t>& keys, const KvRequestView& req,
                                  int g, int32_t n) const {
  // Key of block i: (key of block i - 1, group, content). Shared content is
  // every trace block the KV block overlaps plus the offset into the first;
  // other content is (request id, block index).
  const int64_t bs = spec_.groups[g].block_size_tokens;
  for (int32_t i = static_cast<int32_t>(keys.size()); i < n; ++i) {
    uint64_t k =
        Combine(i == 0 ? 0x0123456789ABCDEFULL : keys[i - 1], static_cast<uint64_t>(g));
    if (Shared(req, g, i)) {
      const int64_t s = i * bs, e = s + bs, hbt = req.hash_block_tokens;
      k = Combine(k, 0);
      for (int64_t t = s / hbt; t <= (e - 1) / hbt; ++t)
        k = Combine(k, req.prefix_hashes[t]);
      k = Combine(k, static_cast<uint64_t>(s % hbt));
    } else {
      k = Combine(Combine(Combine(k, 1), static_cast<uint64_t>(req.id)),
                  static_cast<uint64_t>(i));
    }
    keys.push_back(k);
  }
}

void ReferenceKvCache::Release(int32_t b) {
  SERVESIM_CHECK(b > 0 && blocks_[b].ref > 0);
  if (--blocks_[b].ref == 0) free_.push_back(b);
}

int32_t ReferenceKvCache::TakeHead() {
  SERVESIM_CHECK(!free_.empty());
  const int32_t b = free_.front();
  free_.pop_front();
  Block& blk = blocks_[b];
  if (blk.cached) {
    cached_.erase(blk.key);
    blk.cached = false;
    ++evictions_;
  }
  blk.ref = 1;
  return b;
}

void ReferenceKvCache::Offer(int32_t b, uint64_t key) {
  // The first block to hold a key keeps it; a later one stays uncached.
  if (b == 0 || blocks_[b].cached || cached_.contains(key)) return;
  blocks_[b].cached = true;
  blocks_[b].key = key;
  cached_[key] = b;
}

int32_t ReferenceKvCache::FindPrefixHit(const KvRequestView& req, int32_t num_tokens) {
  hit_tokens_ = 0;
  for (std::vector<int32_t>& h : hit_blocks_) h.clear();
  if (!caching_ || num_tokens <= 1) return 0;
  int32_t align = 1;
  for (const KvGroupSpec& gs : spec_.groups)
    align = std::lcm(align, gs.block_size_tokens);
  const int32_t max_hit = num_tokens - 1;
  // Cached flags of every block a hit could use, per group.
  std::vector<std::vector<int32_t>> found(spec_.groups.size());
  std::vector<int32_t> leading(spec_.groups.size(), 0);  // cached blocks from the left
  for (size_t g = 0; g < spec_.groups.size(); ++g) {
    const int32_t n = max_hit / spec_.groups[g].block_size_tokens;
    std::vector<uint64_t> keys;
    ExtendKeys(keys, req, static_cast<int>(g), n);
    for (int32_t j = 0; j < n; ++j) {
      auto it = cached_.find(keys[j]);
      found[g].push_back(it == cached_.end() ? 0 : it->second);
      if (leading[g] == j && found[g][j] != 0) ++leading[g];
    }
  }
  // The largest multiple of every block size, at most num_tokens - 1, for
  // which each full group has all blocks of [0, L) cached and each sliding
  // group every block overlapping [L - window + 1, L).
  int32_t hit = max_hit - max_hit % align;
  for (; hit > 0; hit -= align) {
    bool ok = true;
    for (size_t g = 0; g < spec_.groups.size() && ok; ++g) {
      const KvGroupSpec& gs = spec_.groups[g];
      const int32_t end = hit / gs.block_size_tokens;
      if (gs.sliding_window == 0) {
        ok = end <= leading[g];
        continue;
      }
      const int32_t begin =
          std::max(0, hit - gs.sliding_window + 1) / gs.block_size_tokens;
      for (int32_t j = begin; j < end && ok; ++j) ok = found[g][j] != 0;
    }
    if (ok) break;
  }
  hit_tokens_ = std::max(hit, 0);
  for (size_t g = 0; g < spec_.groups.size(); ++g) {
    hit_blocks_[g] = found[g];
    hit_blocks_[g].resize(hit_tokens_ / spec_.groups[g].block_size_tokens);
  }
  return hit_tokens_;
}

bool ReferenceKvCache::FullSequenceFits(int32_t hit_tokens, int64_t full_tokens,
                                        int64_t max_chunk_tokens) const {
  SERVESIM_CHECK(hit_tokens == hit_tokens_);
  // Per group: the blocks the whole sequence needs (a sliding group at
  // most its window's worth: vLLM's admission cap) beyond the hit, and
  // every hit block in the window that is free now (taking it uses one).
  int64_t need = 0;
  for (size_t g = 0; g < spec_.groups.size(); ++g) {
    const KvGroupSpec& gs = spec_.groups[g];
    const int64_t bs = gs.block_size_tokens;
    int64_t blocks = (full_tokens + bs - 1) / bs;
    if (gs.sliding_window > 0) {
      blocks =
          std::min(blocks, (gs.sliding_window - 1 + max_chunk_tokens + bs - 1) / bs + 1);
    }
    const auto hit_blocks = static_cast<int64_t>(hit_blocks_[g].size());
    need += std::max<int64_t>(0, blocks - hit_blocks);
    const int64_t first =
        gs.sliding_window == 0 ? 0 : std::max(0, hit_tokens - gs.sliding_window + 1) / bs;
    for (int64_t j = first; j < hit_blocks; ++j) {
      if (blocks_[hit_blocks_[g][j]].ref == 0) ++need;
    }
  }
  return need <= num_free_blocks();
}

bool ReferenceKvCache::Allocate(int32_t slot, const KvRequestView& req,
                                int32_t num_computed, int32_t num_new, bool use_hit,
                                int32_t num_in_flight) {
  const int64_t end = static_cast<int64_t>(num_computed) + num_new;
  const int num_groups = static_cast<int>(spec_.groups.size());
  auto ceil_blocks = [&](int g) {
    const int64_t bs = spec_.groups[g].block_size_tokens;
    return static_cast<int32_t>((end + bs - 1) / bs);
  };
  // First block a sliding group keeps: the one holding token p - window + 1,
  // p the processed tokens (computed, less those of a step in flight).
  const int32_t processed = std::max(0, num_computed - num_in_flight);
  auto first_kept = [&](int g) {
    const KvGroupSpec& gs = spec_.groups[g];
    if (gs.sliding_window == 0) return 0;
    return std::max(0, processed - gs.sliding_window + 1) / gs.block_size_tokens;
  };
  if (use_hit) {
    SERVESIM_CHECK(num_computed == hit_tokens_);
    int64_t need = 0;
    for (int g = 0; g < num_groups; ++g) {
      SERVESIM_CHECK(At(slot, g).blocks.empty());
      const int32_t hit_blocks = static_cast<int32_t>(hit_blocks_[g].size());
      for (int32_t j = first_kept(g); j < hit_blocks; ++j) {
        if (blocks_[hit_blocks_[g][j]].ref == 0) ++need;
      }
      need += std::max(0, ceil_blocks(g) - hit_blocks);
    }
    if (need > num_free_blocks()) return false;
    for (int g = 0; g < num_groups; ++g) {
      Table& t = At(slot, g);
      const int32_t hit_blocks = static_cast<int32_t>(hit_blocks_[g].size());
      const int32_t first = std::min(first_kept(g), hit_blocks);
      for (int32_t j = 0; j < hit_blocks; ++j) {
        if (j < first) {
          t.blocks.push_back(0);
          continue;
        }
        const int32_t b = hit_blocks_[g][j];
        if (blocks_[b].ref++ == 0) free_.erase(std::find(free_.begin(), free_.end(), b));
        t.blocks.push_back(b);
      }
      t.num_full_seen = hit_blocks;
    }
    hit_tokens_ = 0;
  } else {
    // Blocks wholly before token p - window + 1 are released first, tail
    // first, even when the allocation then fails.
    for (int g = 0; g < num_groups; ++g) {
      Table& t = At(slot, g);
      const int32_t first = std::min<int32_t>(first_kept(g), t.blocks.size());
      for (int32_t j = first - 1; j >= 0; --j) {
        if (t.blocks[j] != 0) Release(t.blocks[j]);
        t.blocks[j] = 0;
      }
    }
    int64_t need = 0;
    for (int g = 0; g < num_groups; ++g) {
      need += std::max<int64_t>(0, ceil_blocks(g) - At(slot, g).blocks.size());
    }
    if (need > num_free_blocks()) return false;
  }
  for (int g = 0; g < num_groups; ++g) {
    Table& t = At(slot, g);
    while (static_cast<int32_t>(t.blocks.size()) < ceil_blocks(g)) {
      t.blocks.push_back(TakeHead());
    }
    // Blocks that became full of shared content are offered to the cache,
    // once each.
    const int32_t full = static_cast<int32_t>(end / spec_.groups[g].block_size_tokens);
    if (caching_) {
      ExtendKeys(t.keys, req, g, full);
      for (int32_t j = t.num_full_seen; j < full; ++j) {
        if (Shared(req, g, j)) Offer(t.blocks[j], t.keys[j]);
      }
    }
    t.num_full_seen = std::max(t.num_full_seen, full);
  }
  return true;
}

void ReferenceKvCache::Free(int32_t slot, const KvRequestView& req, int32_t num_computed,
                            bool preempted) {
  for (int g = 0; g < static_cast<int>(spec_.groups.size()); ++g) {
    Table& t = At(slot, g);
    if (caching_ && preempted) {
      // The request's full unique blocks become cached (shared ones were
      // offered when they became full).
      const int32_t full = std::min<int32_t>(
          num_computed / spec_.groups[g].block_size_tokens, t.blocks.size());
      ExtendKeys(t.keys, req, g, full);
      for (int32_t j = 0; j < full; ++j) {
        if (!Shared(req, g, j)) Offer(t.blocks[j], t.keys[j]);
      }
    }
    for (int32_t j = static_cast<int32_t>(t.blocks.size()) - 1; j >= 0; --j) {
      if (t.blocks[j] != 0) Release(t.blocks[j]);
    }
    t = Table{};
  }
}

// ---------------------------------------------------------------------------
// Choice sources

uint32_t RandomChoices::Next(uint32_t bound) {
  return static_cast<uint32_t>(rng_() % bound);
}

uint32_t ByteChoices::Next(uint32_t bound) {
  uint32_t v = 0;
  const int n = bound <= 256 ? 1 : 2;
  for (int i = 0; i < n; ++i) {
    v <<= 8;
    if (pos_ < bytes_.size()) v |= bytes_[pos_++];
  }
  return v % bound;
}

// ---------------------------------------------------------------------------
// The driver

namespace {

constexpr int32_t kMaxSlots = 6;
constexpr int32_t kMaxSeqTokens = 600;

struct ModelRequest {
  RequestId id = 0;
  int32_t input = 0;
  std::vector<uint64_t> hashes;
  int32_t hbt = 0;
  int32_t hashed_output = 0;   // generated tokens the hashes also name
  int32_t parent_prompt = -1;  // a follow-up: the earlier prompt's length
  int32_t seq_len = 0;         // prompt plus generated tokens
  int32_t computed = 0;        // while running
  int32_t last_chunk = 0;      // tokens of its last step
  int32_t in_flight = 0;       // of computed, unprocessed at its last allocation
  bool preempted_before = false;
  int32_t slot = -1;  // running in this slot, or -1 (waiting)
  KvRequestView View() const {
    return KvRequestView{id, input, hashes, hbt, hashed_output};
  }
};

uint64_t Chain(uint64_t parent, uint64_t id) {
  // Chained like traces/prefix_hash.h: equal hash at i means equal prefix.
  uint64_t x = parent ^ (id * 0xD6E8FEB86659FD93ULL + 0x632BE59BD9B4E019ULL);
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

class Driver {
 public:
  Driver(ChoiceSource& src, KvModelStats* stats) : src_(src), stats_(stats) {}

  absl::Status Run(int64_t max_ops) {
    DecodeSpec();
    auto real = KvCache::Create(spec_, caching_);
    if (!real.ok()) return real.status();
    real_ = std::move(real).value();
    ref_ = std::make_unique<ReferenceKvCache>(spec_, caching_);
    for (int32_t s = kMaxSlots - 1; s >= 0; --s) free_slots_.push_back(s);
    for (op_ = 0; op_ < max_ops && !src_.exhausted(); ++op_) {
      RETURN_IF_ERROR(Step());
      ++stats_->ops;
    }
    stats_->evictions = ref_->evictions();
    return absl::OkStatus();
  }

 private:
  void DecodeSpec() {
    static constexpr int32_t kSizes[] = {1, 2, 3, 4, 5, 8, 16, 32};
    caching_ = src_.Next(4) != 0;
    const int num_groups = 1 + static_cast<int>(src_.Next(3));
    for (int g = 0; g < num_groups; ++g) {
      KvGroupSpec gs;
      gs.block_size_tokens = kSizes[src_.Next(8)];
      // Windows of 2..97 tokens (KvCache refuses 1: it attends to nothing).
      gs.sliding_window = src_.Next(2) == 0 ? 0 : 2 + static_cast<int32_t>(src_.Next(96));
      spec_.groups.push_back(gs);
    }
    spec_.num_blocks = 1 + src_.Next(src_.Next(2) == 0 ? 24 : 240);
    max_chunk_ = 1 + static_cast<int32_t>(src_.Next(64));
    for (int32_t& hbt : family_hbt_) {
      static constexpr int32_t kHbt[] = {1, 2, 4, 16};
      hbt = kHbt[src_.Next(4)];
    }
  }

  std::string Where(const char* op) const {
    std::string groups;
    for (const KvGroupSpec& gs : spec_.groups) {
      absl::StrAppendFormat(&groups, " [bs %d window %d]", gs.block_size_tokens,
                            gs.sliding_window);
    }
    return absl::StrFormat("op %d (%s), %d blocks, caching %d, groups%s", op_, op,
                           spec_.num_blocks, caching_, groups);
  }

  absl::Status Compare(const char* op) {
    if (real_->num_free_blocks() != ref_->num_free_blocks() ||
        real_->num_used_blocks() != ref_->num_used_blocks() ||
        real_->num_cached_blocks() != ref_->num_cached_blocks()) {
      return absl::InternalError(absl::StrFormat(
          "%s: free/used/cached: KvCache %d/%d/%d, reference %d/%d/%d", Where(op),
          real_->num_free_blocks(), real_->num_used_blocks(), real_->num_cached_blocks(),
          ref_->num_free_blocks(), ref_->num_used_blocks(), ref_->num_cached_blocks()));
    }
    if (!real_->CheckInvariant(/*deep=*/true)) {
      return absl::InternalError(
          absl::StrFormat("%s: KvCache::CheckInvariant", Where(op)));
    }
    for (const ModelRequest& r : reqs_) {
      if (r.slot < 0) continue;
      // A step in flight keeps its window: one chunk more.
      const int64_t bound = real_->MaxBlocksHeld(r.computed, max_chunk_ + r.in_flight);
      if (ref_->HeldBy(r.slot) > bound) {
        return absl::InternalError(absl::StrFormat(
            "%s: request %d holds %d blocks at %d tokens, above MaxBlocksHeld %d",
            Where(op), r.id, ref_->HeldBy(r.slot), r.computed, bound));
      }
    }
    return absl::OkStatus();
  }

  absl::Status Mismatch(const char* op, const char* what, int64_t real, int64_t ref) {
    return absl::InternalError(
        absl::StrFormat("%s: %s: KvCache %d, reference %d", Where(op), what, real, ref));
  }

  ModelRequest NewRequest() {
    ModelRequest r;
    r.id = next_id_++;
    r.input = 1 + static_cast<int32_t>(src_.Next(src_.Next(4) == 0 ? 400 : 120));
    const int f = static_cast<int>(src_.Next(5));  // 4: no shared family
    if (f < 4 && !answers_.empty() && src_.Next(3) == 0) {
      // A chat's next turn: an earlier prompt and its hashed answer (its
      // whole hash blocks), then new text.
      const ModelRequest& p = answers_[src_.Next(static_cast<uint32_t>(answers_.size()))];
      r.hbt = p.hbt;
      r.parent_prompt = p.input;
      const int32_t whole = std::min<int32_t>((p.input + p.hashed_output) / p.hbt,
                                              static_cast<int32_t>(p.hashes.size()));
      r.input = p.input + p.hashed_output + 1 + static_cast<int32_t>(src_.Next(60));
      r.hashes.assign(p.hashes.begin(), p.hashes.begin() + whole);
      uint64_t h = r.hashes.empty() ? 0x5E5E5E5EA5A5A5A5ULL : r.hashes.back();
      const int32_t n = (r.input + r.hbt - 1) / r.hbt;
      for (int32_t i = whole; i < n; ++i) {
        h = Chain(h, (static_cast<uint64_t>(r.id) << 20) + i + 1000);
        r.hashes.push_back(h);
      }
    } else if (f < 4) {
      // One in three hashes its answer too (up to 200 generated tokens).
      if (src_.Next(3) == 0) r.hashed_output = 1 + static_cast<int32_t>(src_.Next(200));
      r.hbt = family_hbt_[f];
      int32_t n = (r.input + r.hashed_output + r.hbt - 1) / r.hbt;
      if (src_.Next(4) == 0) n = static_cast<int32_t>(src_.Next(n + 2));
      const int32_t shared = static_cast<int32_t>(src_.Next(n + 1));
      uint64_t h = 0x5E5E5E5EA5A5A5A5ULL + static_cast<uint64_t>(f);
      for (int32_t i = 0; i < n; ++i) {
        h = i < shared ? Chain(h, static_cast<uint64_t>(i))
                       : Chain(h, (static_cast<uint64_t>(r.id) << 20) + i + 1000);
        r.hashes.push_back(h);
      }
      if (r.hashed_output > 0) {
        if (answers_.size() == 8) answers_.erase(answers_.begin());
        answers_.push_back(r);
      }
    }
    r.seq_len = r.input;
    return r;
  }

  // Index of a random request in `reqs_` with running == (slot >= 0), or -1.
  int Pick(bool running) {
    std::vector<int> idx;
    for (size_t i = 0; i < reqs_.size(); ++i) {
      if ((reqs_[i].slot >= 0) == running) idx.push_back(static_cast<int>(i));
    }
    if (idx.empty()) return -1;
    return idx[src_.Next(static_cast<uint32_t>(idx.size()))];
  }

  absl::Status Admit() {
    int i = Pick(/*running=*/false);
    if (i < 0 || src_.Next(3) == 0) {
      if (reqs_.size() >= 2 * static_cast<size_t>(kMaxSlots)) return absl::OkStatus();
      reqs_.push_back(NewRequest());
      i = static_cast<int>(reqs_.size()) - 1;
    }
    if (free_slots_.empty()) return absl::OkStatus();
    ModelRequest& r = reqs_[i];
    const bool hint = r.preempted_before || src_.Next(2) == 0;
    const int32_t hit = real_->FindPrefixHit(r.View(), r.seq_len, hint);
    const int32_t ref_hit = ref_->FindPrefixHit(r.View(), r.seq_len);
    if (hit != ref_hit) return Mismatch("admit", "FindPrefixHit", hit, ref_hit);
    if (hit > 0) ++stats_->hits;
    if (r.parent_prompt >= 0 && hit > r.parent_prompt) ++stats_->answer_hits;
    // The whole-sequence admission gate, for the sequence or a longer one.
    const int64_t full = r.seq_len + static_cast<int64_t>(src_.Next(2) * src_.Next(400));
    const bool fits = real_->FullSequenceFits(hit, full, max_chunk_);
    if (fits != ref_->FullSequenceFits(hit, full, max_chunk_)) {
      return Mismatch("admit", "FullSequenceFits", fits, !fits);
    }
    const int32_t chunk =
        std::min(r.seq_len - hit, 1 + static_cast<int32_t>(src_.Next(max_chunk_)));
    const int32_t slot = free_slots_.back();
    const bool ok = real_->Allocate(slot, r.View(), hit, chunk, /*use_hit=*/true);
    const bool ref_ok = ref_->Allocate(slot, r.View(), hit, chunk, true);
    if (ok != ref_ok) return Mismatch("admit", "Allocate", ok, ref_ok);
    if (ok) {
      free_slots_.pop_back();
      r.slot = slot;
      r.computed = hit + chunk;
      r.last_chunk = chunk;
      r.in_flight = 0;
      if (r.computed == r.seq_len) ++r.seq_len;  // the step yields a token
      ++stats_->admits;
    } else {
      ++stats_->failed_allocs;
    }
    return Compare("admit");
  }

  absl::Status Advance() {
    const int i = Pick(/*running=*/true);
    if (i < 0) return absl::OkStatus();
    ModelRequest& r = reqs_[i];
    if (r.seq_len >= kMaxSeqTokens) return Finish(i, "finish (length)");
    const int32_t n =
        std::min(r.seq_len - r.computed, 1 + static_cast<int32_t>(src_.Next(max_chunk_)));
    // Async scheduling: half the time the last step's tokens are still in
    // flight, and the window slides on the processed tokens only.
    const int32_t in_flight = src_.Next(2) == 0 ? r.last_chunk : 0;
    if (in_flight > 0) ++stats_->in_flight_steps;
    const bool ok =
        real_->Allocate(r.slot, r.View(), r.computed, n, /*use_hit=*/false, in_flight);
    const bool ref_ok = ref_->Allocate(r.slot, r.View(), r.computed, n, false, in_flight);
    if (ok != ref_ok) return Mismatch("step", "Allocate", ok, ref_ok);
    r.in_flight = std::max(r.in_flight, in_flight);
    if (ok) {
      r.last_chunk = n;
      r.computed += n;
      if (r.computed == r.seq_len) ++r.seq_len;
    } else {
      ++stats_->failed_allocs;
    }
    return Compare("step");
  }

  absl::Status Finish(int i, const char* op) {
    ModelRequest& r = reqs_[i];
    real_->Free(r.slot, r.View(), r.computed, /*preempted=*/false);
    ref_->Free(r.slot, r.View(), r.computed, false);
    free_slots_.push_back(r.slot);
    reqs_.erase(reqs_.begin() + i);
    return Compare(op);
  }

  absl::Status Preempt(int i) {
    ModelRequest& r = reqs_[i];
    real_->Free(r.slot, r.View(), r.computed, /*preempted=*/true);
    ref_->Free(r.slot, r.View(), r.computed, true);
    free_slots_.push_back(r.slot);
    r.slot = -1;
    r.computed = 0;
    r.preempted_before = true;
    ++stats_->preemptions;
    return Compare("preempt");
  }

  absl::Status Probe() {
    // A prefix lookup for a request that is never admitted.
    ModelRequest r = NewRequest();
    const int32_t hit = real_->FindPrefixHit(r.View(), r.seq_len, src_.Next(2) == 0);
    const int32_t ref_hit = ref_->FindPrefixHit(r.View(), r.seq_len);
    if (hit != ref_hit) return Mismatch("probe", "FindPrefixHit", hit, ref_hit);
    return Compare("probe");
  }

  absl::Status Step() {
    const uint32_t op = src_.Next(16);
    if (op < 4) return Admit();
    if (op < 10) return Advance();
    if (op < 14) {
      const int i = Pick(/*running=*/true);
      if (i < 0) return absl::OkStatus();
      return op < 12 ? Finish(i, "finish") : Preempt(i);
    }
    if (op == 14) return Probe();
    const int i = Pick(/*running=*/false);  // a waiting request leaves
    if (i >= 0) reqs_.erase(reqs_.begin() + i);
    return absl::OkStatus();
  }

  ChoiceSource& src_;
  KvModelStats* stats_;
  KvCacheSpec spec_;
  bool caching_ = true;
  int32_t max_chunk_ = 1;
  int32_t family_hbt_[4] = {};
  std::unique_ptr<KvCache> real_;
  std::unique_ptr<ReferenceKvCache> ref_;
  std::vector<ModelRequest> reqs_;
  std::vector<ModelRequest> answers_;  // requests that hash their answer
  std::vector<int32_t> free_slots_;
  RequestId next_id_ = 1;
  int64_t op_ = 0;
};

}  // namespace

absl::Status RunKvCacheModel(ChoiceSource& src, int64_t max_ops, KvModelStats* stats) {
  KvModelStats local;
  Driver d(src, stats != nullptr ? stats : &local);
  return d.Run(max_ops);
}

}  // namespace servesim
