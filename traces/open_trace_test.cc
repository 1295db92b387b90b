#include "traces/open_trace.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/protobuf/util/delimited_message_util.h"
#include "gtest/gtest.h"
#include "proto/trace.pb.h"
#include "sim/vector_source.h"
#include "traces/drain_for_test.h"
#include "traces/trace_stats.h"
#include "traces/trace_writer.h"

namespace servesim {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

const std::string kData = std::string(SERVESIM_DATA_DIR) + "/traces/";
const std::string kFixtures =
    std::string(SERVESIM_SOURCE_DIR) + "/tests/testdata/traces/";

std::vector<RequestSpec> Drain(RequestSource& s) {
  std::vector<RequestSpec> out;
  RequestSpec r;
  while (true) {
    auto got = s.Next(r);
    EXPECT_TRUE(got.ok()) << got.status();
    if (!got.ok() || !*got) break;
    out.push_back(r);
  }
  return out;
}

std::vector<RequestSpec> Open(const TraceOptions& o) {
  auto s = OpenTrace(o);
  EXPECT_TRUE(s.ok()) << s.status();
  if (!s.ok()) return {};
  return Drain(**s);
}

TEST(OpenTraceTest, DetectsFormatAndReadsTheWholeTrace) {
  TraceOptions o;
  o.path = kData + "mooncake_synthetic_trace.jsonl.gz";
  auto r = Open(o);
  EXPECT_EQ(r.size(), 3993u);
  auto s = OpenTrace(o);
  ASSERT_TRUE(s.ok());
  EXPECT_THAT((*s)->Describe(), HasSubstr("mooncake trace"));
}

TEST(OpenTraceTest, TargetRateRescalesTheSpan) {
  TraceOptions o;
  o.path = kData + "AzureLLMInferenceTrace_code.csv.gz";
  o.target_rate_per_s = 10;
  auto s = OpenTrace(o);
  ASSERT_TRUE(s.ok()) << s.status();
  auto span = MeasureSpan(**s);
  ASSERT_TRUE(span.ok());
  EXPECT_EQ(span->requests, 8819);
  EXPECT_NEAR(span->MeanRatePerS(), 10.0, 1e-6);
}

TEST(OpenTraceTest, TargetRateHoldsForTheRequestsReplayed) {
  // The conversation trace opens slower (first 300 rows at ~3.6 req/s)
  // than its mean (~5.5): scaling by the whole file would replay the first
  // 300 at ~12.9 req/s when 20 was asked.
  TraceOptions o;
  o.path = kData + "AzureLLMInferenceTrace_conv.csv.gz";
  o.target_rate_per_s = 20;
  o.max_requests = 300;
  auto s = OpenTrace(o);
  ASSERT_TRUE(s.ok()) << s.status();
  auto span = MeasureSpan(**s);
  ASSERT_TRUE(span.ok());
  EXPECT_EQ(span->requests, 300);
  EXPECT_NEAR(span->MeanRatePerS(), 20.0, 1e-6);
}

TEST(OpenTraceTest, RateScaleTwoHalvesTheSpan) {
  TraceOptions o;
  o.path = kData + "AzureLLMInferenceTrace_conv.csv.gz";
  auto base = Open(o);
  o.rate_scale = 2;
  auto fast = Open(o);
  ASSERT_EQ(base.size(), fast.size());
  EXPECT_NEAR(static_cast<double>(fast.back().arrival_ns), base.back().arrival_ns / 2.0,
              1.0);
}

TEST(OpenTraceTest, WindowThenLoopThenLimit) {
  TraceOptions o;
  o.path = kData + "AzureLLMInferenceTrace_code.csv.gz";
  auto full = Open(o);
  size_t inside = 0;
  for (const auto& r : full)
    inside += r.arrival_ns >= 600 * kNsPerSec && r.arrival_ns < 1200 * kNsPerSec;
  o.window_start_ns = 600 * kNsPerSec;
  o.window_end_ns = 1200 * kNsPerSec;
  auto window = Open(o);
  ASSERT_GT(inside, 10u);
  ASSERT_EQ(window.size(), inside);
  EXPECT_LT(window.back().arrival_ns, 600 * kNsPerSec);
  o.loop_to_requests = static_cast<int64_t>(window.size()) * 3 + 1;
  o.max_requests = static_cast<int64_t>(window.size()) * 2;
  auto looped = Open(o);
  ASSERT_EQ(looped.size(), window.size() * 2);
  EXPECT_EQ(looped[window.size()].input_tokens, window[0].input_tokens);
  EXPECT_GT(looped[window.size()].arrival_ns, window.back().arrival_ns);
  for (size_t i = 0; i < looped.size(); ++i)
    ASSERT_EQ(looped[i].id, static_cast<int64_t>(i));
}

TEST(OpenTraceTest, LengthTableGetsTheRequestedArrivalProcess) {
  TraceOptions o;
  o.path = kData + "sharegpt_8k_filtered_stats_llama2_tokenizer.csv.gz";
  o.arrivals.kind = ArrivalSpec::Kind::kPoisson;
  o.arrivals.rate_per_s = 8;
  o.seed = 3;
  o.max_requests = 5000;
  auto r = Open(o);
  ASSERT_EQ(r.size(), 5000u);
  const double rate = 4999.0 / (r.back().arrival_ns / 1e9);
  EXPECT_NEAR(rate, 8.0, 0.4);
}

// A file with its own timestamps does not take a drawn arrival process:
// an error naming the file and what would change its rate, not a replay
// of other arrivals than the ones asked for.
TEST(OpenTraceTest, DrawnArrivalsOnATimestampedTraceAreAnError) {
  TraceOptions o;
  o.path = kFixtures + "mooncake_good.jsonl";
  o.arrivals.kind = ArrivalSpec::Kind::kPoisson;
  o.arrivals.rate_per_s = 100;
  auto src = OpenTrace(o);
  ASSERT_FALSE(src.ok());
  EXPECT_EQ(src.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(src.status().message().find("has its own arrival times"), std::string::npos)
      << src.status();
  EXPECT_NE(src.status().message().find(o.path), std::string::npos) << src.status();
}

TEST(OpenTraceTest, TargetRateOnALengthTableMeansPoissonAtThatRate) {
  TraceOptions o;
  o.path = kData + "sharegpt_8k_filtered_stats_llama2_tokenizer.csv.gz";
  o.target_rate_per_s = 20;
  o.max_requests = 4000;
  auto r = Open(o);
  ASSERT_EQ(r.size(), 4000u);
  EXPECT_NEAR(3999.0 / (r.back().arrival_ns / 1e9), 20.0, 1.0);
}

TEST(OpenTraceTest, BadOptionsNameTheField) {
  TraceOptions o;
  o.path = kData + "AzureLLMInferenceTrace_code.csv.gz";
  o.sample_fraction = 1.5;
  auto s = OpenTrace(o);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.status().message(), HasSubstr("sample fraction"));
  o.sample_fraction = 1;
  o.format = "nope";
  EXPECT_THAT(OpenTrace(o).status().message(), HasSubstr("allowed: azure"));
}

// ---- conversion round trips

class ConvertTest : public ::testing::TestWithParam<OutputFormat> {};

TEST_P(ConvertTest, RoundTripKeepsTimesLengthsSessionsAndSharing) {
  TraceOptions o;
  o.path = kData + "mooncake_conversation_trace.jsonl.gz";
  o.max_requests = 2000;
  auto src = OpenTrace(o);
  ASSERT_TRUE(src.ok());
  const std::string out = ::testing::TempDir() + "/rt." +
                          (GetParam() == OutputFormat::kCsv     ? "csv"
                           : GetParam() == OutputFormat::kJsonl ? "jsonl"
                                                                : "bin");
  auto n = ConvertTrace(**src, out, GetParam());
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(*n, 2000);
  auto original = Open(o);
  TraceOptions back;
  back.path = out;
  auto copy = Open(back);
  ASSERT_EQ(copy.size(), original.size());
  for (size_t i = 0; i < copy.size(); ++i) {
    ASSERT_EQ(copy[i].arrival_ns, original[i].arrival_ns) << i;
    ASSERT_EQ(copy[i].input_tokens, original[i].input_tokens);
    ASSERT_EQ(copy[i].output_tokens, original[i].output_tokens);
    ASSERT_EQ(copy[i].prefix_hashes.size(), original[i].prefix_hashes.size());
    ASSERT_EQ(copy[i].hash_block_tokens, original[i].hash_block_tokens);
    if (GetParam() != OutputFormat::kJsonl) {
      ASSERT_EQ(copy[i].prefix_hashes, original[i].prefix_hashes);
    }
  }
  // Sharing structure survives (JSONL re-chains values): same equalities.
  for (size_t i = 1; i < 50; ++i) {
    EXPECT_EQ(copy[i].prefix_hashes[0] == copy[0].prefix_hashes[0],
              original[i].prefix_hashes[0] == original[0].prefix_hashes[0]);
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, ConvertTest,
                         ::testing::Values(OutputFormat::kBinary, OutputFormat::kCsv,
                                           OutputFormat::kJsonl));

// A multi-turn synthetic workload keeps its sessions, its hashed answers
// (hashed_output_tokens) and its sharing structure in every format.
TEST_P(ConvertTest, KeepsSessionsAndHashedAnswersOfSyntheticWorkload) {
  SyntheticOptions so;
  so.num_requests = 300;
  so.sessions.min_turns = 2;
  so.sessions.max_turns = 4;
  so.arrival.rate_per_s = 3;
  auto src = MakeSyntheticSource(so);
  ASSERT_TRUE(src.ok());
  const std::string out = ::testing::TempDir() + "/syn." +
                          (GetParam() == OutputFormat::kCsv     ? "csv"
                           : GetParam() == OutputFormat::kJsonl ? "jsonl"
                                                                : "bin");
  ASSERT_TRUE(ConvertTrace(**src, out, GetParam()).ok());
  auto again = MakeSyntheticSource(so);
  auto original = Drain(**again);
  TraceOptions back;
  back.path = out;
  auto copy = Open(back);
  ASSERT_EQ(copy.size(), 300u);
  int hashed_answers = 0;
  for (size_t i = 0; i < copy.size(); ++i) {
    ASSERT_EQ(copy[i].session_id, original[i].session_id);
    ASSERT_EQ(copy[i].hashed_output_tokens, original[i].hashed_output_tokens) << i;
    ASSERT_EQ(copy[i].prefix_hashes.size(), original[i].prefix_hashes.size());
    if (GetParam() != OutputFormat::kJsonl) {
      ASSERT_EQ(copy[i].prefix_hashes, original[i].prefix_hashes);
    }
    ASSERT_EQ(copy[i].arrival_ns, original[i].arrival_ns);
    hashed_answers += original[i].hashed_output_tokens > 0 ? 1 : 0;
  }
  EXPECT_GT(hashed_answers, 50);
  // A follow-up's leading hashes equal its previous turn's (JSONL
  // re-chains the values; equalities survive).
  for (size_t i = 0; i < copy.size(); ++i) {
    for (size_t j = i + 1; j < copy.size(); ++j) {
      if (copy[j].session_id != copy[i].session_id) continue;
      ASSERT_FALSE(copy[i].prefix_hashes.empty());
      EXPECT_EQ(copy[j].prefix_hashes[copy[i].prefix_hashes.size() - 1],
                copy[i].prefix_hashes.back());
      break;
    }
  }
}

// The Mooncake fixture converted to a binary trace at `out`; its bytes.
std::string MooncakeFixtureAsBinary(const std::string& out) {
  TraceOptions o;
  o.path = kFixtures + "mooncake_good.jsonl";
  auto src = OpenTrace(o);
  EXPECT_TRUE(src.ok()) << src.status();
  if (!src.ok()) return "";
  EXPECT_TRUE(ConvertTrace(**src, out, OutputFormat::kBinary).ok());
  std::ifstream in(out, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(ConvertTest, TruncatedBinaryFileIsAnErrorNamingTheRecord) {
  const std::string out = ::testing::TempDir() + "/cut.bin";
  const std::string bytes = MooncakeFixtureAsBinary(out);
  std::ofstream(out, std::ios::binary | std::ios::trunc)
      << bytes.substr(0, bytes.size() - 3);
  TraceOptions back;
  back.path = out;
  auto s = OpenTrace(back);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_THAT(DrainSource(**s).error.message(),
              HasSubstr("cut.bin: record 3: truncated"));
}

// Byte offsets where each length-delimited record of a binary trace starts.
std::vector<size_t> RecordStarts(const std::string& bytes) {
  std::vector<size_t> starts;
  size_t p = 0;
  while (p < bytes.size()) {
    starts.push_back(p);
    uint64_t len = 0;
    int shift = 0;
    while (true) {
      const auto c = static_cast<unsigned char>(bytes[p++]);
      len |= static_cast<uint64_t>(c & 0x7f) << shift;
      shift += 7;
      if (c < 0x80) break;
    }
    p += len;
  }
  return starts;
}

// `content` written to `path`, then read back as a trace.
Drained ReadWritten(const std::string& path, const std::string& content) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << content;
  TraceOptions t;
  t.path = path;
  auto s = OpenTrace(t);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? DrainSource(**s) : Drained{};
}

// Cut at a record boundary, a binary trace read as a shorter one (the
// header, which held no count, said "first 30"); joined to another's
// records, as a longer one. The header counts its records now.
TEST(ConvertTest, BinaryFileCutAtARecordBoundaryOrJoinedIsAnError) {
  const std::string bytes = MooncakeFixtureAsBinary(::testing::TempDir() + "/whole.bin");
  const std::vector<size_t> starts = RecordStarts(bytes);
  ASSERT_GE(starts.size(), 4u);  // the header and 3 or more requests
  const int64_t records = static_cast<int64_t>(starts.size()) - 1;
  const std::string cut_path = ::testing::TempDir() + "/cut_at_record.bin";
  EXPECT_THAT(
      ReadWritten(cut_path, bytes.substr(0, starts[2])).error.message(),
      HasSubstr(absl::StrCat("the file ends after 1 records, but its header says ",
                             records, " (truncated?)")));
  const std::string joined_path = ::testing::TempDir() + "/joined.bin";
  EXPECT_THAT(
      ReadWritten(joined_path, bytes + bytes.substr(starts[1])).error.message(),
      HasSubstr(absl::StrCat("a record past the ", records, " its header counts")));
  const Drained whole = ReadWritten(::testing::TempDir() + "/whole_again.bin", bytes);
  EXPECT_TRUE(whole.error.ok()) << whole.error;
  EXPECT_EQ(static_cast<int64_t>(whole.requests.size()), records);
}

// The delimited message at byte `at` of `bytes`, and its encoding with
// `edit` applied.
template <typename M, typename Edit>
std::string Reencoded(const std::string& bytes, size_t at, Edit edit) {
  google::protobuf::io::ArrayInputStream in(bytes.data() + at,
                                            static_cast<int>(bytes.size() - at));
  M m;
  bool eof = false;
  EXPECT_TRUE(google::protobuf::util::ParseDelimitedFromZeroCopyStream(&m, &in, &eof));
  edit(m);
  std::string out;
  {
    google::protobuf::io::StringOutputStream os(&out);
    EXPECT_TRUE(google::protobuf::util::SerializeDelimitedToZeroCopyStream(m, &os));
  }
  return out;
}

// A byte changed inside a record that still parses changed a request
// silently (a prefix hash, a length); the header's fingerprint of the
// records catches it. A file of an older build (no fingerprint) still
// reads.
TEST(ConvertTest, AChangedRecordIsCaughtByTheHeadersFingerprint) {
  const std::string bytes = MooncakeFixtureAsBinary(::testing::TempDir() + "/fp.bin");
  const std::vector<size_t> starts = RecordStarts(bytes);
  ASSERT_GE(starts.size(), 4u);
  const std::string one_more_token =
      bytes.substr(0, starts[2]) +
      Reencoded<proto::RequestRecord>(
          bytes, starts[2],
          [](proto::RequestRecord& r) { r.set_input_tokens(r.input_tokens() + 1); }) +
      bytes.substr(starts[3]);
  EXPECT_THAT(ReadWritten(::testing::TempDir() + "/fp_changed.bin", one_more_token)
                  .error.message(),
              HasSubstr("is not the header's "));
  EXPECT_THAT(ReadWritten(::testing::TempDir() + "/fp_changed2.bin", one_more_token)
                  .error.message(),
              HasSubstr("the file is corrupt"));
  const Drained whole = ReadWritten(::testing::TempDir() + "/fp_whole.bin", bytes);
  EXPECT_TRUE(whole.error.ok()) << whole.error;
  const std::string older =
      Reencoded<proto::TraceHeader>(bytes, 0,
                                    [](proto::TraceHeader& h) {
                                      EXPECT_TRUE(h.has_records_checksum());
                                      h.clear_records_checksum();
                                    }) +
      bytes.substr(starts[1], starts[2] - starts[1]) +
      Reencoded<proto::RequestRecord>(
          bytes, starts[2],
          [](proto::RequestRecord& r) { r.set_input_tokens(r.input_tokens() + 1); }) +
      bytes.substr(starts[3]);
  EXPECT_TRUE(ReadWritten(::testing::TempDir() + "/fp_older.bin", older).error.ok());
}

// servesim wrote files it could not read back: a text line past the
// readers' limit, and a binary header whose source (a path of non-UTF-8
// bytes) made the proto3 string invalid.
TEST(ConvertTest, WritersWriteOnlyWhatTheReadersTake) {
  RequestSpec r;
  r.input_tokens = 4'000'000;
  r.output_tokens = 1;
  r.hash_block_tokens = 1;
  r.prefix_hashes.assign(3'500'000, 18'000'000'000'000'000'000ULL);  // ~70 MB of text
  const std::string csv = ::testing::TempDir() + "/long_line.csv";
  std::remove(csv.c_str());
  {
    auto w = TraceWriter::Open(csv, OutputFormat::kCsv, "test");
    ASSERT_TRUE(w.ok()) << w.status();
    const absl::Status st = (*w)->Write(r);
    EXPECT_THAT(st.message(), HasSubstr("request 0: its line would be "));
    EXPECT_THAT(st.message(),
                HasSubstr("(3500000 prefix hashes), past the 67108864 bytes"));
  }
  EXPECT_FALSE(std::filesystem::exists(csv));  // nothing renamed into place
  const std::string bin = ::testing::TempDir() + "/odd_source.bin";
  {
    auto w = TraceWriter::Open(bin, OutputFormat::kBinary,
                               "lengths trace a\xff\xfe"
                               "b.csv");
    ASSERT_TRUE(w.ok()) << w.status();
    RequestSpec one;
    one.input_tokens = one.output_tokens = 1;
    ASSERT_TRUE((*w)->Write(one).ok());
    ASSERT_TRUE((*w)->Close().ok());
  }
  TraceOptions o;
  o.path = bin;
  auto src = OpenTrace(o);
  ASSERT_TRUE(src.ok()) << src.status();
  EXPECT_THAT((*src)->Describe(), HasSubstr("a??b.csv"));
}

// The binary reader holds a record's hashed answer to its output length
// and its hashes to the prompt and that answer (records written as they
// are, the writer checks neither).
TEST(ConvertTest, BinaryReaderChecksHashedAnswerTokens) {
  const auto error_of = [](const RequestSpec& r, const std::string& name) {
    const std::string bin = ::testing::TempDir() + "/" + name;
    std::remove(bin.c_str());
    auto w = TraceWriter::Open(bin, OutputFormat::kBinary, "test");
    EXPECT_TRUE(w.ok()) << w.status();
    EXPECT_TRUE((*w)->Write(r).ok());
    EXPECT_TRUE((*w)->Close().ok());
    TraceOptions o;
    o.path = bin;
    auto src = OpenTrace(o);
    EXPECT_TRUE(src.ok()) << src.status();
    return std::string(DrainSource(**src).error.message());
  };
  RequestSpec r;
  r.input_tokens = 10;
  r.output_tokens = 5;
  r.hash_block_tokens = 4;
  r.prefix_hashes = {1, 2, 3, 4};
  r.hashed_output_tokens = 9;
  EXPECT_THAT(error_of(r, "answer_range.bin"),
              HasSubstr("record 1: field hashed_output_tokens: 9 is outside "
                        "0..output_tokens (5)"));
  r.hashed_output_tokens = 2;
  EXPECT_THAT(error_of(r, "answer_many.bin"),
              HasSubstr("field prefix_hashes: has 4 hashes but input_tokens 10 + "
                        "hashed_output_tokens 2 allows at most 3"));
  r.hashed_output_tokens = 5;
  EXPECT_EQ(error_of(r, "answer_ok.bin"), "");
}

TEST(OpenTraceTest, RateScalePastTheHorizonIsAnErrorNamingTheFlag) {
  // Requests 10 s apart, at the smallest scale allowed: 1e10 s > 2^62 ns.
  const std::string path = ::testing::TempDir() + "/ten_s_apart.csv";
  std::ofstream(path, std::ios::trunc)
      << "arrival_s,input_tokens,output_tokens\n0,5,5\n10,5,5\n";
  TraceOptions o;
  o.path = path;
  o.rate_scale = 1e-9;
  auto s = OpenTrace(o);
  ASSERT_TRUE(s.ok()) << s.status();
  const Drained d = DrainSource(**s);
  ASSERT_FALSE(d.error.ok()) << "reached the end without an error";
  for (const RequestSpec& r : d.requests) EXPECT_LE(r.arrival_ns, kMaxTraceArrivalNs);
  const absl::Status& st = d.error;
  EXPECT_THAT(st.message(), HasSubstr("--rate-scale 1e-09: request 1"));
  EXPECT_THAT(st.message(), HasSubstr("needs --rate-scale >= "));
}

TEST(OpenTraceTest, NegativeLengthFilterBoundIsAnError) {
  TraceOptions o;
  o.path = kFixtures + "azure_good.csv";
  o.lengths.min_input = -1;
  auto s = OpenTrace(o);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.status().message(), HasSubstr("min_input: -1 is negative"));
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

bool FolderHasTemporaries(const std::string& dir, const std::string& base) {
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().filename().string().rfind("." + base + ".tmp.", 0) == 0) return true;
  }
  return false;
}

TEST(ConvertTest, FailedConversionLeavesTheExistingOutputUntouched) {
  const std::string dir = ::testing::TempDir() + "/convert_fail";
  std::filesystem::create_directories(dir);
  const std::string out = dir + "/keep.csv";
  std::ofstream(out, std::ios::binary | std::ios::trunc) << "precious\n";
  TraceOptions o;
  o.path = kFixtures + "azure_negative_length.csv";  // fails at line 3
  auto src = OpenTrace(o);
  ASSERT_TRUE(src.ok()) << src.status();
  auto n = ConvertTrace(**src, out, OutputFormat::kCsv);
  ASSERT_FALSE(n.ok());
  EXPECT_THAT(n.status().message(), HasSubstr("azure_negative_length.csv:3"));
  EXPECT_EQ(ReadFile(out), "precious\n");
  EXPECT_FALSE(FolderHasTemporaries(dir, "keep.csv"));
  // A failure before the first record does not create the file either.
  const std::string fresh = dir + "/fresh.bin";
  auto again = OpenTrace(o);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(ConvertTrace(**again, fresh, OutputFormat::kBinary).ok());
  EXPECT_FALSE(std::filesystem::exists(fresh));
  EXPECT_FALSE(FolderHasTemporaries(dir, "fresh.bin"));
}

TEST(ConvertTest, ConversionInPlaceReplacesTheFileWhole) {
  const std::string path = ::testing::TempDir() + "/inplace.csv";
  std::filesystem::copy_file(kFixtures + "azure_good.csv", path,
                             std::filesystem::copy_options::overwrite_existing);
  TraceOptions o;
  o.path = path;
  auto src = OpenTrace(o);
  ASSERT_TRUE(src.ok());
  auto n = ConvertTrace(**src, path, OutputFormat::kCsv);
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(*n, 3);
  TraceOptions back;
  back.path = path;
  EXPECT_EQ(Open(back).size(), 3u);
}

TEST(ConvertTest, DirectoryAsOutputIsAnError) {
  TraceOptions o;
  o.path = kFixtures + "azure_good.csv";
  auto src = OpenTrace(o);
  ASSERT_TRUE(src.ok());
  auto n = ConvertTrace(**src, ::testing::TempDir(), OutputFormat::kCsv);
  ASSERT_FALSE(n.ok());
  EXPECT_THAT(n.status().message(), HasSubstr("is a directory"));
}

TEST(ConvertTest, BinaryHeaderRecordsTheSourceCountsAfterReading) {
  TraceOptions o;
  o.path = kFixtures + "azure_good.csv";
  auto src = OpenTrace(o);
  ASSERT_TRUE(src.ok());
  const std::string out = ::testing::TempDir() + "/prov.bin";
  auto summary = ConvertTraceWithSummary(**src, out, OutputFormat::kBinary);
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_EQ(summary->requests, 3);
  EXPECT_THAT(summary->source, HasSubstr("(rows 3, requests 3"));
  TraceOptions back;
  back.path = out;
  auto copy = OpenTrace(back);
  ASSERT_TRUE(copy.ok());
  EXPECT_EQ(Drain(**copy).size(), 3u);
  const std::string d = (*copy)->Describe();
  EXPECT_THAT(d, HasSubstr("from: azure trace"));
  EXPECT_THAT(d, HasSubstr("(rows 3, requests 3, skipped: none))"));
  EXPECT_THAT(d, Not(HasSubstr("rows 0")));
}

// ---- stats

TEST(TraceStatsTest, AzureCodeStatsMatchTheReadme) {
  TraceOptions o;
  o.path = kData + "AzureLLMInferenceTrace_code.csv.gz";
  auto reader = OpenTraceReaderFor(o);
  ASSERT_TRUE(reader.ok());
  auto st = ComputeTraceStats(**reader);
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->requests, 8819);
  EXPECT_EQ(st->input.p50, 1469);
  EXPECT_EQ(st->output.p50, 13);
  EXPECT_EQ(st->input.max, 7437);
  EXPECT_NEAR(st->mean_rate_per_s, 8818.0 / (st->span_ns / 1e9), 1e-9);
  EXPECT_GT(st->interarrival_cv, 1.0);  // bursty production traffic
  EXPECT_EQ(st->hashed_blocks, 0);
  ASSERT_TRUE(st->reader.has_value());
  EXPECT_EQ(st->reader->rows, 8819);
  const std::string json = FormatTraceStatsJson(*st);
  EXPECT_THAT(json, HasSubstr("\"p50\": 1469"));
  EXPECT_THAT(FormatTraceStatsText(*st), HasSubstr("skipped rows: none"));
}

