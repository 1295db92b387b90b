#include "traces/trace_reader.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "sim/base/status_macros.h"
#include "traces/file_util.h"
#include "traces/parse_util.h"
#include "traces/readers/readers.h"

namespace servesim {

const char* SkipReasonName(SkipReason reason) {
  switch (reason) {
    case SkipReason::kMalformed:
      return "malformed";
    case SkipReason::kColumnCount:
      return "column_count";
    case SkipReason::kTimeBackwards:
      return "time_backwards";
    case SkipReason::kNegativeLength:
      return "negative_length";
    case SkipReason::kZeroLength:
      return "zero_length";
    case SkipReason::kAbsurdLength:
      return "absurd_length";
    case SkipReason::kHashCount:
      return "hash_count";
    case SkipReason::kInvalidUtf8:
      return "invalid_utf8";
    case SkipReason::kTruncated:
      return "truncated";
    case SkipReason::kFailedRequest:
      return "failed_request";
    case SkipReason::kModelFilter:
      return "model_filter";
  }
  return "unknown";
}

int64_t ReaderStats::total_skipped() const {
  int64_t n = 0;
  for (int64_t c : skipped) n += c;
  return n;
}

std::string ReaderStats::SkippedSummary() const {
  std::string out;
  for (int i = 0; i < kNumSkipReasons; ++i) {
    if (skipped[i] == 0) continue;
    if (!out.empty()) out += ' ';
    absl::StrAppend(&out, SkipReasonName(static_cast<SkipReason>(i)), "=", skipped[i]);
  }
  return out.empty() ? "none" : out;
}

const char* TraceFormatName(TraceFormat format) {
  switch (format) {
    case TraceFormat::kAzure:
      return "azure";
    case TraceFormat::kMooncake:
      return "mooncake";
    case TraceFormat::kBurstGpt:
      return "burstgpt";
    case TraceFormat::kBailian:
      return "bailian";
    case TraceFormat::kVllmBench:
      return "vllm-bench";
    case TraceFormat::kLengths:
      return "lengths";
    case TraceFormat::kBinary:
      return "binary";
  }
  return "unknown";
}

absl::StatusOr<TraceFormat> ParseTraceFormat(std::string_view name) {
  for (TraceFormat f :
       {TraceFormat::kAzure, TraceFormat::kMooncake, TraceFormat::kBurstGpt,
        TraceFormat::kBailian, TraceFormat::kVllmBench, TraceFormat::kLengths,
        TraceFormat::kBinary}) {
    if (name == TraceFormatName(f)) return f;
  }
  if (name == "csv") return TraceFormat::kLengths;
  if (name == "bench") return TraceFormat::kVllmBench;
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown trace format \"", std::string(name),
      "\" (allowed: azure, mooncake, burstgpt, bailian, vllm-bench, lengths, binary)"));
}

namespace {

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

}  // namespace

absl::StatusOr<std::unique_ptr<TraceReader>> OpenTraceReader(TraceFormat format,
                                                             const ReaderOptions& opts) {
  if (opts.max_tokens < 1 || opts.max_tokens > std::numeric_limits<int32_t>::max()) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_tokens ", opts.max_tokens, " is outside 1..2147483647"));
  }
  if (opts.hash_block_tokens < 0 || opts.hash_block_tokens > 1'000'000) {
    return absl::InvalidArgumentError(
        absl::StrCat("hash block size ", opts.hash_block_tokens,
                     " is outside 0..1000000 (0 = default)"));
  }
  switch (format) {
    case TraceFormat::kAzure:
      return trace_internal::OpenAzureReader(opts);
    case TraceFormat::kMooncake:
      return trace_internal::OpenMooncakeReader(opts);
    case TraceFormat::kBurstGpt:
      return trace_internal::OpenBurstGptReader(opts);
    case TraceFormat::kBailian:
      return trace_internal::OpenBailianReader(opts);
    case TraceFormat::kVllmBench:
      return trace_internal::OpenVllmBenchReader(opts);
    case TraceFormat::kLengths:
      return trace_internal::OpenLengthsReader(opts);
    case TraceFormat::kBinary:
      return trace_internal::OpenBinaryReader(opts);
  }
  return absl::InvalidArgumentError("unknown trace format");
}

absl::StatusOr<TraceFormat> DetectTraceFormat(const std::string& path) {
  RETURN_IF_ERROR(CheckRegularFile(path));
  // Binary: the header record starts with its magic within the first bytes.
  {
    std::FILE* f = std::fopen(path.c_str(), "rb");
    if (f == nullptr) {
      return absl::NotFoundError(
          absl::StrCat(path, ": cannot open: ", std::strerror(errno)));
    }
    char head[64];
    const size_t n = std::fread(head, 1, sizeof(head), f);
    std::fclose(f);
    if (std::string_view(head, n).find(trace_internal::kBinaryMagic) !=
        std::string_view::npos) {
      return TraceFormat::kBinary;
    }
    if (n == 0) return absl::InvalidArgumentError(absl::StrCat(path, ":1: empty file"));
  }
  if (EndsWith(path, ".json") || EndsWith(path, ".json.gz"))
    return TraceFormat::kVllmBench;
  ASSIGN_OR_RETURN(auto lines, LineReader::Open(path));
  std::string_view first;
  ASSIGN_OR_RETURN(bool got, lines->Next(first));
  if (!got) return absl::InvalidArgumentError(absl::StrCat(path, ":1: empty file"));
  if (first.rfind("\xEF\xBB\xBF", 0) == 0) first.remove_prefix(3);
  first = TrimSpaces(first);
  if (!first.empty() && first.front() == '{') {
    if (first.find("\"chat_id\"") != first.npos) return TraceFormat::kBailian;
    if (first.find("\"hash_ids\"") != first.npos ||
        first.find("\"input_length\"") != first.npos) {
      return TraceFormat::kMooncake;
    }
    if (first.find("\"completed\"") != first.npos) return TraceFormat::kVllmBench;
    return absl::InvalidArgumentError(absl::StrCat(
        path,
        ":1: JSON line with neither hash_ids/input_length (mooncake) nor chat_id "
        "(bailian); give the format explicitly"));
  }
  if (!first.empty() && first.front() == '[') {
    return absl::InvalidArgumentError(absl::StrCat(
        path,
        ":1: a JSON array; the JSON trace formats (mooncake, bailian) are JSONL, one "
        "object per line (a vLLM bench result is one object in a .json file)"));
  }
  if (first.find("ContextTokens") != first.npos) return TraceFormat::kAzure;
  if (first.find("Request tokens") != first.npos) return TraceFormat::kBurstGpt;
  if (first.find(',') != first.npos) return TraceFormat::kLengths;
  return absl::InvalidArgumentError(
      absl::StrCat(path,
                   ":1: cannot tell the trace format from the first line; give it "
                   "explicitly (azure, mooncake, burstgpt, bailian, vllm-bench, lengths, "
                   "binary)"));
}

}  // namespace servesim
