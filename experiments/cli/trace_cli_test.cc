// Runs the built `servesim trace` command with bad flags: each is refused
// with exit code 2 and a message naming the flag and its allowed range,
// and nothing is written. Good flags convert and generate as asked.
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/cli_run.h"

namespace servesim {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

using servesim::cli_test::CliRun;
using servesim::cli_test::ReadText;
using servesim::cli_test::Scratch;
using servesim::cli_test::Servesim;

// A small Azure-format trace (5 requests, 1 s apart).
std::string SmallTrace() {
  std::string path = Scratch("in.csv");
  std::ofstream f(path);
  f << "TIMESTAMP,ContextTokens,GeneratedTokens\n";
  for (int i = 0; i < 5; ++i) {
    f << "2023-11-16 18:15:0" << i << ".0000000," << 100 + i << "," << 10 + i << "\n";
  }
  return path;
}

void ExpectRefused(const std::string& args, const std::string& flag,
                   const std::string& range) {
  SCOPED_TRACE(args);
  const std::string out = Scratch("out.csv");
  std::filesystem::remove(out);
  const CliRun r = Servesim(args + " '" + out + "'");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_THAT(r.err, HasSubstr(flag));
  EXPECT_THAT(r.err, HasSubstr(range));
  EXPECT_FALSE(std::filesystem::exists(out)) << "a refused command wrote its output";
}

TEST(TraceCliTest, ConvertRefusesOutOfRangeTransformFlags) {
  const std::string convert = "trace convert '" + SmallTrace() + "'";
  ExpectRefused(convert + " --sample 0", "--sample", "(0, 1]");
  ExpectRefused(convert + " --sample 1.5", "--sample", "(0, 1]");
  ExpectRefused(convert + " --rate-scale -2", "--rate-scale", "[1e-9, 1e9]");
  // A denormal scale made 1 / scale infinite ("arrive at nan s").
  ExpectRefused(convert + " --rate-scale 1e-320", "--rate-scale", "[1e-9, 1e9]");
  ExpectRefused(convert + " --target-rate -1", "--target-rate", "[1e-9, 1e9] (0: off)");
  ExpectRefused(convert + " --window-start-s -1", "--window-start-s", "[0, 9e9]");
  ExpectRefused(convert + " --window-start-s 5 --window-end-s 2", "--window-end-s",
                "end >= start");
  ExpectRefused(convert + " --loop-to -1", "--loop-to", "[0, 2147483647]");
  // Unbounded, a file without timestamps looped 9.2e18 times.
  ExpectRefused(convert + " --loop-to 2147483648", "--loop-to", "[0, 2147483647]");
  ExpectRefused(convert + " --max-requests -1", "--max-requests", "[0, 2^63)");
  ExpectRefused(convert + " --min-input 50 --max-input 10", "--min-input",
                "above --max-input");
  ExpectRefused(convert + " --min-output -1", "--min-output", "[0, 2147483647]");
  ExpectRefused(convert + " --seed -3", "--seed", "");
  ExpectRefused(convert + " --arrival poisson --request-rate 2 --burstiness 0.5",
                "--burstiness", "does not apply to --arrival poisson");
  // An arrival process needs its rate (the message named a field of the
  // library), and a file with timestamps takes none (it was ignored).
  ExpectRefused(convert + " --arrival poisson", "--arrival poisson needs --request-rate",
                "(0, 1e9]");
  ExpectRefused(convert + " --arrival spikes --request-rate 2", "--arrival spikes",
                "servesim trace generate");
  ExpectRefused(convert + " --arrival poisson --request-rate 100", "--arrival",
                "this file has its own arrival times");
}

// A .json output was written as JSONL and read back as a vllm bench
// result (and refused).
TEST(TraceCliTest, AJsonOutputNameIsRefused) {
  const CliRun r = Servesim("trace generate '" + Scratch("x.json") + "' --num-prompts 3");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err,
              HasSubstr("a .json name is read back as a `vllm bench serve` result; "
                        "end the name in .jsonl"));
}

