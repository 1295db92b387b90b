#include "traces/bench_result.h"

#include <cmath>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace servesim {
namespace {

using ::testing::HasSubstr;

const std::string kBench = std::string(SERVESIM_DATA_DIR) + "/bench/";

std::string WriteTemp(const std::string& name, const std::string& text) {
  std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

TEST(BenchResultTest, ReadsSummaryOnlyMi300xFileWithNullGoodput) {
  auto r = ReadBenchResult(kBench + "mi300x-gemma4-e2b-2026-09-17/c1-in128-out128.json");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->metrics.at("completed"), 8);
  EXPECT_EQ(r->metrics.at("total_input_tokens"), 1024);
  EXPECT_DOUBLE_EQ(r->metrics.at("mean_ttft_ms"), 13.23052162501881);
  EXPECT_DOUBLE_EQ(r->metrics.at("max_concurrency"), 1);
  EXPECT_EQ(r->strings.at("request_rate"), "inf");
  EXPECT_EQ(r->strings.at("model_id"), "google/gemma-4-E2B-it");
  EXPECT_EQ(r->metrics.count("request_goodput"), 0u);  // null
  EXPECT_EQ(r->strings.count("label"), 0u);            // null
  EXPECT_FALSE(r->input_lens.has_value());
  EXPECT_FALSE(r->itls.has_value());
  EXPECT_EQ(r->keys_used.front(), "date");
  EXPECT_EQ(r->keys_used.size(), 37u);  // python3 json: 37 keys
}

TEST(BenchResultTest, ReadsEveryMi300xCell) {
  for (const char* cell : {"c1-in128-out128", "c1-in1024-out128", "c1-in8192-out128"}) {
    auto r = ReadBenchResult(kBench + "mi300x-gemma4-e2b-2026-09-17/" + cell + ".json");
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_GT(r->MetricOr("output_throughput", 0), 0) << cell;
    EXPECT_GT(r->MetricOr("mean_tpot_ms", 0), 0) << cell;
  }
}

TEST(BenchResultTest, ReadsGzippedFileWithThousandRequestArrays) {
  for (const char* f : {"h100x8-16qps.json.gz", "mi300x8-16qps.json.gz"}) {
    auto r = ReadBenchResult(kBench + "dstack-llama405b/" + f);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->metrics.at("completed"), 1000) << f;
    EXPECT_EQ(r->metrics.at("request_rate"), 16.0) << f;
    ASSERT_TRUE(r->input_lens && r->output_lens && r->ttfts && r->itls && r->errors) << f;
    EXPECT_EQ(r->input_lens->size(), 1000u);
    EXPECT_EQ(r->itls->size(), 1000u);
    double in_sum = 0, out_sum = 0;
    for (double x : *r->input_lens) in_sum += x;
    for (double x : *r->output_lens) out_sum += x;
    // The per-request arrays add up to the summary totals.
    EXPECT_EQ(in_sum, r->metrics.at("total_input_tokens")) << f;
    EXPECT_EQ(out_sum, r->metrics.at("total_output_tokens")) << f;
    EXPECT_FALSE(r->start_times.has_value());
  }
  auto h100 = ReadBenchResult(kBench + "dstack-llama405b/h100x8-16qps.json.gz");
  ASSERT_TRUE(h100.ok());
  EXPECT_EQ(h100->input_lens->at(0), 13);
  EXPECT_EQ(h100->strings.at("backend"), "vllm");
}

TEST(BenchResultTest, ToleratesTrailingColonKeyAndBooleans) {
  const std::string path = WriteTemp(
      "colon.json",
      R"({"completed": 3, "duration": 1.5, "request_goodput:": 2.0, "use_beam_search": false,
          "start_times": [0.0, 0.5, 1.0], "input_lens": [1, 2, 3]})");
  auto r = ReadBenchResult(path);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->metrics.at("request_goodput"), 2.0);
  EXPECT_EQ(r->strings.at("use_beam_search"), "false");
  ASSERT_TRUE(r->start_times.has_value());
  EXPECT_EQ(r->start_times->at(2), 1.0);
  EXPECT_EQ(r->keys_used[2], "request_goodput:");
}

TEST(BenchResultTest, MissingCoreKeyIsAnErrorNamingTheKey) {
  auto r = ReadBenchResult(WriteTemp("nocore.json", R"({"duration": 1.0})"));
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("\"completed\""));
}

TEST(BenchResultTest, ArraysOfDifferentLengthsAreAnError) {
  auto r = ReadBenchResult(WriteTemp(
      "len.json",
      R"({"completed": 2, "duration": 1, "input_lens": [1, 2], "output_lens": [1]})"));
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("output_lens"));
}

TEST(BenchResultTest, NonNumberInArrayNamesKeyAndIndex) {
  auto r = ReadBenchResult(WriteTemp(
      "idx.json", R"({"completed": 2, "duration": 1, "input_lens": [1, "x"]})"));
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("input_lens[1]"));
}

TEST(BenchResultTest, TruncatedJsonNamesFileLineAndColumn) {
  const std::string path = WriteTemp("cut.json", "{\"completed\": 2,\n \"duration\": 1.");
  auto r = ReadBenchResult(path);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("cut.json:2:"));
}

// The reader only checks types; ranges are the importer's to judge
// (calibration/bench_import.cc), so values come back exactly as written.
TEST(BenchResultTest, KeepsNonFiniteNegativeAndStringValuesAsWritten) {
  auto r = ReadBenchResult(WriteTemp(
      "raw.json",
      R"({"completed": 8, "duration": 3, "output_throughput": NaN, "median_ttft_ms": -5,
          "mean_tpot_ms": Infinity, "request_rate": "fast", "max_concurrency": null})"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(std::isnan(r->metrics.at("output_throughput")));
  EXPECT_EQ(r->metrics.at("median_ttft_ms"), -5);
  EXPECT_TRUE(std::isinf(r->metrics.at("mean_tpot_ms")));
  EXPECT_EQ(r->strings.at("request_rate"), "fast");
  EXPECT_EQ(r->metrics.count("max_concurrency") + r->strings.count("max_concurrency"),
            0u);
}

TEST(BenchResultTest, EmptyAndMissingFilesAreErrors) {
  EXPECT_FALSE(ReadBenchResult(WriteTemp("empty.json", "")).ok());
  EXPECT_FALSE(ReadBenchResult("/nonexistent/x.json").ok());
}

}  // namespace
}  // namespace servesim
