// The result JSON `simulate --save-result` writes against the files
// `vllm bench serve --save-result` writes: every top-level key of every real
// file in data/bench/ is in simulate's (or named below as an exception), and
// the keys vLLM added lately carry computed values.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/cli_run.h"
#include "traces/file_util.h"
#include "traces/json.h"

namespace servesim {
namespace {

using servesim::cli_test::CliRun;
using servesim::cli_test::ReadText;
using servesim::cli_test::Scratch;
using servesim::cli_test::Servesim;
using ::testing::HasSubstr;

// Keys of real files that current `vllm bench serve` no longer writes, so
// simulate does not either: `best_of` and `use_beam_search` were written by
// benchmarks/benchmark_serving.py of vLLM 0.6.x (the dstack files) and
// dropped with the sampling options they recorded.
const std::set<std::string> kRetiredKeys = {"best_of", "use_beam_search"};

JsonValue ParseFile(const std::string& path) {
  absl::StatusOr<std::string> text = ReadWholeFile(path, 64 << 20);
  EXPECT_TRUE(text.ok()) << text.status();
  if (!text.ok()) return {};
  absl::StatusOr<JsonValue> v = ParseJson(*text, path);
  EXPECT_TRUE(v.ok()) << v.status();
  return v.ok() ? *std::move(v) : JsonValue{};
}

std::set<std::string> TopLevelKeys(const JsonValue& v) {
  std::set<std::string> keys;
  for (const JsonMember& m : v.members) keys.insert(m.key);
  return keys;
}

// simulate's result JSON (summary keys only, or with --save-detailed).
JsonValue SimulateResult(bool detailed, const std::string& extra = "") {
  const std::string path = Scratch(detailed ? "detailed.json" : "summary.json");
  std::filesystem::remove(path);
  std::filesystem::remove(path + ".config.textproto");  // kept unless --overwrite
  CliRun r = Servesim(
      "simulate --device mi300x --model gemma-4-e2b --num-prompts 32 "
      "--random-input-len 128 --random-output-len 64 --max-concurrency 2 "
      "--date 20260101-000000 --no-progress --save-result " +
      path + (detailed ? " --save-detailed" : "") + extra);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return ParseFile(path);
}

std::vector<std::string> RealBenchFiles() {
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::recursive_directory_iterator(
           std::string(SERVESIM_DATA_DIR) + "/bench")) {
    const std::string p = e.path().string();
    if (e.is_regular_file() && (p.ends_with(".json") || p.ends_with(".json.gz"))) {
      files.push_back(p);
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

TEST(ResultJsonTest, EveryKeyOfEveryRealBenchFileIsInSimulatesResult) {
  const std::set<std::string> summary = TopLevelKeys(SimulateResult(false));
  const std::set<std::string> detailed = TopLevelKeys(SimulateResult(true));
  const std::vector<std::string> files = RealBenchFiles();
  ASSERT_GE(files.size(), 5u);
  for (const std::string& file : files) {
    const JsonValue real = ParseFile(file);
    // A file with per-request arrays was saved with --save-detailed.
    const bool is_detailed = real.Find("ttfts") != nullptr;
    const std::set<std::string>& ours = is_detailed ? detailed : summary;
    for (const std::string& key : TopLevelKeys(real)) {
      if (kRetiredKeys.contains(key)) continue;
      EXPECT_TRUE(ours.contains(key))
          << file << ": key \"" << key << "\" is missing from simulate's result"
          << (is_detailed ? " (--save-detailed)" : "");
    }
  }
  // The servesim object holds what vLLM has no key for.
  EXPECT_TRUE(summary.contains("servesim"));
}

TEST(ResultJsonTest, NewVllmKeysAreComputedAndGoodputIsNullWithoutSlos) {
  const JsonValue v = SimulateResult(true);
  ASSERT_NE(v.Find("endpoint_type"), nullptr);
  EXPECT_EQ(v.Find("endpoint_type")->str, "vllm");
  EXPECT_EQ(v.Find("label")->type, JsonValue::Type::kNull);
  EXPECT_EQ(v.Find("request_goodput")->type, JsonValue::Type::kNull);
  EXPECT_EQ(v.Find("model_id")->str, "google/gemma-4-E2B-it");
  EXPECT_EQ(v.Find("tokenizer_id")->str, "google/gemma-4-E2B-it");
  // 32 requests of 64 tokens, two at a time, over a few simulated seconds:
  // the fullest 1-second bucket holds at least the mean share of the
  // tokens and fewer than all of them; at least the 2 concurrent requests
  // share a bucket.
  const double peak = v.Find("max_output_tokens_per_s")->number;
  const double tokens = v.Find("total_output_tokens")->number;
  const double duration = v.Find("duration")->number;
  ASSERT_GT(duration, 2) << "the test wants several buckets";
  EXPECT_GE(peak, tokens / (std::floor(duration) + 1));
  EXPECT_LT(peak, tokens);
  EXPECT_GE(v.Find("max_concurrent_requests")->number, 2);
  EXPECT_LE(v.Find("max_concurrent_requests")->number, 32);
  EXPECT_EQ(v.Find("rtfx")->number, 0);
  const JsonValue* texts = v.Find("generated_texts");
  ASSERT_NE(texts, nullptr);
  ASSERT_EQ(texts->items.size(), 32u);
  for (const JsonValue& t : texts->items) EXPECT_EQ(t.str, "");
}

// A prediction from a shipped profile carries what `servesim validate`
// misses with that profile (the shipped fit config's known gaps); one from
// datasheet priors (an uncalibrated catalog device) carries none.
TEST(ResultJsonTest, ProvenanceNamesTheShippedProfilesKnownGaps) {
  auto gap_lines = [](const JsonValue& v) {
    std::vector<std::string> out;
    const JsonValue* extra = v.Find("servesim");
    if (extra == nullptr || extra->Find("provenance") == nullptr) return out;
    for (const JsonValue& line : extra->Find("provenance")->items) {
      if (line.str.rfind("known gap of the shipped ", 0) == 0) out.push_back(line.str);
    }
    return out;
  };
  const std::vector<std::string> shipped = gap_lines(SimulateResult(false));
  ASSERT_FALSE(shipped.empty());
  for (const std::string& line : shipped) {
    EXPECT_THAT(line, HasSubstr("known gap of the shipped mi300x profile (fit config "
                                "known_gaps["));
    EXPECT_THAT(line, HasSubstr("Would settle it: "));
  }
  const std::string path = Scratch("h100.json");
  std::filesystem::remove(path);
  std::filesystem::remove(path + ".config.textproto");
  CliRun r = Servesim(
      "simulate --device h100-sxm --model gemma-4-e2b --num-prompts 8 "
      "--random-input-len 128 --random-output-len 16 --max-concurrency 2 "
      "--date 20260101-000000 --no-progress --save-result " +
      path);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(gap_lines(ParseFile(path)).empty());
}

TEST(ResultJsonTest, GoodputCountsRequestsMeetingEverySlo) {
  const JsonValue all = SimulateResult(false, " --goodput ttft:600000 e2el:600000");
  const JsonValue none = SimulateResult(false, " --goodput tpot:0");
  ASSERT_NE(all.Find("request_goodput"), nullptr);
  EXPECT_EQ(all.Find("request_goodput")->type, JsonValue::Type::kNumber);
  EXPECT_DOUBLE_EQ(all.Find("request_goodput")->number,
                   all.Find("request_throughput")->number);
  EXPECT_EQ(none.Find("request_goodput")->number, 0);

  CliRun bad = Servesim("simulate --device l4 --model gemma-4-e2b --goodput ttft=5");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_THAT(bad.err, HasSubstr("servesim simulate: error: --goodput: 'ttft=5'"));
  CliRun key = Servesim("simulate --device l4 --model gemma-4-e2b --goodput itl:5");
  EXPECT_EQ(key.exit_code, 2);
  EXPECT_THAT(key.err, HasSubstr("not one of ttft, tpot, e2el"));
}

TEST(ResultJsonTest, LabelIsWrittenAndPrefixesTheDefaultFileName) {
  const std::string dir = Scratch("labelled");
  std::filesystem::remove_all(dir);
  CliRun r = Servesim(
      "simulate --device l4 --model gemma-4-e2b --num-prompts 2 --random-input-len 32 "
      "--random-output-len 4 --date 20260101-000000 --no-progress --label mine "
      "--save-result --result-dir " +
      dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string path = dir + "/mine-infqps-gemma-4-E2B-it-l4-20260101-000000.json";
  ASSERT_TRUE(std::filesystem::exists(path)) << ReadText(path);
  EXPECT_EQ(ParseFile(path).Find("label")->str, "mine");
}

}  // namespace
}  // namespace servesim