// --model filters BurstGPT's Model column; on another format it was
// silently ignored (every request kept).
TEST(TraceCliTest, ModelFilterOnAFormatWithoutModelsIsRefused) {
  const std::string path = Scratch("no-models.jsonl");
  ASSERT_EQ(Servesim("trace generate '" + path + "' --num-prompts 3").exit_code, 0);
  const CliRun r = Servesim("trace stats '" + path + "' --model foo");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--model (a filter on BurstGPT's Model column) is for "
                               "BurstGPT files"));
}

TEST(TraceCliTest, GenerateRefusesOutOfRangeFlags) {
  ExpectRefused("trace generate --num-prompts 0", "--num-prompts", "[1, 2147483647]");
  ExpectRefused("trace generate --burstiness 0", "--burstiness", "[0.001, 1000]");
  ExpectRefused("trace generate --request-rate -1", "--request-rate", "(0, 1e9]");
  ExpectRefused("trace generate --min-turns 0", "--min-turns", "[1, 10000]");
  ExpectRefused("trace generate --min-turns 3 --max-turns 2", "--max-turns",
                "--min-turns <= --max-turns");
  ExpectRefused("trace generate --max-input-tokens 10 --random-input-len 100",
                "--max-input-tokens", "shortest first prompt");
  ExpectRefused("trace generate --arrival nonsense", "--arrival", "poisson");
  ExpectRefused("trace generate --arrival constant --burstiness 0.5", "--burstiness",
                "does not apply to --arrival constant");
  ExpectRefused("trace generate --request-rate 0", "--request-rate", "(0, 1e9]");
  // Named by the flag, not by the synthetic source's fields.
  ExpectRefused("trace generate --random-input-len 10000001", "--random-input-len",
                "10000001 is out of range [1, 10000000]");
  ExpectRefused("trace generate --random-output-len 0", "--random-output-len",
                "[1, 10000000]");
  ExpectRefused("trace generate --random-range-ratio 1", "--random-range-ratio",
                "[0, 1)");
  ExpectRefused("trace generate --shared-prefix -1", "--random-prefix-len",
                "[0, 10000000]");
  ExpectRefused("trace generate --random-prefix-len -1", "--random-prefix-len",
                "[0, 10000000]");
  ExpectRefused("trace generate --think-time-s -2", "--think-time-s", "[0, 1e7]");
  ExpectRefused("trace generate --arrival schedule --schedule 10:-5",
                "--schedule: phase 1 \"10:-5\"", "RATE_PER_S in [0, 1e9]");
}

TEST(TraceCliTest, GoodFlagsConvertAndGenerateExactlyWhatWasAsked) {
  const std::string out = Scratch("looped.csv");
  CliRun r =
      Servesim("trace convert '" + SmallTrace() + "' --loop-to 12 --json '" + out + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("\"requests_written\": 12"));
  // The provenance describes the whole trace once, not the partial last pass.
  EXPECT_THAT(r.out, HasSubstr("rows 5, requests 5"));
  // Header + 12 rows.
  const std::string text = ReadText(out);
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 13);

  const std::string gen = Scratch("gen.jsonl");
  r = Servesim("trace generate --num-prompts 7 --request-rate 2 --seed 1 --json '" + gen +
               "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("\"requests_written\": 7"));
  EXPECT_THAT(r.out, HasSubstr("arrivals poisson"));

  // --arrival all takes no rate: none is needed, and one given would be
  // ignored, so it is an error (as are the other flags of another arrival
  // process or length source).
  r = Servesim("trace generate --num-prompts 3 --arrival all --overwrite '" + gen + "'");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  for (const auto& [flags, message] : std::vector<std::pair<std::string, std::string>>{
           {"--arrival all --request-rate 0",
            "--request-rate does not apply to --arrival all"},
           {"--schedule 10:5", "--schedule applies to --arrival schedule, not poisson"},
           {"--arrival gamma --spike-multiplier 3",
            "--spike-multiplier applies to --arrival spikes, not gamma"},
           {"--lengths-from '" + gen + "' --random-output-len 5",
            "--random-output-len does not apply with --lengths-from"}}) {
    r = Servesim("trace generate --num-prompts 3 " + flags + " --overwrite '" +
                 Scratch("ignored.csv") + "'");
    EXPECT_EQ(r.exit_code, 2) << flags;
    EXPECT_THAT(r.err, HasSubstr(message)) << flags;
  }

  // A burstiness other than 1 without --arrival gives Gamma gaps, as in
  // vllm bench serve.
  r = Servesim("trace generate --num-prompts 7 --burstiness 0.5 --json --overwrite '" +
               gen + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("arrivals gamma"));
}