TEST(TraceStatsTest, PrefixSharingCountsRepeatedChainedBlocks) {
  TraceOptions o;
  o.path = kFixtures + "mooncake_good.jsonl";  // hash_ids [0,1], [0,2,3], [4]
  auto reader = OpenTraceReaderFor(o);
  ASSERT_TRUE(reader.ok());
  auto st = ComputeTraceStats(**reader);
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->hashed_blocks, 6);
  EXPECT_DOUBLE_EQ(st->prefix_sharing_ratio, 1.0 / 6.0);
}

// An answer's hashes are not prompt blocks, but a later prompt that
// repeats the answer counts as sharing.
TEST(TraceStatsTest, HashedAnswersAreRememberedNotCounted) {
  RequestSpec turn1;  // 32-token prompt + 32-token hashed answer
  turn1.input_tokens = 32;
  turn1.output_tokens = 32;
  turn1.hash_block_tokens = 16;
  turn1.hashed_output_tokens = 32;
  turn1.prefix_hashes = {1, 2, 3, 4};
  RequestSpec turn2 = turn1;  // repeats all 64 tokens, 16 new
  turn2.id = 1;
  turn2.input_tokens = 80;
  turn2.hashed_output_tokens = 0;
  turn2.prefix_hashes = {1, 2, 3, 4, 5};
  VectorSource src({turn1, turn2});
  auto st = ComputeTraceStats(src);
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->hashed_blocks, 2 + 5);
  EXPECT_DOUBLE_EQ(st->prefix_sharing_ratio, 4.0 / 7.0);
}

TEST(TraceStatsTest, SkippedRowsAreReportedByReason) {
  TraceOptions o;
  o.path = kFixtures + "azure_time_backwards.csv";
  o.skip_bad_rows = true;
  auto reader = OpenTraceReaderFor(o);
  ASSERT_TRUE(reader.ok());
  auto st = ComputeTraceStats(**reader);
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->requests, 2);
  EXPECT_THAT(FormatTraceStatsText(*st), HasSubstr("skipped rows: time_backwards=1"));
  EXPECT_THAT(FormatTraceStatsJson(*st), HasSubstr("\"time_backwards\": 1"));
}

}  // namespace
}  // namespace servesim
