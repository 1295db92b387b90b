#include "calibration/bench_import.h"

#include <cmath>
#include <fstream>
#include <sstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace servesim {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

const std::string kCell = std::string(SERVESIM_DATA_DIR) +
                          "/bench/mi300x-gemma4-e2b-2026-09-17/c1-in128-out128.json";

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

// A copy of the shipped c1-in128-out128 cell with one line replaced
// (`from` must occur exactly once in the file).
std::string CellWith(const std::string& name, const std::string& from,
                     const std::string& to) {
  std::string text = ReadText(kCell);
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  EXPECT_EQ(text.find(from, at + 1), std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  std::string path = ::testing::TempDir() + "/" + name + ".json";
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

// The error names the file, the key and the allowed range.
void ExpectRefused(const std::string& path, const std::string& key,
                   const std::string& allowed) {
  auto c = ImportBenchFile(path);
  ASSERT_FALSE(c.ok()) << path << " was accepted";
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(c.status().message(),
              AllOf(HasSubstr(path), HasSubstr("\"" + key + "\""), HasSubstr(allowed)));
}

TEST(BenchImportTest, ShippedCellIsAcceptedUnchanged) {
  auto c = ImportBenchFile(kCell);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->max_concurrency, 1);
  EXPECT_TRUE(std::isinf(c->request_rate));
  EXPECT_DOUBLE_EQ(c->median_ttft_ms, 12.974285499694815);
  EXPECT_DOUBLE_EQ(c->output_throughput, 340.9548998753317);
}

TEST(BenchImportTest, RejectsNegativeMedianTtft) {
  ExpectRefused(CellWith("neg_ttft", "\"median_ttft_ms\": 12.974285499694815",
                         "\"median_ttft_ms\": -5"),
                "median_ttft_ms", "finite number >= 0");
}

TEST(BenchImportTest, RejectsNanAndInfinityThroughput) {
  for (const char* bad : {"NaN", "Infinity", "-Infinity", "-1"}) {
    ExpectRefused(
        CellWith(std::string("tp_") + bad, "\"output_throughput\": 340.9548998753317",
                 std::string("\"output_throughput\": ") + bad),
        "output_throughput", "finite number >= 0");
  }
}

// vLLM writes the throughputs as totals over the duration: 10x the
// quotient (or 1e308) was fitted as measured; within 1% is accepted.
TEST(BenchImportTest, ThroughputMustBeTheTotalsOverTheDuration) {
  for (const char* bad : {"3409.548998753317", "1e308"}) {
    ExpectRefused(CellWith(std::string("tp10_") + std::string(bad).substr(0, 2),
                           "\"output_throughput\": 340.9548998753317",
                           std::string("\"output_throughput\": ") + bad),
                  "output_throughput", "within 1% of total_output_tokens / duration");
  }
  auto near =
      ImportBenchFile(CellWith("tp_near", "\"output_throughput\": 340.9548998753317",
                               "\"output_throughput\": 341.5"));
  EXPECT_TRUE(near.ok()) << near.status();
}

TEST(BenchImportTest, RejectsNanMedianTpotAndStringMetric) {
  ExpectRefused(CellWith("nan_tpot", "\"median_tpot_ms\": 2.848152645669405",
                         "\"median_tpot_ms\": NaN"),
                "median_tpot_ms", "finite number >= 0");
  ExpectRefused(CellWith("str_ttft", "\"median_ttft_ms\": 12.974285499694815",
                         "\"median_ttft_ms\": \"12.9\""),
                "median_ttft_ms", "finite number >= 0");
}

TEST(BenchImportTest, ZeroMetricMeansNotMeasured) {
  // vLLM writes median_tpot_ms 0 when no request produced a TPOT.
  auto c = ImportBenchFile(CellWith("zero_tpot", "\"median_tpot_ms\": 2.848152645669405",
                                    "\"median_tpot_ms\": 0"));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->median_tpot_ms, 0);
  auto ms = CellMeasurements(*c, "run", 5);
  ASSERT_TRUE(ms.ok()) << ms.status();
  int fitted = 0;
  for (const auto& m : *ms) {
    fitted += m.fit();
    EXPECT_NE(m.metric(), servesim::proto::MEDIAN_TPOT_MS);
  }
  EXPECT_EQ(fitted, 2);  // throughput and TTFT only
}

TEST(BenchImportTest, RequestRateIsInfStringOrPositiveNumber) {
  ExpectRefused(
      CellWith("rate_fast", "\"request_rate\": \"inf\"", "\"request_rate\": \"fast\""),
      "request_rate", "\"inf\", or a number of requests/s > 0");
  for (const char* bad : {"0", "-2", "NaN", "-Infinity", "true"}) {
    ExpectRefused(CellWith(std::string("rate_") + bad, "\"request_rate\": \"inf\"",
                           std::string("\"request_rate\": ") + bad),
                  "request_rate", "\"inf\", or a number of requests/s > 0");
  }
  auto numeric = ImportBenchFile(
      CellWith("rate_num", "\"request_rate\": \"inf\"", "\"request_rate\": 4.5"));
  ASSERT_TRUE(numeric.ok()) << numeric.status();
  EXPECT_EQ(numeric->request_rate, 4.5);
  auto infinity = ImportBenchFile(CellWith("rate_infinity", "\"request_rate\": \"inf\"",
                                           "\"request_rate\": Infinity"));
  ASSERT_TRUE(infinity.ok()) << infinity.status();
  EXPECT_TRUE(std::isinf(infinity->request_rate));
}

