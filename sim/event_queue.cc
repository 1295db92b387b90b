#include "sim/event_queue.h"

#include "sim/base/status_macros.h"

namespace servesim {

void EventQueue::Push(TimeNs time_ns, int32_t kind, int32_t a, int64_t b) {
  Event e{time_ns, next_seq_++, kind, a, b};
  size_t i = heap_.size();
  heap_.push_back(e);
  while (i > 0) {
    const size_t parent = (i - 1) / 2;
    if (!Before(e, heap_[parent])) break;
    heap_[i] = heap_[parent];
    i = parent;
  }
  heap_[i] = e;
}

Event EventQueue::Pop() {
  SERVESIM_CHECK(!heap_.empty());
  const Event top = heap_.front();
  const Event last = heap_.back();
  heap_.pop_back();
  const size_t n = heap_.size();
  if (n > 0) {
    size_t i = 0;
    while (true) {
      size_t child = 2 * i + 1;
      if (child >= n) break;
      if (child + 1 < n && Before(heap_[child + 1], heap_[child])) ++child;
      if (!Before(heap_[child], last)) break;
      heap_[i] = heap_[child];
      i = child;
    }
    heap_[i] = last;
  }
  return top;
}

}  // namespace servesim
