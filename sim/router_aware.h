// Load-state-aware routers for fleets, beside sim/router.h's round-robin and
// least-outstanding:
//  - KvAwareRouter: the replica with the most free KV blocks, net of the
//    blocks of requests it sent there that are still waiting (so a burst
//    arriving within one step does not herd onto one replica);
//  - PrefixAwareRouter: the replica with the longest cached prefix of the
//    request (RequestSpec::prefix_hashes), tie -> least outstanding. Like
//    production cache-aware routers it cannot see inside the replicas'
//    caches: it tracks which prefix blocks it has sent to each replica, in
//    an LRU table sized to that replica's KV capacity. Like them (SGLang's
//    router: balance_abs_threshold / balance_rel_threshold; llm-d and the
//    vLLM production stack likewise) it has a load bound: the prefix choice
//    is kept only while its requests in flight (num_outstanding) are within
//    the imbalance bound of the least-loaded replica's,
//        load(choice) <= max(min_load + abs_threshold, rel_threshold x min_load);
//    above it the request goes to the least-loaded replica instead. So no
//    request is ever sent to a replica more than that bound above the least
//    loaded one (a trace whose prompts all share their first block, such as
//    Mooncake's, no longer herds onto one replica).
// Ties in both go to the fewest outstanding requests, then the lowest
// index. Deterministic; thread-compatible; O(replicas + prefix blocks) per
// request.
#ifndef SERVESIM_SIM_ROUTER_AWARE_H_
#define SERVESIM_SIM_ROUTER_AWARE_H_

#include <cstdint>
#include <deque>
#include <list>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "sim/router.h"

namespace servesim {

class KvAwareRouter : public Router {
 public:
  int32_t Route(const RequestSpec& request,
                std::span<const Scheduler* const> replicas) override;
  std::string Name() const override { return "kv-aware"; }

 private:
  struct Pending {
    std::deque<int64_t> blocks;  // estimates of requests sent, oldest first
    int64_t sum = 0;
  };
  std::vector<Pending> pending_;
};

// The prefix-aware router's imbalance bound (see the top of this file).
struct PrefixBalance {
  int64_t abs_threshold = 32;  // requests in flight above the least loaded
  double rel_threshold = 1.5;  // times the least loaded's requests in flight
  // The most requests in flight a replica may have and still be chosen for
  // its cached prefix, when the least-loaded replica has `min_load`.
  int64_t Bound(int64_t min_load) const;
};

class PrefixAwareRouter : public Router {
 public:
  // `max_entries_per_replica` > 0 fixes each replica's table size (tests);
  // 0 sizes it from the replica's KV pool (tokens / hash block tokens).
  explicit PrefixAwareRouter(int64_t max_entries_per_replica = 0,
                             PrefixBalance balance = {})
      : fixed_capacity_(max_entries_per_replica), balance_(balance) {}
  int32_t Route(const RequestSpec& request,
                std::span<const Scheduler* const> replicas) override;
  std::string Name() const override { return "prefix-aware"; }

  // Leading prefix blocks of `request` the router believes `replica` holds.
  int32_t MatchedBlocks(const RequestSpec& request, int32_t replica) const;

 private:
  struct Table {
    std::list<uint64_t> lru;  // most recent at the front
    absl::flat_hash_map<uint64_t, std::list<uint64_t>::iterator> index;  // never iterated
  };
  void ChainKeys(const RequestSpec& request) const;
  int32_t Matched(const Table& t) const;
  void Insert(Table& t, int64_t capacity);

  int64_t fixed_capacity_;
  PrefixBalance balance_;
  std::vector<Table> tables_;
  mutable std::vector<uint64_t> keys_;  // scratch: chained keys of the request
};

}  // namespace servesim

#endif  // SERVESIM_SIM_ROUTER_AWARE_H_
