#include "sim/router.h"

#include "absl/strings/str_format.h"

namespace servesim {

int32_t RoundRobinRouter::Route(const RequestSpec&,
                                std::span<const Scheduler* const> replicas) {
  return static_cast<int32_t>(next_++ % static_cast<int64_t>(replicas.size()));
}

int32_t LeastOutstandingRouter::Route(const RequestSpec&,
                                      std::span<const Scheduler* const> replicas) {
  int32_t best = 0;
  for (size_t i = 1; i < replicas.size(); ++i) {
    if (replicas[i]->num_outstanding() < replicas[best]->num_outstanding()) {
      best = static_cast<int32_t>(i);
    }
  }
  return best;
}

int32_t VllmDataParallelRouter::Route(const RequestSpec&,
                                      std::span<const Scheduler* const> replicas) {
  auto score = [](const Scheduler* s) {
    return 4 * static_cast<int64_t>(s->num_waiting()) + s->num_running();
  };
  int32_t best = 0;
  for (size_t i = 1; i < replicas.size(); ++i) {
    if (score(replicas[i]) < score(replicas[best])) best = static_cast<int32_t>(i);
  }
  return best;
}

}  // namespace servesim
