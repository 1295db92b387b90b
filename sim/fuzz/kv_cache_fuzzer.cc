// libFuzzer target: the fuzzer's bytes decoded into a KvCache spec and
// operations by the model check's decoder (sim/kv_cache_model.h); any
// difference from the reference cache aborts.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>

#include "sim/kv_cache_model.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  servesim::ByteChoices src(std::span<const uint8_t>(data, size));
  const absl::Status s = servesim::RunKvCacheModel(src, /*max_ops=*/1 << 20);
  if (!s.ok()) {
    std::fprintf(stderr, "%s\n", s.ToString().c_str());
    std::abort();
  }
  return 0;
}
