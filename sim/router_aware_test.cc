#include "sim/router_aware.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "gtest/gtest.h"

namespace servesim {
namespace {

std::unique_ptr<Scheduler> MakeReplica(int64_t blocks) {
  SchedulerConfig sc;
  sc.max_num_seqs = 64;
  sc.max_num_batched_tokens = 512;
  sc.max_model_len = 4096;
  KvCacheSpec kv;
  kv.num_blocks = blocks;
  kv.groups.push_back(KvGroupSpec{16, 0, 1});
  auto s = Scheduler::Create(sc, kv);
  EXPECT_TRUE(s.ok()) << s.status();
  return *std::move(s);
}

RequestSpec Req(RequestId id, int32_t input, std::vector<uint64_t> hashes = {}) {
  RequestSpec r;
  r.id = id;
  r.input_tokens = input;
  r.output_tokens = 8;
  r.prefix_hashes = std::move(hashes);
  r.hash_block_tokens = r.prefix_hashes.empty() ? 0 : 64;
  return r;
}

struct Fleet {
  std::vector<std::unique_ptr<Scheduler>> owned;
  std::vector<const Scheduler*> ptrs;
  explicit Fleet(const std::vector<int64_t>& blocks) {
    for (int64_t b : blocks) {
      owned.push_back(MakeReplica(b));
      ptrs.push_back(owned.back().get());
    }
  }
  // Routes and queues the request on the chosen replica, as the engine does.
  int32_t Send(Router& router, const RequestSpec& r) {
    const int32_t i = router.Route(r, ptrs);
    owned[i]->Add(r, 0, r.id);
    return i;
  }
};

TEST(KvAwareRouterTest, PicksTheReplicaWithMostFreeBlocks) {
  Fleet f({100, 300, 200});
  KvAwareRouter router;
  EXPECT_EQ(router.Route(Req(0, 64), f.ptrs), 1);
}

TEST(KvAwareRouterTest, BurstWithinOneStepSpreadsByBlocksStillWaiting) {
  // Equal replicas, no step in between: free blocks never change, so only
  // the router's estimate of waiting requests keeps it from herding.
  Fleet f({100, 100});
  KvAwareRouter router;
  EXPECT_EQ(f.Send(router, Req(0, 320)), 0);  // 20 blocks now promised on 0
  EXPECT_EQ(f.Send(router, Req(1, 160)), 1);  // 100 vs 80 free
  EXPECT_EQ(f.Send(router, Req(2, 160)), 1);  // 80 vs 90
  EXPECT_EQ(f.Send(router, Req(3, 16)), 0);   // 80 vs 80: tie, 0 has fewer outstanding
}

TEST(KvAwareRouterTest, TieGoesToFewestOutstandingThenLowestIndex) {
  Fleet f({50, 50, 50});
  KvAwareRouter router;
  f.owned[0]->Add(Req(100, 0 + 16), 0, 100);  // queued outside the router
  // Replica 0 has one outstanding; 1 and 2 none: 1 wins the tie.
  EXPECT_EQ(router.Route(Req(0, 16), f.ptrs), 1);
}

TEST(PrefixAwareRouterTest, SharedPrefixFollowsTheReplicaThatHasIt) {
  Fleet f({100, 100});
  PrefixAwareRouter router;
  EXPECT_EQ(f.Send(router, Req(0, 256, {1, 2, 3})), 0);
  // Replica 0 now has more outstanding, but holds the prefix [1, 2].
  EXPECT_EQ(f.Send(router, Req(1, 256, {1, 2, 9})), 0);
  EXPECT_EQ(router.MatchedBlocks(Req(9, 256, {1, 2, 9}), 0), 3);
  // No shared prefix: least outstanding.
  EXPECT_EQ(f.Send(router, Req(2, 256, {7, 8})), 1);
  EXPECT_EQ(f.Send(router, Req(3, 256)), 1);  // 2 vs 1 outstanding
}

// A router knows prompts, not answers: a request's hashed answer
// (hashed_output_tokens) is not recorded as on the replica.
TEST(PrefixAwareRouterTest, AHashedAnswerIsNotRecordedBeforeItExists) {
  Fleet f({100, 100});
  PrefixAwareRouter router;
  RequestSpec turn1 = Req(0, 128, {1, 2, 3, 4});  // 2 prompt blocks + answer
  turn1.output_tokens = 128;
  turn1.hashed_output_tokens = 128;
  ASSERT_EQ(f.Send(router, turn1), 0);
  EXPECT_EQ(router.MatchedBlocks(Req(1, 320, {1, 2, 3, 4, 5}), 0), 2);
}

TEST(PrefixAwareRouterTest, LongestPrefixWinsOverAShorterOne) {
  Fleet f({100, 100});
  PrefixAwareRouter router;
  ASSERT_EQ(f.Send(router, Req(0, 256, {1})), 0);
  ASSERT_EQ(f.Send(router, Req(1, 256, {5, 6})), 1);
  ASSERT_EQ(f.Send(router, Req(2, 256, {1, 2, 3})), 0);
  // Replica 0 matches [1, 2, 3] (3 blocks), replica 1 nothing.
  EXPECT_EQ(router.Route(Req(3, 256, {1, 2, 3, 4}), f.ptrs), 0);
  // Replica 1 matches [5, 6]; 0 matches nothing.
  EXPECT_EQ(router.Route(Req(4, 256, {5, 6, 7}), f.ptrs), 1);
}

TEST(PrefixAwareRouterTest, MatchIsPositionalNotASetOfHashes) {
  Fleet f({100, 100});
  PrefixAwareRouter router;
  ASSERT_EQ(f.Send(router, Req(0, 256, {1, 2, 3})), 0);
  EXPECT_EQ(router.MatchedBlocks(Req(1, 256, {9, 2, 3}), 0), 0);
  EXPECT_EQ(router.MatchedBlocks(Req(1, 256, {2, 3}), 0), 0);
}

TEST(PrefixAwareRouterTest, TableForgetsLeastRecentlyUsedBeyondCapacity) {
  Fleet f({100});
  PrefixAwareRouter router(/*max_entries_per_replica=*/4);
  router.Route(Req(0, 256, {1, 2}), f.ptrs);
  router.Route(Req(1, 256, {3, 4}), f.ptrs);
  router.Route(Req(2, 256, {1}), f.ptrs);     // refreshes [1]
  router.Route(Req(3, 256, {5, 6}), f.ptrs);  // evicts the 2 oldest: [1,2] and [3]
  EXPECT_EQ(router.MatchedBlocks(Req(9, 256, {1, 2}), 0), 1);
  EXPECT_EQ(router.MatchedBlocks(Req(9, 256, {3, 4}), 0), 0);
  EXPECT_EQ(router.MatchedBlocks(Req(9, 256, {5, 6}), 0), 2);
}

TEST(PrefixAwareRouterTest, SharedFirstBlockDoesNotHerdPastTheImbalanceBound) {
  // Every prompt shares its first block (as in the Mooncake traces) and no
  // step runs, so nothing finishes: without the bound all 200 go to replica 0.
  Fleet f({100000, 100000, 100000});
  PrefixAwareRouter router;
  const PrefixBalance bound;
  std::vector<int64_t> per_replica(3, 0);
  for (RequestId id = 0; id < 200; ++id) {
    int64_t min_load = INT64_MAX;
    for (const Scheduler* s : f.ptrs) min_load = std::min(min_load, s->num_outstanding());
    const int32_t r = f.Send(router, Req(id, 256, {1, static_cast<uint64_t>(100 + id)}));
    // Its load before this request was within the bound.
    EXPECT_LE(f.ptrs[r]->num_outstanding() - 1, bound.Bound(min_load)) << id;
    ++per_replica[r];
  }
  // The first 33 follow the prefix to replica 0 (0 in flight elsewhere, bound
  // 32); then the others, now holding the prefix too, share the rest.
  EXPECT_EQ(per_replica[0], 200 / 3 + 1);
  EXPECT_GE(per_replica[1], 200 / 3);
  EXPECT_GE(per_replica[2], 200 / 3);
}

TEST(PrefixAwareRouterTest, PrefixIsKeptWithinTheBound) {
  Fleet f({100000, 100000});
  PrefixAwareRouter router(0, PrefixBalance{.abs_threshold = 4, .rel_threshold = 2.0});
  for (RequestId id = 0; id < 5; ++id) {
    EXPECT_EQ(f.Send(router, Req(id, 256, {7, static_cast<uint64_t>(100 + id)})), 0)
        << id;  // loads 0..4 <= 4
  }
  EXPECT_EQ(f.Send(router, Req(5, 256, {7, 200})), 1);  // 5 > max(0 + 4, 0)
  // Replica 0 matches 2 blocks, replica 1 one; with 1 in flight on replica 1
  // the bound is max(1 + 4, 2) = 5 and replica 0 (5 in flight) keeps it.
  EXPECT_EQ(f.Send(router, Req(6, 256, {7, 100})), 0);
  EXPECT_EQ(f.Send(router, Req(7, 256, {7, 101})), 1);  // 6 > 5: least loaded
}

TEST(PrefixBalanceTest, BoundIsTheLargerOfAbsoluteAndRelative) {
  const PrefixBalance b{.abs_threshold = 32, .rel_threshold = 1.5};
  EXPECT_EQ(b.Bound(0), 32);
  EXPECT_EQ(b.Bound(10), 42);
  EXPECT_EQ(b.Bound(64), 96);    // 64 + 32 = 96 = 1.5 x 64
  EXPECT_EQ(b.Bound(100), 150);  // relative part wins
}

TEST(MakeRouterTest, KnowsAllFourNamesAndRejectsOthers) {
  for (const char* n :
       {"", "round-robin", "least-outstanding", "kv-aware", "prefix-aware"}) {
    auto r = MakeRouter(n);
    ASSERT_TRUE(r.ok()) << n;
    if (*n) {
      EXPECT_EQ((*r)->Name(), n);
    }
  }
  auto bad = MakeRouter("random");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("prefix-aware"), std::string::npos);
}

}  // namespace
}  // namespace servesim

