// libFuzzer target: the burstgpt trace reader never crashes, and what it
// emits keeps the RequestSource contract.
#include "traces/fuzz/reader_fuzz.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return servesim::FuzzReader(servesim::TraceFormat::kBurstGpt, "csv", data, size);
}
