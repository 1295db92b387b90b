#include "traces/trace_reader.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sim/base/hash.h"
#include "traces/bench_result.h"
#include "traces/parse_util.h"

namespace servesim {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

const std::string kData = std::string(SERVESIM_DATA_DIR) + "/traces/";
const std::string kFixtures =
    std::string(SERVESIM_SOURCE_DIR) + "/tests/testdata/traces/";

struct ReadAll {
  std::vector<RequestSpec> requests;
  absl::Status status;
  ReaderStats stats;
};

ReadAll Read(TraceFormat format, const std::string& path, bool skip_bad_rows = false,
             ReaderOptions opts = {}) {
  ReadAll r;
  opts.path = path;
  opts.skip_bad_rows = skip_bad_rows;
  auto reader = OpenTraceReader(format, opts);
  if (!reader.ok()) {
    r.status = reader.status();
    return r;
  }
  RequestSpec spec;
  while (true) {
    auto got = (*reader)->Next(spec);
    if (!got.ok()) {
      r.status = got.status();
      // Sticky: the same error again.
      auto again = (*reader)->Next(spec);
      EXPECT_EQ(again.status(), got.status());
      break;
    }
    if (!*got) break;
    r.requests.push_back(spec);
  }
  r.stats = (*reader)->stats();
  return r;
}

int32_t Median(std::vector<int32_t> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void ExpectIdsAndOrder(const std::vector<RequestSpec>& reqs) {
  for (size_t i = 0; i < reqs.size(); ++i) {
    ASSERT_EQ(reqs[i].id, static_cast<int64_t>(i));
    if (i > 0) {
      ASSERT_LE(reqs[i - 1].arrival_ns, reqs[i].arrival_ns);
    }
  }
  if (!reqs.empty()) {
    EXPECT_EQ(reqs[0].arrival_ns, 0);
  }
}

// ---- real traces: the numbers documented in data/traces/README.md

struct AzureCase {
  const char* file;
  size_t rows;
  int32_t context_median, generated_median, context_max, generated_max;
};

class AzureRealTraceTest : public ::testing::TestWithParam<AzureCase> {};

TEST_P(AzureRealTraceTest, RowCountMediansAndTimeSpanMatchReadme) {
  const AzureCase& c = GetParam();
  ReadAll r = Read(TraceFormat::kAzure, kData + c.file);
  ASSERT_TRUE(r.status.ok()) << r.status;
  ASSERT_EQ(r.requests.size(), c.rows);
  ExpectIdsAndOrder(r.requests);
  std::vector<int32_t> in, out;
  for (const auto& q : r.requests) {
    in.push_back(q.input_tokens);
    out.push_back(q.output_tokens);
  }
  EXPECT_EQ(Median(in), c.context_median);
  EXPECT_EQ(Median(out), c.generated_median);
  EXPECT_EQ(*std::max_element(in.begin(), in.end()), c.context_max);
  EXPECT_EQ(*std::max_element(out.begin(), out.end()), c.generated_max);
  // Both files lie within 18:15-19:14 on 2023-11-16: the span is below
  // an hour (59 minutes).
  EXPECT_LT(r.requests.back().arrival_ns, 59LL * 60 * kNsPerSec);
  EXPECT_GT(r.requests.back().arrival_ns, 50LL * 60 * kNsPerSec);
  EXPECT_EQ(r.stats.total_skipped(), 0);
}

INSTANTIATE_TEST_SUITE_P(Files, AzureRealTraceTest,
                         ::testing::Values(AzureCase{"AzureLLMInferenceTrace_code.csv.gz",
                                                     8819, 1469, 13, 7437, 1899},
                                           AzureCase{"AzureLLMInferenceTrace_conv.csv.gz",
                                                     19366, 1020, 129, 14050, 1000}));

TEST(AzureReaderTest, ArrivalsAreExactDifferencesOfTheTimestamps) {
  ReadAll r = Read(TraceFormat::kAzure, kData + "AzureLLMInferenceTrace_code.csv.gz");
  ASSERT_TRUE(r.status.ok());
  // First rows: 18:17:03.9799600 and 18:17:04.0319600; last 19:14:19.9280160.
  EXPECT_EQ(r.requests[1].arrival_ns, 52'000'000);
  int64_t first = 0, last = 0;
  ASSERT_TRUE(ParseTimestampToNs("2023-11-16 18:17:03.9799600", &first));
  ASSERT_TRUE(ParseTimestampToNs("2023-11-16 19:14:19.9280160", &last));
  EXPECT_EQ(r.requests.back().arrival_ns, last - first);
}

TEST(AzureReaderTest, Reads2024TimestampsWithZoneAndMissingFraction) {
  ReadAll r = Read(TraceFormat::kAzure, kFixtures + "azure_2024.csv");
  ASSERT_TRUE(r.status.ok()) << r.status;
  ASSERT_EQ(r.requests.size(), 2u);
  EXPECT_EQ(r.requests[1].arrival_ns, 990'070'000);
}

TEST(AzureReaderTest, AcceptsMissingFinalNewlineAndShortFraction) {
  ReadAll r = Read(TraceFormat::kAzure, kFixtures + "azure_good.csv");
  ASSERT_TRUE(r.status.ok()) << r.status;
  ASSERT_EQ(r.requests.size(), 3u);
  EXPECT_EQ(r.requests[2].arrival_ns, 220'040'000);
  EXPECT_EQ(r.requests[2].output_tokens, 27);
}

struct MooncakeCase {
  const char* file;
  size_t rows;
};

class MooncakeRealTraceTest : public ::testing::TestWithParam<MooncakeCase> {};

TEST_P(MooncakeRealTraceTest, RowCountAndHashesCoverThePrompt) {
  ReadAll r = Read(TraceFormat::kMooncake, kData + GetParam().file);
  ASSERT_TRUE(r.status.ok()) << r.status;
  ASSERT_EQ(r.requests.size(), GetParam().rows);
  ExpectIdsAndOrder(r.requests);
  for (const auto& q : r.requests) {
    ASSERT_EQ(q.hash_block_tokens, 512);
    ASSERT_EQ(q.prefix_hashes.size(), static_cast<size_t>((q.input_tokens + 511) / 512));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Files, MooncakeRealTraceTest,
    ::testing::Values(MooncakeCase{"mooncake_conversation_trace.jsonl.gz", 12031},
                      MooncakeCase{"mooncake_synthetic_trace.jsonl.gz", 3993}));

TEST(MooncakeReaderTest, SharedHashIdsGiveSharedChainedPrefixes) {
  ReadAll r =
      Read(TraceFormat::kMooncake, kData + "mooncake_conversation_trace.jsonl.gz");
  ASSERT_TRUE(r.status.ok());
  // Rows 0-4 all start with hash id 0: the same first block...
  for (int i = 1; i <= 4; ++i) {
    EXPECT_EQ(r.requests[i].prefix_hashes[0], r.requests[0].prefix_hashes[0]) << i;
  }
  // ...and diverge at the second (ids 1, 14, 28, 42, 46).
  for (int i = 1; i <= 4; ++i) {
    EXPECT_NE(r.requests[i].prefix_hashes[1], r.requests[0].prefix_hashes[1]) << i;
  }
  // Timestamps are ms: the last row is at 3,536,999 ms.
  EXPECT_EQ(r.requests.back().arrival_ns, 3'536'999LL * kNsPerMs);
}

TEST(MooncakeReaderTest, EqualIdsAfterADifferentBlockAreNotASharedPrefix) {
  ReadAll r = Read(TraceFormat::kMooncake, kFixtures + "mooncake_good.jsonl");
  ASSERT_TRUE(r.status.ok()) << r.status;
  ASSERT_EQ(r.requests.size(), 3u);
  EXPECT_EQ(r.requests[0].prefix_hashes[0], r.requests[1].prefix_hashes[0]);
  EXPECT_NE(r.requests[0].prefix_hashes[1], r.requests[1].prefix_hashes[1]);
  EXPECT_EQ(r.requests[1].arrival_ns, 3 * kNsPerSec);
}

TEST(LengthsReaderTest, ShareGptStatsHaveAllRowsAndNoArrivalTimes) {
  ReaderOptions opts;
  opts.path = kData + "sharegpt_8k_filtered_stats_llama2_tokenizer.csv.gz";
  auto reader = OpenTraceReader(TraceFormat::kLengths, opts);
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_FALSE((*reader)->HasArrivalTimes());
  ReadAll r = Read(TraceFormat::kLengths, opts.path);
  ASSERT_TRUE(r.status.ok()) << r.status;
  ASSERT_EQ(r.requests.size(), 30731u);
  EXPECT_EQ(r.requests[0].input_tokens, 74);
  EXPECT_EQ(r.requests[0].output_tokens, 918);
  for (const auto& q : r.requests) ASSERT_EQ(q.arrival_ns, 0);
}

TEST(DetectTraceFormatTest, DetectsEveryShippedFile) {
  EXPECT_EQ(*DetectTraceFormat(kData + "AzureLLMInferenceTrace_code.csv.gz"),
            TraceFormat::kAzure);
  EXPECT_EQ(*DetectTraceFormat(kData + "mooncake_synthetic_trace.jsonl.gz"),
            TraceFormat::kMooncake);
  EXPECT_EQ(
      *DetectTraceFormat(kData + "sharegpt_8k_filtered_stats_llama2_tokenizer.csv.gz"),
      TraceFormat::kLengths);
  EXPECT_EQ(*DetectTraceFormat(kFixtures + "burstgpt_v3.csv"), TraceFormat::kBurstGpt);
  EXPECT_EQ(*DetectTraceFormat(kFixtures + "bailian_good.jsonl"), TraceFormat::kBailian);
  EXPECT_EQ(*DetectTraceFormat(std::string(SERVESIM_DATA_DIR) +
                               "/bench/dstack-llama405b/h100x8-16qps.json.gz"),
            TraceFormat::kVllmBench);
  EXPECT_FALSE(DetectTraceFormat(kFixtures + "empty.csv").ok());
}

// A file holding one JSON array is named as such (it was taken for a CSV
// lengths table without an input column).
TEST(DetectTraceFormatTest, AJsonArrayIsNamed) {
  const std::string path = ::testing::TempDir() + "/detect_array.jsonl";
  {
    std::ofstream f(path);
    f << R"([{"timestamp": 0, "input_length": 10, "output_length": 5}])"
      << "\n";
  }
  const auto format = DetectTraceFormat(path);
  ASSERT_FALSE(format.ok());
  EXPECT_NE(format.status().message().find(path + ":1: a JSON array"), std::string::npos)
      << format.status();
  std::remove(path.c_str());
}

// ---- BurstGPT, Bailian, vllm bench

TEST(BurstGptReaderTest, ThirdReleaseColumnsByNameAndFailedRowsCounted) {
  ReadAll r = Read(TraceFormat::kBurstGpt, kFixtures + "burstgpt_v3.csv");
  ASSERT_TRUE(r.status.ok()) << r.status;
  ASSERT_EQ(r.requests.size(), 3u);
  EXPECT_EQ(r.stats.skipped[static_cast<int>(SkipReason::kFailedRequest)], 1);
  EXPECT_EQ(r.requests[1].input_tokens, 300);
  EXPECT_EQ(r.requests[1].arrival_ns, 6 * kNsPerSec);  // 11 s - 5 s
  EXPECT_EQ(r.requests[1].session_id, 2);
  EXPECT_EQ(r.requests[2].arrival_ns, 6'500'000'000);
}

TEST(BurstGptReaderTest, ModelFilterKeepsOneModelAndCountsTheRest) {
  ReaderOptions opts;
  opts.model_filter = "GPT-4";
  ReadAll r = Read(TraceFormat::kBurstGpt, kFixtures + "burstgpt_v3.csv", false, opts);
  ASSERT_TRUE(r.status.ok()) << r.status;
  ASSERT_EQ(r.requests.size(), 1u);  // the other GPT-4 row failed
  EXPECT_EQ(r.requests[0].input_tokens, 40);
  EXPECT_EQ(r.stats.skipped[static_cast<int>(SkipReason::kModelFilter)], 2);
  EXPECT_EQ(r.stats.skipped[static_cast<int>(SkipReason::kFailedRequest)], 1);
}

// A non-numeric Session ID becomes the 63-bit FNV-1a of its text
// (Fnv1a64, sim/base/hash.h): equal texts, equal sessions.
TEST(BurstGptReaderTest, TextSessionIdsHashToStableIds) {
  const std::string path = ::testing::TempDir() + "/burstgpt_text_sessions.csv";
  std::ofstream(path) << "Timestamp,Session ID,Model,Request tokens,Response tokens,"
                         "Total tokens,Log Type,Elapsed time\n"
                         "5,conv-a,ChatGPT,10,5,15,Conversation log,1.0\n"
                         "6,conv-b,ChatGPT,10,5,15,Conversation log,1.0\n"
                         "7,conv-a,ChatGPT,10,5,15,Conversation log,1.0\n";
  ReadAll r = Read(TraceFormat::kBurstGpt, path);
  ASSERT_TRUE(r.status.ok()) << r.status;
  ASSERT_EQ(r.requests.size(), 3u);
  EXPECT_EQ(r.requests[0].session_id, static_cast<int64_t>(Fnv1a64Hash("conv-a") >> 1));
  EXPECT_EQ(r.requests[2].session_id, r.requests[0].session_id);
  EXPECT_NE(r.requests[1].session_id, r.requests[0].session_id);
  EXPECT_GE(r.requests[1].session_id, 0);
}

TEST(BurstGptReaderTest, FailedRowIsAnErrorWhenNotSkipped) {
  ReaderOptions opts;
  opts.skip_failed_requests = false;
  ReadAll r = Read(TraceFormat::kBurstGpt, kFixtures + "burstgpt_v1.csv", false, opts);
  EXPECT_THAT(r.status.message(),
              HasSubstr("burstgpt_v1.csv:3: column Response tokens: 0"));
}

TEST(BailianReaderTest, TurnsJoinTheirRootChatSessionAndShareHashes) {
  ReadAll r = Read(TraceFormat::kBailian, kFixtures + "bailian_good.jsonl");
  ASSERT_TRUE(r.status.ok()) << r.status;
  ASSERT_EQ(r.requests.size(), 4u);
  EXPECT_EQ(r.requests[0].session_id, 159);
  EXPECT_EQ(r.requests[1].session_id, 160);
  EXPECT_EQ(r.requests[2].session_id, 159);
  EXPECT_EQ(r.requests[3].session_id, 159);
  EXPECT_EQ(r.requests[3].hash_block_tokens, 16);
  EXPECT_EQ(r.requests[2].arrival_ns, 9'136'000'000);  // 70.25 - 61.114 s
  for (int b = 0; b < 3; ++b) {
    EXPECT_EQ(r.requests[3].prefix_hashes[b], r.requests[0].prefix_hashes[b]);
  }
}

// A request that streamed no token (no error, output 0: this client wrote
// 0 for empty answers) was prefilled: it is replayed as a one-token
// request marked unmeasured (it used to be skipped, so the server saw less
// load than it had), as calibrate replays it.
TEST(VllmBenchReaderTest, ReplaysEmptyAnswersAsUnmeasuredOneTokenLoad) {
  const std::string path =
      std::string(SERVESIM_DATA_DIR) + "/bench/dstack-llama405b/h100x8-16qps.json.gz";
  auto bench = ReadBenchResult(path);
  ASSERT_TRUE(bench.ok());
  const size_t n = bench->output_lens->size();
  size_t nonzero = 0;
  int64_t want_in = 0;
  for (size_t i = 0; i < n; ++i) {
    if ((*bench->output_lens)[i] > 0) ++nonzero;
    want_in += static_cast<int64_t>((*bench->input_lens)[i]);
  }
  ASSERT_LT(nonzero, 1000u);
  ReadAll r = Read(TraceFormat::kVllmBench, path);
  ASSERT_TRUE(r.status.ok()) << r.status;
  ASSERT_EQ(r.requests.size(), n);
  EXPECT_EQ(r.stats.skipped[static_cast<int>(SkipReason::kFailedRequest)], 0);
  EXPECT_EQ(r.stats.unmeasured, static_cast<int64_t>(n - nonzero));
  EXPECT_EQ(r.requests[0].input_tokens, 13);
  int64_t total_in = 0;
  for (size_t i = 0; i < n; ++i) {
    const RequestSpec& q = r.requests[i];
    total_in += q.input_tokens;
    const bool empty = (*bench->output_lens)[i] == 0;
    EXPECT_EQ(q.unmeasured, empty) << i;
    EXPECT_EQ(q.output_tokens, empty ? 1 : static_cast<int32_t>((*bench->output_lens)[i]))
        << i;
  }
  EXPECT_EQ(total_in, want_in);
}

TEST(VllmBenchReaderTest, SummaryOnlyFileCannotBeReplayed) {
  ReadAll r = Read(TraceFormat::kVllmBench,
                   std::string(SERVESIM_DATA_DIR) +
                       "/bench/mi300x-gemma4-e2b-2026-09-17/c1-in128-out128.json");
  EXPECT_THAT(r.status.message(), HasSubstr("input_lens"));
}

// ---- bad input fixtures: error names file:line and field; skip counts

struct BadCase {
  TraceFormat format;
  const char* file;
  const char* where;  // "file:line: field/column X"
  SkipReason reason;
  size_t good_rows;  // rows left with skip_bad_rows
};

class BadInputTest : public ::testing::TestWithParam<BadCase> {};

TEST_P(BadInputTest, ErrorNamesFileLineAndFieldAndSkipCountsByReason) {
  const BadCase& c = GetParam();
  ReadAll strict = Read(c.format, kFixtures + c.file);
  ASSERT_FALSE(strict.status.ok()) << c.file;
  EXPECT_THAT(strict.status.message(), HasSubstr(c.where));
  ReadAll lax = Read(c.format, kFixtures + c.file, /*skip_bad_rows=*/true);
  ASSERT_TRUE(lax.status.ok()) << lax.status;
  EXPECT_EQ(lax.requests.size(), c.good_rows);
  EXPECT_EQ(lax.stats.skipped[static_cast<int>(c.reason)], 1) << SkipReasonName(c.reason);
  EXPECT_EQ(lax.stats.total_skipped(), 1);
  ExpectIdsAndOrder(lax.requests);
}

INSTANTIATE_TEST_SUITE_P(
    Fixtures, BadInputTest,
    ::testing::Values(
        BadCase{TraceFormat::kAzure, "azure_malformed_row.csv",
                "azure_malformed_row.csv:3: column TIMESTAMP", SkipReason::kMalformed, 2},
        BadCase{TraceFormat::kAzure, "azure_column_count.csv",
                "azure_column_count.csv:3: expected 3 columns", SkipReason::kColumnCount,
                2},
        BadCase{TraceFormat::kAzure, "azure_time_backwards.csv",
                "azure_time_backwards.csv:3: field TIMESTAMP", SkipReason::kTimeBackwards,
                2},
        BadCase{TraceFormat::kAzure, "azure_negative_length.csv",
                "azure_negative_length.csv:3: column ContextTokens: -3180 is negative",
                SkipReason::kNegativeLength, 2},
        BadCase{TraceFormat::kAzure, "azure_absurd_length.csv",
                "azure_absurd_length.csv:3: column GeneratedTokens: 80000000 is above",
                SkipReason::kAbsurdLength, 2},
        BadCase{TraceFormat::kAzure, "azure_truncated.csv",
                "azure_truncated.csv:4: last line cut mid-record", SkipReason::kTruncated,
                2},
        BadCase{TraceFormat::kAzure, "azure_invalid_utf8.csv",
                "azure_invalid_utf8.csv:3: invalid UTF-8", SkipReason::kInvalidUtf8, 2},
        BadCase{TraceFormat::kMooncake, "mooncake_truncated.jsonl",
                "mooncake_truncated.jsonl:3: last line cut mid-record",
                SkipReason::kTruncated, 2},
        BadCase{TraceFormat::kMooncake, "mooncake_hash_count.jsonl",
                "mooncake_hash_count.jsonl:2: field hash_ids: has 2 entries",
                SkipReason::kHashCount, 2},
        BadCase{TraceFormat::kMooncake, "mooncake_time_backwards.jsonl",
                "mooncake_time_backwards.jsonl:2: field timestamp",
                SkipReason::kTimeBackwards, 2},
        BadCase{TraceFormat::kMooncake, "mooncake_malformed_row.jsonl",
                "mooncake_malformed_row.jsonl:2: invalid JSON", SkipReason::kMalformed,
                2},
        BadCase{TraceFormat::kMooncake, "mooncake_invalid_utf8.jsonl",
                "mooncake_invalid_utf8.jsonl:2: invalid UTF-8", SkipReason::kInvalidUtf8,
                1}));

TEST(BadInputTest, NegativeLengthNamesTheField) {
  ReadAll r = Read(TraceFormat::kMooncake, kFixtures + "mooncake_negative_length.jsonl");
  EXPECT_THAT(
      r.status.message(),
      HasSubstr("mooncake_negative_length.jsonl:1: field output_length: -5 is negative"));
  ReadAll lax =
      Read(TraceFormat::kMooncake, kFixtures + "mooncake_negative_length.jsonl", true);
  // Every row skipped: not an error, an empty stream with a count.
  EXPECT_TRUE(lax.status.ok());
  EXPECT_EQ(lax.stats.skipped[static_cast<int>(SkipReason::kNegativeLength)], 1);
}

TEST(BadInputTest, EmptyFilesAreErrorsInEveryFormat) {
  for (TraceFormat f :
       {TraceFormat::kAzure, TraceFormat::kBurstGpt, TraceFormat::kLengths}) {
    ReadAll r = Read(f, kFixtures + "empty.csv", true);
    EXPECT_THAT(r.status.message(), HasSubstr("empty.csv:1: empty file"))
        << TraceFormatName(f);
  }
  for (TraceFormat f : {TraceFormat::kMooncake, TraceFormat::kBailian}) {
    ReadAll r = Read(f, kFixtures + "empty.jsonl", true);
    EXPECT_THAT(r.status.message(), HasSubstr("empty.jsonl:1: empty file"))
        << TraceFormatName(f);
  }
  for (TraceFormat f : {TraceFormat::kVllmBench, TraceFormat::kBinary}) {
    ReadAll r = Read(f, kFixtures + "empty.jsonl", true);
    EXPECT_THAT(r.status.message(), HasSubstr("empty")) << TraceFormatName(f);
  }
}

TEST(BadInputTest, MissingFileIsAnError) {
  ReadAll r = Read(TraceFormat::kAzure, "/nonexistent/trace.csv");
  EXPECT_THAT(r.status.message(), HasSubstr("/nonexistent/trace.csv"));
}

TEST(BadInputTest, HeaderWithoutRequiredColumnIsAnErrorEvenWhenSkipping) {
  ReadAll r = Read(TraceFormat::kAzure, kFixtures + "lengths_good.csv", true);
  EXPECT_THAT(r.status.message(),
              HasSubstr("lengths_good.csv:1: header has no TIMESTAMP"));
}

std::string WriteTemp(const std::string& name, const std::string& text) {
  std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
  return path;
}

// The error of reading `text`, written to a scratch file `name`, as `format`.
std::string ReadError(TraceFormat format, const std::string& name,
                      const std::string& text) {
  return std::string(Read(format, WriteTemp(name, text)).status.message());
}

TEST(BadInputTest, DirectoryIsReportedAsADirectoryNotAnEmptyFile) {
  const std::string dir = ::testing::TempDir();
  for (TraceFormat f :
       {TraceFormat::kAzure, TraceFormat::kMooncake, TraceFormat::kBurstGpt,
        TraceFormat::kBailian, TraceFormat::kVllmBench, TraceFormat::kLengths,
        TraceFormat::kBinary}) {
    ReadAll r = Read(f, dir);
    EXPECT_THAT(r.status.message(), HasSubstr("is a directory")) << TraceFormatName(f);
    EXPECT_THAT(r.status.message(), Not(HasSubstr("empty file"))) << TraceFormatName(f);
  }
  auto detected = DetectTraceFormat(dir);
  ASSERT_FALSE(detected.ok());
  EXPECT_THAT(detected.status().message(), HasSubstr("is a directory"));
}

// Columns that were resolved by a silent guess: a name given twice (the
// first copy read), two aliases of one field (arrival_ns won over
// arrival_s), and a time column of no known unit (read as no times: every
// request at t = 0).
TEST(BadInputTest, TwiceNamedAliasedOrUnitlessColumnsAreErrors) {
  EXPECT_THAT(
      ReadError(TraceFormat::kAzure, "dup.csv",
                "TIMESTAMP,ContextTokens,GeneratedTokens,"
                "ContextTokens\n2023-11-16 18:17:03,100,10,5\n"),
      HasSubstr("dup.csv:1: column ContextTokens appears twice (columns 2 and 4)"));
  EXPECT_THAT(ReadError(TraceFormat::kLengths, "both.csv",
                        "arrival_ns,arrival_s,input_tokens,output_tokens\n"
                        "0,0,10,5\n100,5,10,5\n"),
              HasSubstr("columns arrival_ns and arrival_s both give the same field"));
  EXPECT_THAT(ReadError(TraceFormat::kLengths, "alias.csv",
                        "input_tokens,num_prefill_tokens,output_tokens\n"
                        "10,999,5\n"),
              HasSubstr("columns input_tokens and num_prefill_tokens both give"));
  EXPECT_THAT(ReadError(TraceFormat::kLengths, "unitless.csv",
                        "timestamp,input_tokens,output_tokens\n"
                        "0,10,5\n100,10,5\n"),
              HasSubstr("column timestamp looks like arrival times, but a length table "
                        "reads only arrival_s"));
  ReadAll seconds =
      Read(TraceFormat::kLengths, WriteTemp("seconds.csv",
                                            "arrival_s,input_tokens,output_tokens\n"
                                            "0,10,5\n1.5,10,5\n"));
  ASSERT_TRUE(seconds.status.ok()) << seconds.status;
  ASSERT_EQ(seconds.requests.size(), 2u);
  EXPECT_EQ(seconds.requests[1].arrival_ns, 1'500'000'000);
}

// What the Mooncake and Bailian readers refused, the lengths and binary
// readers took (more hashes than the prompt has blocks: phantom blocks in
// the sharing stats); Bailian merged two chats of one id into one session.
TEST(BadInputTest, HashCountsAndChatIdsAreCheckedInEveryReader) {
  EXPECT_THAT(
      ReadError(TraceFormat::kLengths, "hash_many.csv",
                "input_tokens,output_tokens,hash_block_tokens,prefix_hashes\n"
                "10,5,4,1 2 3 4\n"),
      HasSubstr("column prefix_hashes: has 4 hashes but input_tokens 10 allows at "
                "most 3 (ceil(input_tokens / 4))"));
  EXPECT_THAT(ReadError(TraceFormat::kBailian, "dup_chat.jsonl",
                        "{\"chat_id\": 1, \"parent_chat_id\": -1, \"timestamp\": 0.5, "
                        "\"input_length\": 32, \"output_length\": 5}\n"
                        "{\"chat_id\": 1, \"parent_chat_id\": -1, \"timestamp\": 0.6, "
                        "\"input_length\": 32, \"output_length\": 5}\n"),
              HasSubstr(":2: field chat_id: 1 repeats an earlier chat's id"));
  EXPECT_THAT(ReadError(TraceFormat::kBailian, "self_parent.jsonl",
                        "{\"chat_id\": 3, \"parent_chat_id\": 3, \"timestamp\": 0.5, "
                        "\"input_length\": 32, \"output_length\": 5}\n"),
              HasSubstr("field parent_chat_id: 3 is the chat's own id"));
}

// Hashes may also name an answer (hashed_output_tokens, servesim's own
// CSV and JSONL): the count allows the answer's blocks, the value is at
// most the output length, and a file naming none is held to the prompt.
TEST(BadInputTest, HashedAnswerTokensAreCheckedInEveryReader) {
  EXPECT_THAT(
      ReadError(TraceFormat::kLengths, "answer_range.csv",
                "input_tokens,output_tokens,hash_block_tokens,hashed_output_tokens,"
                "prefix_hashes\n"
                "10,5,4,6,1 2 3 4\n"),
      HasSubstr(":2: column hashed_output_tokens: \"6\" is outside "
                "0..output_tokens (5)"));
  EXPECT_THAT(
      ReadError(TraceFormat::kLengths, "answer_many.csv",
                "input_tokens,output_tokens,hash_block_tokens,hashed_output_tokens,"
                "prefix_hashes\n"
                "10,5,4,2,1 2 3 4\n"),
      HasSubstr("column prefix_hashes: has 4 hashes but input_tokens 10 + "
                "hashed_output_tokens 2 allows at most 3 (ceil((input_tokens + "
                "hashed_output_tokens) / 4))"));
  EXPECT_THAT(
      ReadError(TraceFormat::kLengths, "answer_nohash.csv",
                "input_tokens,output_tokens,hash_block_tokens,hashed_output_tokens,"
                "prefix_hashes\n"
                "10,5,,-5,\n"),
      HasSubstr(":2: column hashed_output_tokens: \"-5\" is outside"));
  EXPECT_THAT(
      ReadError(TraceFormat::kLengths, "answer_nohash2.csv",
                "input_tokens,output_tokens,hash_block_tokens,hashed_output_tokens,"
                "prefix_hashes\n"
                "10,5,,3,\n"),
      HasSubstr("column hashed_output_tokens: 3 answer tokens named, but the row "
                "has no prefix_hashes"));
  const ReadAll ok = Read(TraceFormat::kLengths,
                          WriteTemp("answer_ok.csv",
                                    "input_tokens,output_tokens,hash_block_tokens,"
                                    "hashed_output_tokens,prefix_hashes\n"
                                    "10,5,4,5,1 2 3 4\n"));
  ASSERT_TRUE(ok.status.ok()) << ok.status;
  ASSERT_EQ(ok.requests.size(), 1u);
  EXPECT_EQ(ok.requests[0].hashed_output_tokens, 5);
  EXPECT_EQ(ok.requests[0].prefix_hashes.size(), 4u);
  EXPECT_THAT(ReadError(TraceFormat::kMooncake, "answer_range.jsonl",
                        "{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 5, "
                        "\"hash_ids\": [1, 2, 3], \"hash_block_tokens\": 4, "
                        "\"hashed_output_tokens\": -1}\n"),
              HasSubstr("field hashed_output_tokens: expected an integer in "
                        "0..output_length (5)"));
  EXPECT_THAT(ReadError(TraceFormat::kMooncake, "answer_public.jsonl",
                        "{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 5, "
                        "\"hash_ids\": [1], \"hashed_output_tokens\": 2}\n"),
              HasSubstr("field hashed_output_tokens: given without hash_block_tokens"));
  EXPECT_THAT(ReadError(TraceFormat::kMooncake, "answer_many.jsonl",
                        "{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 5, "
                        "\"hash_ids\": [1, 2, 3, 4, 5], \"hash_block_tokens\": 4, "
                        "\"hashed_output_tokens\": 5}\n"),
              HasSubstr("field hash_ids: has 5 hashes but input_length 10 + "
                        "hashed_output_tokens 5 allows at most 4"));
}

// Messages that lacked the allowed range or misnamed the value.
TEST(BadInputTest, TimeAndNullErrorsSayTheRangeAndTheValue) {
  EXPECT_THAT(ReadError(TraceFormat::kLengths, "big_s.csv",
                        "arrival_s,input_tokens,output_tokens\n"
                        "1e18,10,5\n"),
              HasSubstr("\"1e18\" is not a non-negative number of seconds (allowed "
                        "0..4611686018 s)"));
  EXPECT_THAT(ReadError(TraceFormat::kVllmBench, "null_len.json",
                        "{\"completed\": 2, \"duration\": 1, "
                        "\"input_lens\": [10, null], "
                        "\"output_lens\": [5, 6]}"),
              HasSubstr("key input_lens[1]: null is not an integer token count"));
}

// A value quoted in an error is the file's: its control bytes are escaped
// (an ESC sequence cleared the terminal; a NUL cut the message short).
TEST(BadInputTest, QuotedValuesEscapeControlBytes) {
  EXPECT_THAT(ReadError(TraceFormat::kLengths, "nul.csv",
                        std::string("input_tokens,output_tokens\n1\0"
                                    "0,5\n",
                                    33)),
              HasSubstr("column input_tokens: \"1\\x000\" is not an integer token count "
                        "(allowed 1..10000000)"));
  EXPECT_THAT(ReadError(TraceFormat::kAzure, "esc.csv",
                        "TIMESTAMP,ContextTokens,GeneratedTokens\n"
                        "\x1b[2J\x1b[31mOOPS,10,5\n"),
              HasSubstr("\"\\x1b[2J\\x1b[31mOOPS\" is not a timestamp"));
}

// A FIFO with no writer hung every reader (the open blocks), and a pipe
// lost its first 4 KB to the format probe: refused before any open, named.
TEST(BadInputTest, AFifoIsRefusedBeforeAnyOpen) {
  const std::string fifo =
      ::testing::TempDir() + "/trace_" + std::to_string(::getpid()) + ".fifo";
  std::remove(fifo.c_str());
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  for (TraceFormat f :
       {TraceFormat::kAzure, TraceFormat::kMooncake, TraceFormat::kBurstGpt,
        TraceFormat::kBailian, TraceFormat::kVllmBench, TraceFormat::kLengths,
        TraceFormat::kBinary}) {
    ReadAll r = Read(f, fifo);
    EXPECT_THAT(r.status.message(), HasSubstr("is a pipe or FIFO, not a regular file"))
        << TraceFormatName(f);
  }
  auto detected = DetectTraceFormat(fifo);
  ASSERT_FALSE(detected.ok());
  EXPECT_THAT(detected.status().message(), HasSubstr("write it to a file first"));
  std::remove(fifo.c_str());
}

TEST(BadInputTest, ArrivalExactlyAtTheHorizonIsAcceptedOneNsLaterRejected) {
  const std::string ok = WriteTemp(
      "horizon_ok.csv", absl::StrCat("arrival_ns,input_tokens,output_tokens\n5,1,1\n",
                                     5 + kMaxTraceArrivalNs, ",1,1\n"));
  ReadAll r = Read(TraceFormat::kLengths, ok);
  ASSERT_TRUE(r.status.ok()) << r.status;
  ASSERT_EQ(r.requests.size(), 2u);
  EXPECT_EQ(r.requests[1].arrival_ns, kMaxTraceArrivalNs);

  const std::string bad = WriteTemp(
      "horizon_bad.csv", absl::StrCat("arrival_ns,input_tokens,output_tokens\n5,1,1\n",
                                      6 + kMaxTraceArrivalNs, ",1,1\n"));
  r = Read(TraceFormat::kLengths, bad);
  EXPECT_THAT(r.status.message(), HasSubstr("horizon_bad.csv:3: field arrival_ns"));
  EXPECT_THAT(r.status.message(), HasSubstr("2^62"));
  // Skippable like any bad row.
  r = Read(TraceFormat::kLengths, bad, /*skip_bad_rows=*/true);
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.requests.size(), 1u);
}

TEST(BadInputTest, SaturatedInt64TimestampIsRejectedNotPassedOn) {
  const std::string path = WriteTemp(
      "maxts.csv",
      "arrival_ns,input_tokens,output_tokens\n0,1,1\n9223372036854775807,1,1\n");
  ReadAll r = Read(TraceFormat::kLengths, path);
  EXPECT_THAT(r.status.message(), HasSubstr("maxts.csv:3: field arrival_ns"));
  const std::string jsonl = WriteTemp(
      "bigts.jsonl",
      "{\"timestamp\": 0, \"input_length\": 1, \"output_length\": 1}\n"
      "{\"timestamp\": 5000000000000, \"input_length\": 1, \"output_length\": 1}\n");
  r = Read(TraceFormat::kMooncake, jsonl);
  EXPECT_THAT(r.status.message(), HasSubstr("bigts.jsonl:2: field timestamp"));
}

TEST(BadInputTest, MooncakeTimestampRangeIsStatedInMilliseconds) {
  const std::string path =
      WriteTemp("negts.jsonl",
                "{\"timestamp\": -500, \"input_length\": 1, \"output_length\": 1}\n");
  ReadAll r = Read(TraceFormat::kMooncake, path);
  EXPECT_THAT(
      r.status.message(),
      // The horizon, 2^62 ns (it said INT64_MAX ns, past what a trace may hold).
      HasSubstr("-500 is not a non-negative time in ms (allowed 0..4611686018427 ms)"));
  EXPECT_THAT(r.status.message(), Not(HasSubstr(" ns")));
}

// A UTF-8 byte-order mark at the start of a JSONL trace is taken as the
// CSV readers take it (it was an error there, accepted here); one later in
// the file is still an error.
TEST(BadInputTest, AByteOrderMarkOpensAJsonlTraceAsItOpensACsvOne) {
  const std::string row =
      "{\"timestamp\": 5, \"input_length\": 10, \"output_length\": 2}\n";
  ReadAll ok =
      Read(TraceFormat::kMooncake, WriteTemp("bom.jsonl", "\xEF\xBB\xBF" + row + row));
  EXPECT_TRUE(ok.status.ok()) << ok.status;
  EXPECT_EQ(ok.requests.size(), 2u);
  ReadAll later =
      Read(TraceFormat::kMooncake, WriteTemp("bom2.jsonl", row + "\xEF\xBB\xBF" + row));
  EXPECT_THAT(later.status.message(), HasSubstr("bom2.jsonl:2:"));
}

}  // namespace
}  // namespace servesim