// `--request-rate` defaults to inf, which with --trace means "replay the
// trace's own times": saying so explicitly must do the same, not fail.
// simulate --trace on a `vllm bench serve` file: a request that streamed no
// token (no error, output 0) was prefilled, so it is replayed as one-token
// load, as calibrate replays it, and left out of every metric; the JSON
// counts it in servesim.unmeasured_requests. (It used to be skipped: the
// measured requests then waited behind nothing.)
TEST(SimulateTraceCliTest, BenchRequestsThatStreamedNoTokenAreLoadInNoMetric) {
  auto bench = [](const std::string& name, bool with_empty) {
    // Pairs sent together: an empty answer (when kept) first, then a
    // measured request of the same 2,048-token prompt.
    std::string in, out, start, ttft;
    int n = 0;
    for (int k = 0; k < 4; ++k) {
      for (int e = with_empty ? 0 : 1; e < 2; ++e) {
        const std::string sep = n++ ? ", " : "";
        in += sep + "2048";
        out += sep + (e == 0 ? "0" : "16");
        start += sep + std::to_string(k);
        ttft += sep + (e == 0 ? "0.0" : "0.1");
      }
    }
    const std::string path = Scratch(name);
    std::ofstream(path) << "{\"backend\": \"vllm\", \"num_prompts\": " << n
                        << ", \"completed\": " << n << ", \"duration\": 4.0"
                        << ", \"input_lens\": [" << in << "], \"output_lens\": [" << out
                        << "], \"start_times\": [" << start << "], \"ttfts\": [" << ttft
                        << "]}\n";
    return path;
  };
  const std::string base =
      "simulate --device t4 --model gemma-4-e2b --max-model-len 4096 "
      "--date 20261201-093500 --json --trace ";
  const CliRun with = Servesim(base + "'" + bench("with.json", true) + "'");
  const CliRun without = Servesim(base + "'" + bench("without.json", false) + "'");
  ASSERT_EQ(with.exit_code, 0) << with.err;
  ASSERT_EQ(without.exit_code, 0) << without.err;
  auto number = [](const std::string& json, const std::string& key) {
    const size_t at = json.find("\"" + key + "\": ");
    return at == std::string::npos ? -1.0 : std::atof(json.c_str() + at + key.size() + 4);
  };
  EXPECT_EQ(number(with.out, "num_prompts"), 8);
  EXPECT_EQ(number(with.out, "completed"), 4);
  EXPECT_EQ(number(with.out, "unmeasured_requests"), 4);
  EXPECT_EQ(number(with.out, "total_output_tokens"), 64);
  EXPECT_EQ(number(without.out, "completed"), 4);
  EXPECT_EQ(number(without.out, "unmeasured_requests"), -1);  // none: no key
  // The empty answers' prefills delay the measured requests' first tokens.
  EXPECT_GT(number(with.out, "mean_ttft_ms"), number(without.out, "mean_ttft_ms") * 1.2);
  // trace convert cannot write them (a trace has no load-only field): it
  // says so, in the JSON, on stderr and in the file's source line (which
  // said they were replayed, of a file that left 378 of 1,000 out).
  const std::string csv = Scratch("converted.csv");
  const CliRun conv =
      Servesim("trace convert '" + bench("conv.json", true) + "' '" + csv + "' --json");
  ASSERT_EQ(conv.exit_code, 0) << conv.err;
  EXPECT_EQ(number(conv.out, "requests_written"), 4);
  EXPECT_EQ(number(conv.out, "unmeasured_left_out"), 4);
  EXPECT_THAT(conv.err, HasSubstr("warning: left out 4 requests that streamed no token"));
  EXPECT_THAT(conv.out,
              HasSubstr("left out here: the 4 requests that streamed no token"));
}

