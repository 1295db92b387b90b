#include "sim/router_aware.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_format.h"
#include "sim/base/hash.h"

namespace servesim {
namespace {

// Fewer outstanding wins; then the lower index (i < j always here).
bool LessLoaded(const Scheduler& a, const Scheduler& b) {
  return a.num_outstanding() < b.num_outstanding();
}

}  // namespace

int32_t KvAwareRouter::Route(const RequestSpec& request,
                             std::span<const Scheduler* const> replicas) {
  if (pending_.size() < replicas.size()) pending_.resize(replicas.size());
  int32_t best = -1;
  int64_t best_free = 0;
  for (size_t i = 0; i < replicas.size(); ++i) {
    Pending& p = pending_[i];
    // Requests this router sent that were admitted since (FIFO) no longer
    // wait: only the newest num_waiting estimates still count.
    while (static_cast<int64_t>(p.blocks.size()) > replicas[i]->num_waiting()) {
      p.sum -= p.blocks.front();
      p.blocks.pop_front();
    }
    const int64_t free = replicas[i]->kv().num_free_blocks() - p.sum;
    if (best < 0 || free > best_free ||
        (free == best_free && LessLoaded(*replicas[i], *replicas[best]))) {
      best = static_cast<int32_t>(i);
      best_free = free;
    }
  }
  const Scheduler& s = *replicas[best];
  const int64_t est = s.kv().MaxBlocksHeld(
      std::max(1, request.input_tokens), std::max(1, s.config().max_num_batched_tokens));
  pending_[best].blocks.push_back(est);
  pending_[best].sum += est;
  return best;
}

void PrefixAwareRouter::ChainKeys(const RequestSpec& request) const {
  keys_.clear();
  uint64_t k = 0x5eed5eed5eed5eedull ^ static_cast<uint64_t>(request.hash_block_tokens);
  // A router sees prompts only: the hashes of an answer the request will
  // generate (RequestSpec::hashed_output_tokens) are left out, from the
  // first block that holds answer tokens on.
  size_t n = request.prefix_hashes.size();
  if (request.hashed_output_tokens > 0 && request.hash_block_tokens > 0) {
    n = std::min(n,
                 static_cast<size_t>(request.input_tokens / request.hash_block_tokens));
  }
  for (size_t i = 0; i < n; ++i) {
    k = HashCombine(k, request.prefix_hashes[i]);  // position-dependent chain key
    keys_.push_back(k);
  }
}

int32_t PrefixAwareRouter::Matched(const Table& t) const {
  int32_t n = 0;
  while (n < static_cast<int32_t>(keys_.size()) && t.index.contains(keys_[n])) ++n;
  return n;
}

int32_t PrefixAwareRouter::MatchedBlocks(const RequestSpec& request,
                                         int32_t replica) const {
  if (replica < 0 || replica >= static_cast<int32_t>(tables_.size())) return 0;
  ChainKeys(request);
  return Matched(tables_[replica]);
}

void PrefixAwareRouter::Insert(Table& t, int64_t capacity) {
  for (uint64_t k : keys_) {
    auto it = t.index.find(k);
    if (it != t.index.end()) {
      t.lru.splice(t.lru.begin(), t.lru, it->second);
    } else {
      t.lru.push_front(k);
      t.index.emplace(k, t.lru.begin());
    }
  }
  while (static_cast<int64_t>(t.lru.size()) > capacity) {
    t.index.erase(t.lru.back());
    t.lru.pop_back();
  }
}

int64_t PrefixBalance::Bound(int64_t min_load) const {
  const double rel = rel_threshold * static_cast<double>(min_load);
  return std::max(min_load + abs_threshold, static_cast<int64_t>(std::floor(rel)));
}

int32_t PrefixAwareRouter::Route(const RequestSpec& request,
                                 std::span<const Scheduler* const> replicas) {
  if (tables_.size() < replicas.size()) tables_.resize(replicas.size());
  ChainKeys(request);
  int32_t best = -1;
  int32_t best_match = -1;
  int32_t least = 0;
  for (size_t i = 0; i < replicas.size(); ++i) {
    const int32_t m = Matched(tables_[i]);
    if (m > best_match ||
        (m == best_match && LessLoaded(*replicas[i], *replicas[best]))) {
      best = static_cast<int32_t>(i);
      best_match = m;
    }
    if (LessLoaded(*replicas[i], *replicas[least])) least = static_cast<int32_t>(i);
  }
  if (replicas[best]->num_outstanding() >
      balance_.Bound(replicas[least]->num_outstanding())) {
    best = least;  // imbalanced: load balancing wins over the cached prefix
  }
  if (!keys_.empty()) {
    int64_t capacity = fixed_capacity_;
    if (capacity <= 0) {
      // KV tokens the replica can hold, in trace hash blocks.
      const KvCache& kv = replicas[best]->kv();
      const int64_t groups =
          std::max<int64_t>(1, static_cast<int64_t>(kv.spec().groups.size()));
      const int64_t bs =
          kv.spec().groups.empty() ? 16 : kv.spec().groups[0].block_size_tokens;
      const int64_t tokens = kv.num_blocks() * bs / groups;
      capacity = std::max<int64_t>(64, tokens / std::max(1, request.hash_block_tokens));
    }
    Insert(tables_[best], capacity);
  }
  return best;
}

absl::StatusOr<std::unique_ptr<Router>> MakeRouter(const std::string& name) {
  if (name.empty() || name == "round-robin") return std::make_unique<RoundRobinRouter>();
  if (name == "least-outstanding") return std::make_unique<LeastOutstandingRouter>();
  if (name == "vllm-dp") return std::make_unique<VllmDataParallelRouter>();
  if (name == "kv-aware") return std::make_unique<KvAwareRouter>();
  if (name == "prefix-aware") return std::make_unique<PrefixAwareRouter>();
  return absl::InvalidArgumentError(
      absl::StrFormat("--router: \"%s\" is not one of round-robin, least-outstanding, "
                      "vllm-dp, kv-aware, prefix-aware",
                      name));
}

}  // namespace servesim
