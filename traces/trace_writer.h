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
#include "traces/record_checksum.h"

namespace servesim {

enum class OutputFormat {
  // Length-delimited TraceHeader + RequestRecords; exact (ns, hashes).
  kBinary,
  // arrival_ns,input_tokens,output_tokens,session_id,hash_block_tokens,
  // hashed_output_tokens,prefix_hashes (space-separated); exact; read back
  // as "lengths".
  kCsv,
  // {"timestamp": ms (exact decimal), "input_length", "output_length",
  //  "hash_ids", "hash_block_tokens", "session_id", "hashed_output_tokens"
  //  (when not 0)}; read back as
  // "mooncake" (hash values are re-chained on reading: the same sharing
  // structure, different numbers).
  kJsonl,
};

// "binary", "csv", "jsonl".
absl::StatusOr<OutputFormat> ParseOutputFormat(std::string_view name);
// .csv -> csv, .jsonl/.json -> jsonl, anything else -> binary.
OutputFormat OutputFormatForPath(const std::string& path);

// Streams requests to a file, atomically: a regular file is written to a
// temporary file in the same folder and renamed onto `path` by a successful
// Close(); destroying the writer without one (an error midway) removes the
// temporary and leaves `path` as it was. A FIFO or device is written in
// place. Not thread-safe; not copyable.
// TraceHeader.num_requests of a binary trace whose count is not known (being
// written, or written in place to a FIFO): readers check no count.
inline constexpr uint64_t kUnknownNumRequests = ~uint64_t{0};

class TraceWriter {
 public:
  // `source_description` goes into the binary header (SetSource can
  // replace it before Close). A directory `path` is an error.
  static absl::StatusOr<std::unique_ptr<TraceWriter>> Open(
      const std::string& path, OutputFormat format,
      const std::string& source_description);
  ~TraceWriter();
  TraceWriter(const TraceWriter&) = delete;
  TraceWriter& operator=(const TraceWriter&) = delete;

  // REQUIRES: arrivals nondecreasing across calls.
  absl::Status Write(const RequestSpec& r);
  // Binary: the header's source line as of Close() (a source's Describe()
  // once read, with its final counts). Cut to the room reserved at Open
  // (the description then + 1024 bytes).
  void SetSource(const std::string& source_description);
  // Flushes, (binary) rewrites the header, and renames the file into place.
  absl::Status Close();
  int64_t written() const { return written_; }

 private:
  TraceWriter() = default;
  absl::Status Flush(bool force);
  // Closes and removes the temporary (if any).
  void Discard();

  std::string path_;      // the destination
  std::string tmp_path_;  // "" when writing `path_` in place
  OutputFormat format_ = OutputFormat::kBinary;
  std::FILE* file_ = nullptr;
  std::string buf_;
  size_t source_room_ = 0;  // bytes of the header's padded source field
  std::string source_;
  TimeNs prev_ns_ = 0;
  int64_t written_ = 0;
  uint64_t checksum_ = kRecordChecksumSeed;  // binary: the records so far
};

// What ConvertTraceWithSummary wrote.
struct ConvertSummary {
  int64_t requests = 0;
  TimeNs first_arrival_ns = 0;
  TimeNs last_arrival_ns = 0;
  // Unmeasured requests (RequestSpec::unmeasured) not written: a trace
  // file has no field for them.
  int64_t unmeasured_left_out = 0;
  std::string source;  // Describe() of the source after reading it all
};

// Copies `source` to `path` (atomically, see TraceWriter); returns the
// number of requests written.
absl::StatusOr<int64_t> ConvertTrace(RequestSource& source, const std::string& path,
                                     OutputFormat format);
// `write_when_empty` false: a source that gives no request leaves `path`
// as it was (summary.requests == 0; a FIFO or device is still opened).
absl::StatusOr<ConvertSummary> ConvertTraceWithSummary(RequestSource& source,
                                                       const std::string& path,
                                                       OutputFormat format,
                                                       bool write_when_empty = true);

}  // namespace servesim

#endif  // SERVESIM_TRACES_TRACE_WRITER_H_