TEST(SimulateTraceCliTest, RequestRateInfReplaysTheTraceAsTheDefaultDoes) {
  const std::string base =
      "simulate --device l4 --model gemma-4-e2b --max-model-len 4096 "
      "--date 20261201-093500 --json --trace '" +
      SmallTrace() + "'";
  const CliRun plain = Servesim(base);
  const CliRun inf = Servesim(base + " --request-rate inf");
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_EQ(inf.exit_code, 0) << inf.err;
  // The same run; only the recorded config says request_rate: inf.
  auto without_config = [](const std::string& json) {
    std::istringstream in(json);
    std::string line, out;
    while (std::getline(in, line)) {
      if (line.find("\"resolved_config\"") == std::string::npos) out += line + "\n";
    }
    return out;
  };
  EXPECT_EQ(without_config(inf.out), without_config(plain.out));
  EXPECT_THAT(inf.out, HasSubstr("arrivals: replayed from the trace"));
  const CliRun fast = Servesim(base + " --request-rate 4");
  ASSERT_EQ(fast.exit_code, 0) << fast.err;
  EXPECT_NE(fast.out, plain.out);  // a finite rate rescales the 1 req/s trace
}

// --save-result as `vllm bench serve` has it: a switch, placed by
// --result-dir / --result-filename, else vLLM's default file name.
TEST(SimulateCliTest, SaveResultIsASwitchPlacedLikeVllmBenchServe) {
  const std::string dir = Scratch("results");
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string base =
      "simulate --device l4 --model google/gemma-4-E2B-it --num-prompts 4 "
      "--max-concurrency 2 --date 20261201-093500";
  // The flag right before another flag takes no value (it used to write a
  // file named "--save-detailed").
  CliRun r = Servesim(base + " --save-result --save-detailed", dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(std::filesystem::exists(dir + "/--save-detailed"));
  const std::string by_default =
      dir + "/vllm-infqps-concurrency2-gemma-4-E2B-it-l4-20261201-093500.json";
  ASSERT_TRUE(std::filesystem::exists(by_default));
  EXPECT_THAT(ReadText(by_default), HasSubstr("\"input_lens\""));
  EXPECT_TRUE(std::filesystem::exists(by_default + ".config.textproto"));

  r = Servesim(base + " --request-rate 2.5 --save-result --result-dir '" + dir +
               "/sub/deeper' --result-filename r.json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(std::filesystem::exists(dir + "/sub/deeper/r.json"));
  r = Servesim(base + " --request-rate 2.5 --save-result", dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(std::filesystem::exists(
      dir + "/vllm-2.5qps-concurrency2-gemma-4-E2B-it-l4-20261201-093500.json"));

  // A path right after the flag still names the file.
  r = Servesim(base + " --save-result '" + dir + "/named.json'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(std::filesystem::exists(dir + "/named.json"));

  r = Servesim(base + " --result-dir '" + dir + "'");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("given without --save-result"));
  // A path after --save-result and --result-dir both place the file: one
  // would be ignored (the directory was created and left empty).
  r = Servesim(base + " --save-result '" + dir + "/p.json' --result-dir '" + dir +
               "/rd'");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("and --result-dir / --result-filename: give one"));
  EXPECT_FALSE(std::filesystem::exists(dir + "/rd"));
  EXPECT_FALSE(std::filesystem::exists(dir + "/p.json"));
}

// The default name has the device and the real date-time (it was fixed at
// 1970 without the device: a run on another device overwrote the first), and
// an existing file is never replaced without --overwrite.
TEST(SimulateCliTest, SaveResultNamesDoNotCollideAndNeverOverwriteSilently) {
  const std::string dir = Scratch("results");
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string base =
      "simulate --model gemma-4-e2b --num-prompts 2 --max-concurrency 2 --save-result";
  ASSERT_EQ(Servesim(base + " --device l4", dir).exit_code, 0);
  ASSERT_EQ(Servesim(base + " --device t4", dir).exit_code, 0);
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().extension() == ".json") names.push_back(e.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  ASSERT_EQ(names.size(), 2u);
  // vLLM's base_model_id: the Hugging Face id's last part.
  EXPECT_THAT(names[0], HasSubstr("-gemma-4-E2B-it-l4-"));
  EXPECT_THAT(names[1], HasSubstr("-gemma-4-E2B-it-t4-"));
  EXPECT_THAT(names[0], Not(HasSubstr("1970")));

  const std::string pinned = base + " --device l4 --date 20261201-093500";
  ASSERT_EQ(Servesim(pinned, dir).exit_code, 0);
  const std::string file =
      dir + "/vllm-infqps-concurrency2-gemma-4-E2B-it-l4-20261201-093500.json";
  const std::string first = ReadText(file);
  EXPECT_THAT(first, HasSubstr("\"date\": \"20261201-093500\""));
  // model_id / tokenizer_id: the Hugging Face id, as vLLM writes them.
  EXPECT_THAT(first, HasSubstr("\"model_id\": \"google/gemma-4-E2B-it\""));
  EXPECT_THAT(first, HasSubstr("\"tokenizer_id\": \"google/gemma-4-E2B-it\""));
  CliRun again = Servesim(pinned + " --random-output-len 7", dir);
  EXPECT_EQ(again.exit_code, 2);
  EXPECT_THAT(again.err, HasSubstr("exists; give --overwrite"));
  EXPECT_EQ(ReadText(file), first);
  ASSERT_EQ(Servesim(pinned + " --random-output-len 7 --overwrite", dir).exit_code, 0);
  EXPECT_NE(ReadText(file), first);
  EXPECT_EQ(Servesim(base + " --device l4 --date 2026-12-01", dir).exit_code, 2);
}

// Whoever names the file (--save-result PATH, --result-dir /
// --result-filename, --requests-csv, --chrome-trace), an existing one is
// refused without --overwrite, before anything runs, and left as it was
// (only default names were refused: a name the user gave was replaced).
TEST(SimulateCliTest, EveryOutputTheUserNamesIsKeptUnlessOverwrite) {
  namespace fs = std::filesystem;
  const std::string dir = Scratch("named-results");
  fs::remove_all(dir);
  fs::create_directories(dir + "/sub");
  const std::string base =
      "simulate --model gemma-4-e2b --num-prompts 2 --max-concurrency 2";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--save-result mine.json", "mine.json"},
      {"--save-result --result-filename named.json", "named.json"},
      {"--save-result --result-dir sub --result-filename in-dir.json", "sub/in-dir.json"},
      {"--requests-csv requests.csv", "requests.csv"},
      {"--chrome-trace trace.json", "trace.json"},
  };
  for (const auto& [flags, file] : cases) {
    SCOPED_TRACE(flags);
    const std::string path = dir + "/" + file;
    ASSERT_EQ(Servesim(base + " --device l4 " + flags, dir).exit_code, 0);
    const std::string first = ReadText(path);
    ASSERT_FALSE(first.empty());
    const CliRun again = Servesim(base + " --device t4 " + flags, dir);
    EXPECT_EQ(again.exit_code, 2);
    EXPECT_THAT(again.err, HasSubstr("servesim simulate: error: "));
    EXPECT_THAT(again.err, HasSubstr(file + " exists; give --overwrite"));
    EXPECT_EQ(ReadText(path), first) << "a refused run replaced " << file;
    ASSERT_EQ(Servesim(base + " --device t4 --overwrite " + flags, dir).exit_code, 0);
    EXPECT_NE(ReadText(path), first);
  }
  // A device is no file to keep.
  EXPECT_EQ(Servesim(base + " --device l4 --requests-csv /dev/null", dir).exit_code, 0);
}

// Two outputs naming one file by different spellings (x.json, ./x.json)
// kept only the last written; an output over the trace the run replays
// replaced the trace, --overwrite or not. Both refused before the run.
TEST(SimulateCliTest, OutputsAreComparedAsFilesAndNeverOverAnInput) {
  namespace fs = std::filesystem;
  const std::string dir = Scratch("same-file");
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string base = "simulate --device l4 --model gemma-4-e2b --num-prompts 2 ";
  CliRun r = Servesim(base + "--save-result x.json --requests-csv ./x.json", dir);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--save-result and --requests-csv: both write x.json"));
  EXPECT_FALSE(fs::exists(dir + "/x.json"));
  ASSERT_EQ(
      Servesim("trace generate t.jsonl --num-prompts 3 --request-rate 1", dir).exit_code,
      0);
  const std::string trace = ReadText(dir + "/t.jsonl");
  r = Servesim(
      "simulate --device l4 --model gemma-4-e2b --trace t.jsonl --overwrite "
      "--requests-csv ./t.jsonl",
      dir);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--requests-csv ./t.jsonl: the --trace file of this run"));
  EXPECT_EQ(ReadText(dir + "/t.jsonl"), trace);
  // A folder that is not there, or a folder as the file: before the run.
  r = Servesim(base + "--save-result nodir/x.json", dir);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err,
              HasSubstr("--save-result nodir/x.json: folder nodir does not exist"));
  fs::create_directories(dir + "/d1");
  r = Servesim(base + "--requests-csv d1 --overwrite", dir);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--requests-csv d1: is a folder; give a file path"));
  // --date names a date-time (month 99 went into the JSON and file name).
  // A day the month does not have (30 February; 29 February of 2025).
  for (const char* date : {"99999999-999999", "20261301-000000", "2026120x-000000",
                           "20260230-000000", "20250229-000000", "20261131-000000"}) {
    r = Servesim(base + "--date " + date, dir);
    EXPECT_EQ(r.exit_code, 2) << date;
    EXPECT_THAT(r.err, HasSubstr("is not a date-time YYYYMMDD-HHMMSS")) << date;
  }
  EXPECT_EQ(Servesim(base + "--date 20261207-235959", dir).exit_code, 0);
  EXPECT_EQ(Servesim(base + "--date 20240229-000000 --overwrite", dir).exit_code, 0);
  // A label with '/' would put the default result file in another folder.
  r = Servesim(base + "--label ../x --save-result", dir);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--label ../x: contains '/'"));
  // A goodput metric given twice: which one counts?
  r = Servesim(base + "--goodput ttft:5 ttft:6", dir);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("ttft is given twice (5 and 6 ms)"));
}

