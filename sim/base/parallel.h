// Running work on a few threads: the calling thread plus jobs - 1 others.
// Used where results land in per-task slots, so the output is the same
// whatever the thread count (sweep, plan, leave-one-out refits).
#ifndef SERVESIM_SIM_BASE_PARALLEL_H_
#define SERVESIM_SIM_BASE_PARALLEL_H_

#include <algorithm>
#include <atomic>
#include <system_error>
#include <thread>
#include <vector>

namespace servesim {

// Calls worker() on up to `jobs` threads at once (the caller's is one) and
// returns when every call has returned. A thread the system refuses to
// start is simply not used. If the caller's own worker() throws, the other
// threads are joined before the exception leaves; worker() run on another
// thread must not throw (std::terminate).
template <typename F>
void RunOnThreads(int jobs, const F& worker) {
  std::vector<std::jthread> others;  // joined on destruction, also on unwinding
  for (int t = 1; t < jobs; ++t) {
    try {
      others.emplace_back(worker);
    } catch (const std::system_error&) {
      break;  // fewer threads than asked: the rest of the work waits its turn
    }
  }
  worker();
}

// Calls f(i) once for every i in [0, n) on up to `jobs` threads; f(i) must
// not throw and should write only its own slot i.
template <typename F>
void ParallelFor(int n, int jobs, const F& f) {
  std::atomic<int> next{0};
  RunOnThreads(std::min(std::max(jobs, 1), std::max(n, 1)), [&] {
    for (int i = next.fetch_add(1); i < n; i = next.fetch_add(1)) f(i);
  });
}

}  // namespace servesim

#endif  // SERVESIM_SIM_BASE_PARALLEL_H_
