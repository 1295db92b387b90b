// Discrete-event queue: small POD events in integer nanoseconds, ordered by
// (time, seq) where seq is the insertion order, so equal-time events pop in
// the order they were pushed (deterministic). A binary heap on a flat
// vector: O(log n) push/pop, no allocation once the vector has grown.
// Thread-compatible. Not copyable.
#ifndef SERVESIM_SIM_EVENT_QUEUE_H_
#define SERVESIM_SIM_EVENT_QUEUE_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "sim/request.h"

namespace servesim {

struct Event {
  TimeNs time_ns = 0;
  uint64_t seq = 0;
  int32_t kind = 0;  // caller-defined
  int32_t a = 0;     // caller-defined payload (e.g. replica index)
  int64_t b = 0;     // caller-defined payload (e.g. request slot)
};

class EventQueue {
 public:
  EventQueue() = default;
  EventQueue(const EventQueue&) = delete;
  EventQueue& operator=(const EventQueue&) = delete;

  void Push(TimeNs time_ns, int32_t kind, int32_t a = 0, int64_t b = 0);
  bool empty() const { return heap_.empty(); }
  size_t size() const { return heap_.size(); }
  // REQUIRES: !empty().
  const Event& Top() const { return heap_.front(); }
  // REQUIRES: !empty(). Removes and returns the earliest (time, seq) event.
  Event Pop();

 private:
  static bool Before(const Event& x, const Event& y) {
    return x.time_ns < y.time_ns || (x.time_ns == y.time_ns && x.seq < y.seq);
  }
  std::vector<Event> heap_;
  uint64_t next_seq_ = 0;
};

}  // namespace servesim

#endif  // SERVESIM_SIM_EVENT_QUEUE_H_