// A router with one engine was ignored; a fleet of two models routed one
// workload between them as if they were interchangeable (and reported the
// first model only). Both are errors.
TEST(SimulateCliTest, ARouterNeedsEnginesAndAFleetServesOneModel) {
  CliRun r = Servesim(
      "simulate --device l4 --model gemma-4-e2b --router kv-aware --num-prompts 2");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--router kv-aware: the run has one engine"));
  const std::string cfg = Scratch("mixed-models.textproto");
  std::ofstream(cfg) << R"pb(
    fleet {
      replicas {
        server { device: "l4" model: "gemma-4-e2b" }
        count: 2
      }
      replicas {
        server { device: "l4" model: "gemma-4-e4b" }
        count: 1
      }
    }
    client { num_prompts: 4 }
  )pb";
  r = Servesim("simulate --config '" + cfg + "'");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("fleet.replicas: gemma-4-e2b and gemma-4-e4b: a fleet "
                               "serves one model"));
}

// calibrate --out and sweep merge --out: an existing profile, or a folder
// holding results, is kept unless --overwrite (refused before any fit).
TEST(OutputCliTest, CalibrateAndSweepMergeKeepExistingResultsUnlessOverwrite) {
  namespace fs = std::filesystem;
  const std::string profile = Scratch("mine.textproto");
  std::ofstream(profile) << "mine\n";
  const CliRun cal = Servesim(
      "calibrate --device mi300x --bench "
      "data/bench/mi300x-gemma4-e2b-2026-09-17/c1-in128-out128.json --out '" +
      profile + "'");
  EXPECT_EQ(cal.exit_code, 2);
  EXPECT_THAT(cal.err, HasSubstr("servesim calibrate: error: --out: " + profile +
                                 " exists; give --overwrite"));
  EXPECT_THAT(cal.out, Not(HasSubstr("fit:")));
  EXPECT_EQ(ReadText(profile), "mine\n");

  const std::string merged = Scratch("merged");
  fs::remove_all(merged);
  fs::create_directories(merged);
  std::ofstream(merged + "/results.csv") << "mine\n";
  const CliRun merge =
      Servesim("sweep merge '" + Scratch("shard-0") + "' --out '" + merged + "'");
  EXPECT_EQ(merge.exit_code, 2);
  EXPECT_THAT(merge.err, HasSubstr("servesim sweep merge: error: --out: " + merged +
                                   "/results.csv exists; give --overwrite"));
  EXPECT_EQ(ReadText(merged + "/results.csv"), "mine\n");
  // With --overwrite the merge goes on (and fails here on its empty shard).
  const CliRun forced = Servesim("sweep merge '" + Scratch("shard-0") + "' --out '" +
                                 merged + "' --overwrite");
  EXPECT_EQ(forced.exit_code, 2);
  EXPECT_THAT(forced.err, Not(HasSubstr("exists; give --overwrite")));
}