namespace servesim {
namespace {

// vLLM's DP balancer weighs a waiting request as four running ones: a
// replica with 3 running (score 3) wins over one with 1 waiting (score 4).
TEST(VllmDataParallelRouterTest, WaitingCountsFourTimesRunning) {
  Fleet f({1000, 1000, 1000});
  for (RequestId id = 0; id < 3; ++id) f.owned[0]->Add(Req(id, 16), 0, id);
  ASSERT_TRUE(f.owned[0]->Schedule(0));  // the three are admitted: running
  ASSERT_EQ(f.owned[0]->num_running(), 3);
  f.owned[1]->Add(Req(10, 16), 0, 10);  // one waiting
  f.owned[2]->Add(Req(11, 16), 0, 11);
  f.owned[2]->Add(Req(12, 16), 0, 12);  // two waiting
  VllmDataParallelRouter router;
  EXPECT_EQ(router.Route(Req(20, 16), f.ptrs), 0);  // 3 < 4 < 8
  // Ties go to the lowest index.
  Fleet idle({1000, 1000});
  EXPECT_EQ(router.Route(Req(21, 16), idle.ptrs), 0);
  EXPECT_EQ(idle.Send(router, Req(22, 16)), 0);
  EXPECT_EQ(idle.Send(router, Req(23, 16)), 1);
  EXPECT_EQ(MakeRouter("vllm-dp").value()->Name(), "vllm-dp");
}

}  // namespace
}  // namespace servesim
