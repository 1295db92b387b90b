// Test helper: reads a request source to its end or its first error.
#ifndef SERVESIM_TRACES_DRAIN_FOR_TEST_H_
#define SERVESIM_TRACES_DRAIN_FOR_TEST_H_

#include <vector>

#include "absl/status/status.h"
#include "sim/request_source.h"

namespace servesim {

struct Drained {
  std::vector<RequestSpec> requests;  // given before the end or the error
  absl::Status error;                 // OK when the source ended cleanly
};

inline Drained DrainSource(RequestSource& source) {
  Drained d;
  RequestSpec r;
  while (true) {
    auto got = source.Next(r);
    if (!got.ok()) {
      d.error = got.status();
      break;
    }
    if (!*got) break;
    d.requests.push_back(r);
  }
  return d;
}

}  // namespace servesim

#endif  // SERVESIM_TRACES_DRAIN_FOR_TEST_H_
