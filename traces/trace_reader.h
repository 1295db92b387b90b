// Streaming readers of request traces, one per file format. Every reader is
// a RequestSource: it reads one row at a time (memory bounded whatever the
// file size), assigns ids 0, 1, 2, ..., and gives arrival times in integer
// ns relative to the first emitted row.
//
// Strictness: a malformed row, a wrong column count, a timestamp earlier
// than the previous row's, an arrival more than kMaxTraceArrivalNs after
// the first row's, a negative, zero or absurd (> max_tokens) length, a last line cut
// mid-record, invalid UTF-8 and an empty file are errors whose message names file:line,
// the field and the allowed range. With skip_bad_rows the bad row is skipped instead and
// counted by reason (stats(), and Describe()). Header problems and unreadable files are
// always errors.
#ifndef SERVESIM_TRACES_TRACE_READER_H_
#define SERVESIM_TRACES_TRACE_READER_H_

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "sim/request.h"
#include "sim/request_source.h"

namespace servesim {

// Latest arrival (ns after the first request) that readers, transforms and
// generators give: 2^62 ns, about 146 years. Anything later is an error
// naming the record, so a consumer never sees a saturated INT64_MAX time
// and differences of two arrivals cannot overflow.
constexpr TimeNs kMaxTraceArrivalNs = kMaxArrivalNs;  // sim/request.h

// The most prefix hashes a record may carry, `block` tokens each: one per
// block of the prompt and the answer tokens the hashes also name
// (RequestSpec::hashed_output_tokens), the last block possibly partial.
constexpr int64_t MaxPrefixHashes(int64_t input_tokens, int64_t hashed_output_tokens,
                                  int64_t block) {
  return (input_tokens + hashed_output_tokens + block - 1) / block;
}

// Why a row was skipped.
enum class SkipReason {
  kMalformed,       // unparsable field, bad JSON, blank line
  kColumnCount,     // CSV row with the wrong number of cells
  kTimeBackwards,   // timestamp earlier than the previous emitted row
  kNegativeLength,  // a token count below zero
  kZeroLength,      // a token count of zero where at least 1 is needed
  kAbsurdLength,    // a token count above ReaderOptions::max_tokens
  kHashCount,       // Mooncake: len(hash_ids) != ceil(input_length / block)
  kInvalidUtf8,
  kTruncated,      // the last line, without a terminator, did not parse
  kFailedRequest,  // BurstGPT Response tokens = 0 / bench error (option)
  kModelFilter,    // BurstGPT row of another model (option)
};
constexpr int kNumSkipReasons = 11;
// Stable snake_case name ("time_backwards").
const char* SkipReasonName(SkipReason reason);

struct ReaderStats {
  int64_t rows = 0;      // data rows read (header excluded)
  int64_t requests = 0;  // rows emitted as requests
  // Of those, bench requests that streamed no token, emitted as
  // RequestSpec::unmeasured one-token requests.
  int64_t unmeasured = 0;
  std::array<int64_t, kNumSkipReasons> skipped{};
  int64_t total_skipped() const;
  // "time_backwards=3 malformed=1" (reasons with a count, fixed order), or
  // "none".
  std::string SkippedSummary() const;
};

enum class TraceFormat {
  kAzure,      // Azure LLM inference trace 2023/2024 CSV
  kMooncake,   // Mooncake JSONL
  kBurstGpt,   // BurstGPT CSV
  kBailian,    // Qwen-Bailian multi-turn JSONL
  kVllmBench,  // vllm bench serve --save-result (.json / .json.gz)
  kLengths,    // CSV table of lengths, optional arrival/session/hash columns
  kBinary,     // servesim length-delimited protobuf (proto/trace.proto)
};
// "azure", "mooncake", "burstgpt", "bailian", "vllm-bench", "lengths",
// "binary".
const char* TraceFormatName(TraceFormat format);
// Accepts the names above (and "csv" for lengths, "bench" for vllm-bench).
absl::StatusOr<TraceFormat> ParseTraceFormat(std::string_view name);

struct ReaderOptions {
  std::string path;
  // Tokens per prefix hash; 0: the format's default (Mooncake 512,
  // Bailian 16; the binary and lengths formats store their own).
  int32_t hash_block_tokens = 0;
  bool skip_bad_rows = false;
  // BurstGPT rows with Response tokens = 0, and bench entries with an
  // error or 0 output tokens: skipped and counted (true) or treated as bad
  // rows (false).
  bool skip_failed_requests = true;
  // BurstGPT: keep only rows whose Model equals this ("" = all).
  std::string model_filter;
  // Largest token count accepted (input or output).
  int64_t max_tokens = 10'000'000;
};

// A RequestSource over one trace file, with counts of what it skipped.
class TraceReader : public RequestSource {
 public:
  const ReaderStats& stats() const { return stats_; }
  // False for formats without timestamps (lengths tables without an
  // arrival column, bench files without start_times): every arrival is 0
  // and the caller should attach an arrival process (WithArrivals).
  virtual bool HasArrivalTimes() const { return true; }

 protected:
  ReaderStats stats_;
};

// Opens `opts.path` as `format`. Reads the header (CSV) or the whole file
// (vllm-bench, a few MB) now; rows are read by Next().
absl::StatusOr<std::unique_ptr<TraceReader>> OpenTraceReader(TraceFormat format,
                                                             const ReaderOptions& opts);

// Guesses the format from the extension and the first line: ".json" /
// ".json.gz" -> vllm-bench; a JSONL line with "chat_id" -> bailian, with
// "hash_ids" or "input_length" -> mooncake; a CSV header with TIMESTAMP and
// ContextTokens -> azure, with "Request tokens" -> burstgpt, else a table
// of lengths; the binary magic -> binary.
absl::StatusOr<TraceFormat> DetectTraceFormat(const std::string& path);

}  // namespace servesim

#endif  // SERVESIM_TRACES_TRACE_READER_H_