// trace convert / generate: an existing OUTPUT is kept unless --overwrite.
TEST(TraceCliTest, ExistingOutputIsKeptUnlessOverwrite) {
  const std::string out = Scratch("kept.csv");
  std::filesystem::remove(out);
  for (const std::string& cmd : {"trace convert '" + SmallTrace() + "'",
                                 std::string("trace generate --num-prompts 3")}) {
    SCOPED_TRACE(cmd);
    {
      std::ofstream f(out);
      f << "mine\n";
    }
    const CliRun r = Servesim(cmd + " '" + out + "'");
    EXPECT_EQ(r.exit_code, 2);
    // "servesim trace convert: error: ..." (the full subcommand path).
    const std::string sub = cmd.substr(0, cmd.find(' ', cmd.find(' ') + 1));
    EXPECT_THAT(r.err, HasSubstr("servesim " + sub + ": error: output: " + out +
                                 " exists; give --overwrite"));
    EXPECT_EQ(ReadText(out), "mine\n");
    ASSERT_EQ(Servesim(cmd + " --overwrite '" + out + "'").exit_code, 0);
    EXPECT_NE(ReadText(out), "mine\n");
  }
  // convert staged its output under a fixed name beside it, overwriting
  // (then removing) a file of that name, without --overwrite.
  const std::string staged = out + ".servesim-convert";
  std::ofstream(staged) << "precious\n";
  std::filesystem::remove(out);
  ASSERT_EQ(Servesim("trace convert '" + SmallTrace() + "' '" + out + "'").exit_code, 0);
  EXPECT_EQ(ReadText(staged), "precious\n");
  std::filesystem::remove(staged);
}

