#include "sim/base/status_macros.h"

#include <cstdio>
#include <cstdlib>

namespace servesim::internal {

void CheckFailed(const char* file, int line, const char* cond) {
  std::fprintf(stderr, "servesim: internal invariant broken at %s:%d: %s\n", file, line,
               cond);
  std::abort();
}

}  // namespace servesim::internal
