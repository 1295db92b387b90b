// Shared body of the per-reader libFuzzer targets: write the input to a
// per-process temporary file, read it to the end strictly and with
// skip_bad_rows, and check the RequestSource contract on what comes out
// (ids 0, 1, 2, ..., nondecreasing arrivals, lengths in range). A broken
// contract aborts, which libFuzzer reports as a crash.
#ifndef SERVESIM_TRACES_FUZZ_READER_FUZZ_H_
#define SERVESIM_TRACES_FUZZ_READER_FUZZ_H_

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "traces/trace_reader.h"

namespace servesim {

inline void ReadToEnd(TraceFormat format, const std::string& path, bool skip) {
  ReaderOptions opts;
  opts.path = path;
  opts.skip_bad_rows = skip;
  auto reader = OpenTraceReader(format, opts);
  if (!reader.ok()) return;
  RequestSpec r;
  int64_t expect_id = 0;
  TimeNs prev = 0;
  for (int i = 0; i < 1'000'000; ++i) {
    auto got = (*reader)->Next(r);
    if (!got.ok()) {
      // Errors are sticky.
      if ((*reader)->Next(r).status() != got.status()) std::abort();
      return;
    }
    if (!*got) {
      auto again = (*reader)->Next(r);
      if (!again.ok() || *again) std::abort();
      return;
    }
    if (r.id != expect_id++ || r.arrival_ns < prev || r.arrival_ns < 0) std::abort();
    if (r.input_tokens < 1 || r.output_tokens < 1) std::abort();
    if (!r.prefix_hashes.empty() && r.hash_block_tokens < 1) std::abort();
    prev = r.arrival_ns;
    (void)(*reader)->Describe();
  }
}

inline int FuzzReader(TraceFormat format, const char* ext, const uint8_t* data,
                      size_t size) {
  static const std::string path =
      "/tmp/servesim_fuzz_" + std::to_string(::getpid()) + "." + ext;
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return 0;
  if (size > 0) std::fwrite(data, 1, size, f);
  std::fclose(f);
  ReadToEnd(format, path, /*skip=*/false);
  ReadToEnd(format, path, /*skip=*/true);
  return 0;
}

}  // namespace servesim

#endif  // SERVESIM_TRACES_FUZZ_READER_FUZZ_H_
