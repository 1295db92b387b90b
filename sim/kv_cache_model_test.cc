#include "sim/kv_cache_model.h"

#include <cstddef>
#include <cstdint>
#include <iostream>
#include <vector>

#include "gtest/gtest.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace servesim {
namespace {

// KvCache and the literal reference agree after every one of 10^5 random
// operations, for each seed (each seed draws its own hybrid spec).
// A deliberate bug in the free queue that it catches and the hand-written
// kv_cache_test cases do not: KvCache::PopFree evicting a label without
// checking its queue entry's stamp (so a block freed again after a prefix
// hit is evicted from its stale, older place in the LRU order) fails here
// at seed 3, op 172 (cached 17 vs the reference's 18, with the generator
// as it was before follow-up prompts of hashed answers were added), while
// all 13 kv_cache_test cases pass.
TEST(KvCacheModelTest, KvCacheMatchesTheReferenceOverRandomOperations) {
  KvModelStats total;
  for (uint64_t seed = 1; seed <= 12; ++seed) {
    RandomChoices src(seed);
    KvModelStats stats;
    const absl::Status s = RunKvCacheModel(src, 100'000, &stats);
    ASSERT_TRUE(s.ok()) << "seed " << seed << ": " << s;
    EXPECT_EQ(stats.ops, 100'000);
    total.admits += stats.admits;
    total.failed_allocs += stats.failed_allocs;
    total.preemptions += stats.preemptions;
    total.hits += stats.hits;
    total.evictions += stats.evictions;
    total.answer_hits += stats.answer_hits;
    total.in_flight_steps += stats.in_flight_steps;
  }
  // The operations reach the interesting paths (not a vacuous agreement).
  EXPECT_GT(total.admits, 10'000);
  EXPECT_GT(total.failed_allocs, 1'000);
  EXPECT_GT(total.preemptions, 10'000);
  EXPECT_GT(total.hits, 1'000);
  EXPECT_GT(total.evictions, 1'000);
  EXPECT_GT(total.answer_hits, 100);
  EXPECT_GT(total.in_flight_steps, 10'000);
  std::cout << "admits " << total.admits << " failed allocations " << total.failed_allocs
            << " preemptions " << total.preemptions << " hits " << total.hits
            << " evictions " << total.evictions << " answer hits " << total.answer_hits
            << " steps with tokens in flight " << total.in_flight_steps << "\n";
}

// The byte decoder (the fuzzer's) reaches the same comparisons.
TEST(KvCacheModelTest, ByteDecoderRunsUntilTheBytesEnd) {
  std::vector<uint8_t> bytes(4096);
  uint64_t x = 7;
  for (uint8_t& b : bytes) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    b = static_cast<uint8_t>(x >> 56);
  }
  ByteChoices src(bytes);
  KvModelStats stats;
  ASSERT_TRUE(RunKvCacheModel(src, 1'000'000, &stats).ok());
  EXPECT_GT(stats.ops, 500);
  EXPECT_TRUE(src.exhausted());
  // The fuzzer entry point over the same bytes, and over none.
  EXPECT_EQ(LLVMFuzzerTestOneInput(bytes.data(), bytes.size()), 0);
  EXPECT_EQ(LLVMFuzzerTestOneInput(nullptr, 0), 0);
}

}  // namespace
}  // namespace servesim
