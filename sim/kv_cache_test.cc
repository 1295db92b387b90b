#include "sim/kv_cache.h"

#include <algorithm>
#include <vector>

#include "gtest/gtest.h"

namespace servesim {
namespace {

KvCacheSpec FullSpec(int64_t blocks, int32_t bs = 16) {
  KvCacheSpec s;
  s.num_blocks = blocks;
  s.groups.push_back(KvGroupSpec{bs, 0, 1});
  return s;
}

KvRequestView View(RequestId id, int32_t input, const std::vector<uint64_t>& hashes,
                   int32_t hbt = 16) {
  return KvRequestView{id, input, hashes, hbt};
}

TEST(KvCacheTest, RejectsEmptyGroupsAndZeroBlocks) {
  KvCacheSpec s;
  s.num_blocks = 4;
  EXPECT_FALSE(KvCache::Create(s, true).ok());
  EXPECT_FALSE(KvCache::Create(FullSpec(0), true).ok());
}

// A sliding window of 1 token attends to no earlier token (the
// differential fuzzer found KvCache and its reference disagreeing on its
// prefix hits); 2 is the smallest window.
TEST(KvCacheTest, RejectsASlidingWindowOfOneToken) {
  KvCacheSpec s = FullSpec(8);
  s.groups[0].sliding_window = 1;
  EXPECT_FALSE(KvCache::Create(s, true).ok());
  s.groups[0].sliding_window = 2;
  EXPECT_TRUE(KvCache::Create(s, true).ok());
}

TEST(KvCacheTest, FullAttentionHoldsCeilTokensOverBlockSize) {
  for (bool caching : {false, true}) {
    auto kv = KvCache::Create(FullSpec(10), caching).value();
    std::vector<uint64_t> none;
    ASSERT_TRUE(kv->Allocate(0, View(1, 33, none), 0, 33, /*use_hit=*/false));
    EXPECT_EQ(kv->num_used_blocks(), 3);  // ceil(33/16)
    ASSERT_TRUE(kv->Allocate(0, View(1, 33, none), 33, 15, false));
    EXPECT_EQ(kv->num_used_blocks(), 3);  // 48 tokens still fit 3 blocks
    ASSERT_TRUE(kv->Allocate(0, View(1, 33, none), 48, 1, false));
    EXPECT_EQ(kv->num_used_blocks(), 4);
    kv->Free(0, View(1, 33, none), 49, false);
    EXPECT_EQ(kv->num_used_blocks(), 0);
    EXPECT_EQ(kv->num_free_blocks(), 10);
    EXPECT_TRUE(kv->CheckInvariant(true));
  }
}

TEST(KvCacheTest, AllocationOneBlockShortFailsAndChangesNothing) {
  for (bool caching : {false, true}) {
    auto kv = KvCache::Create(FullSpec(4), caching).value();
    std::vector<uint64_t> none;
    ASSERT_TRUE(kv->Allocate(0, View(1, 48, none), 0, 48, false));   // 3 blocks
    EXPECT_FALSE(kv->Allocate(1, View(2, 32, none), 0, 32, false));  // needs 2, 1 free
    EXPECT_EQ(kv->num_free_blocks(), 1);
    EXPECT_TRUE(kv->Allocate(1, View(2, 16, none), 0, 16, false));  // exactly 1
    EXPECT_EQ(kv->num_free_blocks(), 0);
    EXPECT_TRUE(kv->CheckInvariant(true));
  }
}

TEST(KvCacheTest, SharedPrefixHitsExactlyTheCachedWholeBlocks) {
  auto kv = KvCache::Create(FullSpec(100), true).value();
  const std::vector<uint64_t> a = {11, 12, 13, 14};  // 4 trace blocks of 16 tokens
  ASSERT_EQ(kv->FindPrefixHit(View(1, 64, a), 64, false), 0);
  ASSERT_TRUE(kv->Allocate(0, View(1, 64, a), 0, 64, /*use_hit=*/true));
  // Same 64-token prompt: all 4 blocks are cached, but the hit is capped at
  // prompt - 1 = 63 tokens, i.e. 3 whole blocks.
  EXPECT_EQ(kv->FindPrefixHit(View(2, 64, a), 64, false), 48);
  // A prompt sharing only the first two trace blocks hits 32 tokens.
  const std::vector<uint64_t> c = {11, 12, 99, 98, 97};
  EXPECT_EQ(kv->FindPrefixHit(View(3, 80, c), 80, false), 32);
  // Same hashes in another order share nothing.
  const std::vector<uint64_t> d = {12, 11, 13, 14};
  EXPECT_EQ(kv->FindPrefixHit(View(4, 64, d), 64, false), 0);
  // Longer prompt with the same first 4 blocks: 64 tokens hit.
  const std::vector<uint64_t> e = {11, 12, 13, 14, 15};
  EXPECT_EQ(kv->FindPrefixHit(View(5, 100, e), 100, false), 64);
  // Taking a hit shares blocks: no new blocks for the cached part.
  const int64_t used = kv->num_used_blocks();
  ASSERT_EQ(kv->FindPrefixHit(View(2, 64, a), 64, false), 48);
  ASSERT_TRUE(kv->Allocate(1, View(2, 64, a), 48, 16, true));
  EXPECT_EQ(kv->num_used_blocks(), used + 1);
  EXPECT_TRUE(kv->CheckInvariant(true));
}

// A chat's next turn repeats the previous prompt and its answer: with the
// answer hashed (RequestSpec::hashed_output_tokens), the answer's blocks
// are registered as decode fills them, and the follow-up hits them; with
// the same hashes but the answer not declared hashed, only the prompt hits.
TEST(KvCacheTest, HashedAnswerBlocksHitTheNextTurn) {
  for (const int32_t hashed_output : {0, 40}) {
    auto kv = KvCache::Create(FullSpec(100), true).value();
    // Turn 1: 32-token prompt, 40-token answer; hashes name the 72-token
    // sequence (5 trace blocks, the last partial).
    const std::vector<uint64_t> turn1 = {1, 2, 3, 4, 5};
    const KvRequestView v1{1, 32, turn1, 16, hashed_output};
    ASSERT_TRUE(kv->Allocate(0, v1, 0, 32, /*use_hit=*/false));
    // Decode: the KV grows one token a step up to prompt + answer - 1.
    for (int32_t done = 32; done < 32 + 40 - 1; ++done) {
      ASSERT_TRUE(kv->Allocate(0, v1, done, 1, false));
    }
    kv->Free(0, v1, 32 + 40 - 1, /*preempted=*/false);
    // Turn 2: the 72 tokens of turn 1 (its 4 whole trace blocks) + 30 new.
    const std::vector<uint64_t> turn2 = {1, 2, 3, 4, 50, 51, 52};
    const KvRequestView v2{2, 102, turn2, 16};
    EXPECT_EQ(kv->FindPrefixHit(v2, 102, false), hashed_output > 0 ? 64 : 32)
        << "hashed_output " << hashed_output;
    EXPECT_TRUE(kv->CheckInvariant(true));
  }
}

// The answer's hashes stop at hashed_output_tokens: an answer longer than
// what its hashes name keeps its later blocks unique.
TEST(KvCacheTest, AnswerBlocksPastTheHashedOutputStayUnique) {
  auto kv = KvCache::Create(FullSpec(100), true).value();
  const std::vector<uint64_t> turn1 = {1, 2, 3, 4, 5, 6};  // names 96 tokens
  const KvRequestView v1{1, 32, turn1, 16, /*hashed_output_tokens=*/16};
  ASSERT_TRUE(kv->Allocate(0, v1, 0, 32, false));
  ASSERT_TRUE(kv->Allocate(0, v1, 32, 63, false));  // KV of 95 tokens
  kv->Free(0, v1, 95, false);
  const std::vector<uint64_t> turn2 = {1, 2, 3, 4, 5, 6, 7};
  EXPECT_EQ(kv->FindPrefixHit(KvRequestView{2, 112, turn2, 16}, 112, false), 48);
  EXPECT_TRUE(kv->CheckInvariant(true));
}

// KvViewOf caps the hashed answer at the tokens the request generates.
TEST(KvCacheTest, ViewCapsHashedOutputAtOutputTokens) {
  RequestSpec spec;
  spec.input_tokens = 32;
  spec.output_tokens = 5;
  spec.hashed_output_tokens = 40;
  spec.prefix_hashes = {1, 2, 3, 4, 5};
  spec.hash_block_tokens = 16;
  const KvRequestView v = KvViewOf(spec);
  EXPECT_EQ(v.hashed_output_tokens, 5);
  EXPECT_EQ(v.HashedTokens(), 37);
}

TEST(KvCacheTest, TokensPastTheHashedPartNeverHitForOtherRequests) {
  auto kv = KvCache::Create(FullSpec(100), true).value();
  const std::vector<uint64_t> a = {1, 2};  // 32 hashed tokens of a 96-token prompt
  ASSERT_EQ(kv->FindPrefixHit(View(1, 96, a), 96, false), 0);
  ASSERT_TRUE(kv->Allocate(0, View(1, 96, a), 0, 96, true));
  kv->Free(0, View(1, 96, a), 96, false);
  EXPECT_EQ(kv->FindPrefixHit(View(2, 96, a), 96, false), 32);
}

TEST(KvCacheTest, FreedBlocksStayCachedUntilEvictedTailFirst) {
  auto kv = KvCache::Create(FullSpec(4), true).value();
  const std::vector<uint64_t> a = {1, 2, 3, 4};
  ASSERT_EQ(kv->FindPrefixHit(View(1, 64, a), 64, false), 0);
  ASSERT_TRUE(kv->Allocate(0, View(1, 64, a), 0, 64, true));
  kv->Free(0, View(1, 64, a), 64, false);
  EXPECT_EQ(kv->num_free_blocks(), 4);
  EXPECT_EQ(kv->num_cached_blocks(), 4);
  // A unique 16-token request takes one block: the tail block (4th) goes
  // first, so the 3-block prefix survives.
  std::vector<uint64_t> none;
  ASSERT_EQ(kv->FindPrefixHit(View(2, 16, none), 16, false), 0);
  ASSERT_TRUE(kv->Allocate(1, View(2, 16, none), 0, 16, true));
  EXPECT_EQ(kv->num_cached_blocks(), 3);
  const std::vector<uint64_t> b = {1, 2, 3, 4, 5};
  EXPECT_EQ(kv->FindPrefixHit(View(3, 80, b), 80, false), 48);
  EXPECT_TRUE(kv->CheckInvariant(true));
}

TEST(KvCacheTest, PreemptedRequestHitsItsOwnUniqueBlocksOnResume) {
  auto kv = KvCache::Create(FullSpec(20), true).value();
  std::vector<uint64_t> none;
  ASSERT_TRUE(kv->Allocate(0, View(7, 40, none), 0, 40, true));
  ASSERT_TRUE(kv->Allocate(0, View(7, 40, none), 40, 1, false));
  kv->Free(0, View(7, 40, none), 41, /*preempted=*/true);
  // 42 tokens (prompt + 2 generated): 2 whole cached blocks (32 tokens).
  EXPECT_EQ(kv->FindPrefixHit(View(7, 40, none), 42, true), 32);
  // Another request with the same (unhashed) lengths hits nothing.
  EXPECT_EQ(kv->FindPrefixHit(View(8, 40, none), 42, true), 0);
}

// A documented difference from vLLM (sim/kv_cache.h): unique blocks are
// registered at the preemption, so a sliding block released before it was
// never cached. vLLM caches the sliding block when it is full, so there the
// resume below hits 32 tokens.
TEST(KvCacheTest, SlidingBlockReleasedBeforePreemptionIsNeverHit) {
  KvCacheSpec s;
  s.num_blocks = 100;
  s.groups.push_back(KvGroupSpec{32, 0, 1});  // full attention
  s.groups.push_back(KvGroupSpec{16, 8, 1});  // sliding, window 8: hits align to 32
  auto kv = KvCache::Create(s, true).value();
  std::vector<uint64_t> none;  // unique content
  ASSERT_EQ(kv->FindPrefixHit(View(1, 40, none), 40, false), 0);
  ASSERT_TRUE(kv->Allocate(0, View(1, 40, none), 0, 40, /*use_hit=*/true));
  // First decode: tokens below 40 - 8 + 1 = 33 leave the window, so the
  // sliding group's blocks 0 and 1 (tokens 0..31) are released.
  ASSERT_TRUE(kv->Allocate(0, View(1, 40, none), 40, 1, false));
  kv->Free(0, View(1, 40, none), 41, /*preempted=*/true);
  // Resume with 42 tokens: 32 would need the full group's block 0 (cached
  // at the preemption) and the sliding block 1 (tokens 16..31; released
  // before the preemption, never cached).
  EXPECT_EQ(kv->FindPrefixHit(View(1, 40, none), 42, true), 0);
  EXPECT_TRUE(kv->CheckInvariant(true));
}

TEST(KvCacheTest, SlidingWindowGroupFreesBlocksOutsideTheWindow) {
  for (bool caching : {false, true}) {
    KvCacheSpec s;
    s.num_blocks = 20;
    s.groups.push_back(KvGroupSpec{16, 32, 1});  // window 32 tokens
    auto kv = KvCache::Create(s, caching).value();
    std::vector<uint64_t> none;
    ASSERT_TRUE(kv->Allocate(0, View(1, 64, none), 0, 64, false));
    EXPECT_EQ(kv->num_used_blocks(), 4);
    // Computing token 65: tokens < 64 - 31 = 33 are outside the window, so
    // blocks 0 and 1 (tokens 0..31) are freed; block 4 is new.
    ASSERT_TRUE(kv->Allocate(0, View(1, 64, none), 64, 1, false));
    EXPECT_EQ(kv->num_used_blocks(), 3);
    EXPECT_TRUE(kv->CheckInvariant(true));
    // Far along: only ceil((window - 1 + 1) / 16) + 1 blocks at most.
    int32_t c = 65;
    for (; c < 300; ++c) {
      ASSERT_TRUE(kv->Allocate(0, View(1, 64, none), c, 1, false));
      ASSERT_LE(kv->num_used_blocks(), 3);
    }
    EXPECT_EQ(kv->MaxBlocksHeld(300, 1), 3);
    kv->Free(0, View(1, 64, none), c, false);
    EXPECT_EQ(kv->num_used_blocks(), 0);
    EXPECT_TRUE(kv->CheckInvariant(true));
  }
}

TEST(KvCacheTest, HybridHitNeedsTheSlidingWindowBlocksCached) {
  KvCacheSpec s;
  s.num_blocks = 200;
  s.groups.push_back(KvGroupSpec{16, 0, 1});
  s.groups.push_back(KvGroupSpec{32, 64, 1});  // sliding, block 32, window 64
  auto kv = KvCache::Create(s, true).value();
  std::vector<uint64_t> h;
  h.reserve(16);
  for (int i = 0; i < 16; ++i) h.push_back(100 + i);  // 256 hashed tokens
  ASSERT_EQ(kv->FindPrefixHit(View(1, 256, h), 256, false), 0);
  ASSERT_TRUE(kv->Allocate(0, View(1, 256, h), 0, 256, true));
  kv->Free(0, View(1, 256, h), 256, false);
  // Hit is a multiple of lcm(16, 32) = 32 and at most 255: 224.
  EXPECT_EQ(kv->FindPrefixHit(View(2, 256, h), 256, false), 224);
  ASSERT_TRUE(kv->Allocate(1, View(2, 256, h), 224, 32, true));
  // Sliding group: tokens [224-63, 224) -> blocks 5 and 6 taken, 0..4 null.
  EXPECT_EQ(kv->num_used_blocks(), 16 + 3);
  EXPECT_TRUE(kv->CheckInvariant(true));
}

// The exact peak is reached: decoding one token a step through a sliding
// window of 32 tokens in blocks of 16, three blocks are held at times.
TEST(KvCachePeakTest, MaxBlocksHeldIsReachedBySlidingDecode) {
  KvCacheSpec s;
  s.num_blocks = 20;
  s.groups.push_back(KvGroupSpec{16, 32, 1});
  auto kv = KvCache::Create(s, false).value();
  std::vector<uint64_t> none;
  int64_t peak = 0;
  for (int32_t c = 0; c < 300; ++c) {
    ASSERT_TRUE(kv->Allocate(0, View(1, 1, none), c, 1, false));
    peak = std::max(peak, kv->num_used_blocks());
  }
  EXPECT_EQ(peak, 3);
  EXPECT_EQ(kv->MaxBlocksHeld(300, 1), 3);
}

// Why the planner's figure (vLLM's) and the scheduler's differ: vLLM caps
// the sliding span at the request length before adding the boundary block,
// so a request shorter than the span counts one block more per sliding
// group than it can hold (its window has not slid and starts on a block
// boundary); past the span the two agree.
TEST(KvCachePeakTest, VllmEstimateCountsOneBoundaryBlockMoreForShortRequests) {
  KvCacheSpec s;
  s.groups.push_back(KvGroupSpec{16, 0, 1});     // full attention
  s.groups.push_back(KvGroupSpec{32, 512, 1});   // sliding, span 511 + chunk
  s.groups.push_back(KvGroupSpec{32, 1024, 1});  // sliding, span 1023 + chunk
  const int64_t chunk = 256;
  // 600 tokens: shorter than both spans (767, 1279).
  EXPECT_EQ(MaxBlocksHeld(s, 600, chunk), 38 + 19 + 19);
  EXPECT_EQ(VllmMaxBlocksPerRequest(s, 600, chunk), 38 + 20 + 20);
  // 1000 tokens: past the first span only.
  EXPECT_EQ(MaxBlocksHeld(s, 1000, chunk), 63 + 25 + 32);
  EXPECT_EQ(VllmMaxBlocksPerRequest(s, 1000, chunk), 63 + 25 + 33);
  // 8192 tokens: past both spans, equal.
  EXPECT_EQ(MaxBlocksHeld(s, 8192, chunk), VllmMaxBlocksPerRequest(s, 8192, chunk));
  // A request that short holds exactly ceil(tokens / bs) sliding blocks.
  KvCacheSpec one;
  one.num_blocks = 100;
  one.groups.push_back(KvGroupSpec{32, 512, 1});
  auto kv = KvCache::Create(one, false).value();
  std::vector<uint64_t> none;
  int32_t c = 0;
  for (; c + chunk <= 600; c += chunk) {
    ASSERT_TRUE(kv->Allocate(0, View(1, 600, none), c, chunk, false));
  }
  ASSERT_TRUE(kv->Allocate(0, View(1, 600, none), c, 600 - c, false));
  EXPECT_EQ(kv->num_used_blocks(), 19);  // ceil(600 / 32)
  EXPECT_EQ(MaxBlocksHeld(one, 600, chunk), 19);
  EXPECT_EQ(VllmMaxBlocksPerRequest(one, 600, chunk), 20);
}

// RetainKeysOf: the kept prompt hits as before at every point of an
// eviction sweep (its blocks leave the LRU queue at the same allocation),
// the dropped prompt no longer hits, and the free counts never differ.
TEST(KvCacheTest, RetainKeysOfKeepsTheKeptPromptsHitsAndEvictionOrder) {
  const std::vector<uint64_t> a = {1, 2, 3, 4};
  const std::vector<uint64_t> b = {7, 8, 9, 10};
  auto full = KvCache::Create(FullSpec(20), true).value();
  // b first, then a, so a's blocks are younger in the queue.
  ASSERT_TRUE(full->Allocate(0, View(1, 64, b), 0, 64, true));
  full->Free(0, View(1, 64, b), 64, false);
  ASSERT_TRUE(full->Allocate(0, View(2, 64, a), 0, 64, true));
  full->Free(0, View(2, 64, a), 64, false);
  std::unique_ptr<KvCache> kept = full->Clone();
  const std::vector<KvRequestView> views = {View(3, 64, a)};
  kept->RetainKeysOf(views);
  EXPECT_TRUE(kept->CheckInvariant(true));
  EXPECT_EQ(kept->num_free_blocks(), full->num_free_blocks());
  EXPECT_EQ(full->FindPrefixHit(View(4, 64, b), 64, false), 48);
  EXPECT_EQ(kept->FindPrefixHit(View(4, 64, b), 64, false), 0);
  // Allocate unique blocks one at a time until a's are all evicted.
  std::vector<uint64_t> none;
  bool evicted = false;
  for (int32_t t = 16; t <= 320 && !evicted; t += 16) {
    ASSERT_EQ(full->Allocate(1, View(5, 320, none), t - 16, 16, false),
              kept->Allocate(1, View(5, 320, none), t - 16, 16, false));
    ASSERT_EQ(kept->num_free_blocks(), full->num_free_blocks()) << t;
    const int32_t hit = full->FindPrefixHit(View(3, 64, a), 64, false);
    ASSERT_EQ(kept->FindPrefixHit(View(3, 64, a), 64, false), hit) << t;
    evicted = hit == 0;
  }
  EXPECT_TRUE(evicted);
  EXPECT_TRUE(kept->CheckInvariant(true));
}

}  // namespace
}  // namespace servesim