TEST(BenchImportTest, MaxConcurrencyIsNullOrPositiveInteger) {
  for (const char* bad : {"0", "-1", "1.5", "NaN", "\"4\"", "3000000000"}) {
    ExpectRefused(CellWith(std::string("conc_") + bad, "\"max_concurrency\": 1",
                           std::string("\"max_concurrency\": ") + bad),
                  "max_concurrency", "null (no limit) or an integer in 1..2147483647");
  }
  auto null_conc = ImportBenchFile(
      CellWith("conc_null", "\"max_concurrency\": 1", "\"max_concurrency\": null"));
  ASSERT_TRUE(null_conc.ok()) << null_conc.status();
  EXPECT_EQ(null_conc->max_concurrency, 0);  // no limit
}

TEST(BenchImportTest, RejectsBadCountsAndDuration) {
  ExpectRefused(
      CellWith("dur_neg", "\"duration\": 3.003329766999741", "\"duration\": -3"),
      "duration", "> 0");
  ExpectRefused(CellWith("completed_frac", "\"completed\": 8", "\"completed\": 7.5"),
                "completed", "1..2147483647");
  ExpectRefused(CellWith("np0", "\"num_prompts\": 8", "\"num_prompts\": 0"),
                "num_prompts", "1..2147483647");
  ExpectRefused(CellWith("completed_gt", "\"completed\": 8", "\"completed\": 100"),
                "num_prompts", ">= completed (100)");
  ExpectRefused(CellWith("in_str", "\"total_input_tokens\": 1024",
                         "\"total_input_tokens\": \"abc\""),
                "total_input_tokens", "integer token count >= 0");
  ExpectRefused(CellWith("out_neg", "\"total_output_tokens\": 1024",
                         "\"total_output_tokens\": -1024"),
                "total_output_tokens", "integer token count >= 0");
}

TEST(BenchImportTest, RejectsBadPerRequestLengthNamingIndex) {
  const std::string path = CellWith(
      "lens_null", "\"completed\": 8,",
      "\"completed\": 8, \"input_lens\": [128, 128, null, 128, 128, 128, 128, 128], "
      "\"output_lens\": [128, 128, 128, 128, 128, 128, 128, 128],");
  ExpectRefused(path, "input_lens[2]", "integer token count");
}

// A metric written as an array or object is named, not read as "not
// measured"; per-request arrays shorter than the completed requests (empty
// ones included) are cut short.
TEST(BenchImportTest, WrongTypedMetricAndShortPerRequestArraysAreRefused) {
  ExpectRefused(CellWith("array_metric", "\"median_ttft_ms\": 12.974285499694815",
                         "\"median_ttft_ms\": [12.97]"),
                "median_ttft_ms", "an array is out of range");
  ExpectRefused(CellWith("object_metric", "\"median_ttft_ms\": 12.974285499694815",
                         "\"median_ttft_ms\": {\"ms\": 12.97}"),
                "median_ttft_ms", "an object is out of range");
  ExpectRefused(CellWith("empty_lens", "\"completed\": 8,",
                         "\"completed\": 8, \"input_lens\": [], \"output_lens\": [],"),
                "input_lens",
                "an array of 0 entries is out of range (allowed: one entry per request "
                "sent, at least completed (8))");
  ExpectRefused(CellWith("short_ttfts", "\"completed\": 8,",
                         "\"completed\": 8, \"ttfts\": [0.01, 0.01],"),
                "ttfts", "an array of 2 entries");
}

// The per-request lengths must sum to the totals the summary was computed
// from: vLLM sums input_lens over the successful requests into
// total_input_tokens (the shipped cell: 8 x 128 = 1,024).
TEST(BenchImportTest, InputLengthsMustSumToTotalInputTokens) {
  const std::string lens = "\"output_lens\": [128, 128, 128, 128, 128, 128, 128, 128],";
  ASSERT_TRUE(
      ImportBenchFile(CellWith("lens_ok", "\"completed\": 8,",
                               "\"completed\": 8, \"input_lens\": [128, 128, 128, "
                               "128, 128, 128, 128, 128], " +
                                   lens))
          .ok());
  ExpectRefused(CellWith("lens_sum", "\"completed\": 8,",
                         "\"completed\": 8, \"input_lens\": [128, 128, 128, 128, 128, "
                         "128, 128, 4096], " +
                             lens),
                "input_lens", "entries summing to total_input_tokens (1024)");
}

}  // namespace
}  // namespace servesim