// The fleet's cost per 1M output tokens at its devices' published prices.
TEST(SimulateCliTest, ReportsCostPerMillionOutputTokensPerPriceTier) {
  CliRun r = Servesim(
      "simulate --device mi300x --model gemma-4-e2b --num-prompts 16 --max-concurrency 8 "
      "--json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto number = [&](const std::string& key, size_t from = 0) {
    const size_t at = r.out.find("\"" + key + "\": ", from);
    EXPECT_NE(at, std::string::npos) << key;
    return at == std::string::npos ? std::nan("")
                                   : std::atof(r.out.c_str() + at + key.size() + 4);
  };
  const double tok_s = number("output_throughput");
  const size_t cost = r.out.find("\"cost\"");
  ASSERT_NE(cost, std::string::npos);
  EXPECT_THAT(r.out.substr(cost, 200), HasSubstr("\"tier\": \"on-demand\""));
  const double usd_h = number("usd_per_hour", cost);
  EXPECT_NEAR(usd_h, 1.99, 1e-12);  // hwmodels/devices/mi300x.textproto
  EXPECT_NEAR(number("usd_per_m_output_tokens", cost), usd_h / (tok_s * 3600) * 1e6,
              1e-9);
  EXPECT_NEAR(number("output_tok_s_per_usd_hour", cost), tok_s / usd_h, 1e-6);
  // The MI300X has no spot offer: no spot row (not the on-demand price again).
  EXPECT_THAT(r.out, Not(HasSubstr("\"tier\": \"spot\"")));
  // Said, not left out silently: an L4 TP 2 replica has no 2-GPU offer.
  const CliRun tp2 = Servesim(
      "simulate --device l4 --model gemma-4-e2b --max-model-len 4096 "
      "--tensor-parallel-size 2 --num-prompts 4 --random-input-len 64 "
      "--random-output-len 8");
  ASSERT_EQ(tp2.exit_code, 0) << tp2.err;
  EXPECT_THAT(tp2.out,
              HasSubstr("cost (on-demand): not reported: no on-demand offer of 2 x "
                        "l4 is listed in its device file (listed: 1, 4, 8 chips"));
}

}  // namespace
}  // namespace servesim
