// Writes a request stream to a file: servesim's binary format
// (proto/trace.proto), a CSV table, or Mooncake-compatible JSONL. Every
// output is readable again by OpenTrace (binary, lengths, mooncake).
#ifndef SERVESIM_TRACES_TRACE_WRITER_H_
#define SERVESIM_TRACES_TRACE_WRITER_H_

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "sim/request.h"
#include "sim/request_source.h"

namespace servesim {

enum class OutputFormat {
  // Length-delimited TraceHeader + RequestRecords; exact (ns, hashes).
  kBinary,
  // arrival_ns,input_tokens,output_tokens,session_id,hash_block_tokens,
  // prefix_hashes (space-separated); exact; read back as "lengths".
  kCsv,
  // {"timestamp": ms (exact decimal), "input_length", "output_length",
  //  "hash_ids", "hash_block_tokens", "session_id"}; read back as
  // "mooncake" (hash values are re-chained on reading: the same sharing
  // structure, different numbers).
  kJsonl,
};

// "binary", "csv", "jsonl".
absl::StatusOr<OutputFormat> ParseOutputFormat(std::string_view name);
// .csv -> csv, .jsonl/.json -> jsonl, anything else -> binary.
OutputFormat OutputFormatForPath(const std::string& path);

// Streams requests to a file. Not thread-safe; not copyable. Close() (or
// the destructor, ignoring errors) flushes.
class TraceWriter {
 public:
  static absl::StatusOr<std::unique_ptr<TraceWriter>> Open(
      const std::string& path, OutputFormat format,
      const std::string& source_description);
  ~TraceWriter();
  TraceWriter(const TraceWriter&) = delete;
  TraceWriter& operator=(const TraceWriter&) = delete;

  // REQUIRES: arrivals nondecreasing across calls.
  absl::Status Write(const RequestSpec& r);
  absl::Status Close();
  int64_t written() const { return written_; }

 private:
  TraceWriter() = default;
  absl::Status Flush(bool force);

  std::string path_;
  OutputFormat format_ = OutputFormat::kBinary;
  std::FILE* file_ = nullptr;
  std::string buf_;
  TimeNs prev_ns_ = 0;
  int64_t written_ = 0;
};

// Copies `source` to `path`; returns the number of requests written.
absl::StatusOr<int64_t> ConvertTrace(RequestSource& source, const std::string& path,
                                     OutputFormat format);

}  // namespace servesim

#endif  // SERVESIM_TRACES_TRACE_WRITER_H_
