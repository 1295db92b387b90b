// plan, memory, sweep and the shared error form, run through the built
// servesim binary.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <utility>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/cli_run.h"

namespace servesim {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

using servesim::cli_test::CliRun;
using servesim::cli_test::ReadText;
using servesim::cli_test::Scratch;
using servesim::cli_test::Servesim;

void WriteText(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

// A copy of the shipped L4 profile with device_step_us raised to 40 ms (a
// user's calibrate run on a slower host, say).
std::string SlowL4Profile() {
  std::string p =
      ReadText(std::string(SERVESIM_SOURCE_DIR) + "/calibration/profiles/l4.textproto");
  const std::regex step(R"(name: "device_step_us"\n  value: [0-9.e+-]+)");
  EXPECT_TRUE(std::regex_search(p, step));
  p = std::regex_replace(p, step, "name: \"device_step_us\"\n  value: 40000");
  std::string path = Scratch("slow_l4.textproto");
  WriteText(path, p);
  return path;
}

const char kPlan[] =
    "plan --devices l4 --model gemma-4-e2b --rate 2 --num-prompts 24 --max-replicas 2 "
    "--no-mixed --slo 'tpot_p99<=30ms'";

// calibrate-then-plan: a user profile is used for its device, and the
// answer follows it.
TEST(PlanCliTest, CalibrationProfilePerDeviceIsUsedAndChangesTheAnswer) {
  const std::string slow = SlowL4Profile();
  CliRun shipped = Servesim(std::string(kPlan) + " --json");
  CliRun by_device = Servesim(std::string(kPlan) + " --json --calibration l4=" + slow);
  CliRun by_field = Servesim(std::string(kPlan) + " --json --calibration " + slow);
  ASSERT_EQ(shipped.exit_code, 0) << shipped.err;
  ASSERT_EQ(by_device.exit_code, 3) << by_device.err;  // 40 ms steps miss a 30 ms TPOT
  EXPECT_NE(shipped.out, by_device.out);
  EXPECT_THAT(by_device.out, HasSubstr(slow));
  // The shipped profile's plan carries its known gaps (what validate
  // misses with it); the user's profile's plan carries none.
  EXPECT_THAT(shipped.out, HasSubstr("\"known gap of the shipped l4 profile (fit config "
                                     "known_gaps["));
  EXPECT_THAT(by_device.out, HasSubstr("\"known_gaps\": []"));
  EXPECT_THAT(by_device.out, Not(HasSubstr("known gap of the shipped")));
  CliRun text = Servesim(kPlan);
  EXPECT_THAT(text.out, HasSubstr("Known gaps of the shipped calibration profiles"));
  EXPECT_EQ(by_field.exit_code, by_device.exit_code) << by_field.err;
  EXPECT_EQ(by_field.out, by_device.out);

  // The same through a config's calibration_profile (it used to fail: plan
  // probed the base config with device l4 whatever the profile said).
  const std::string config = Scratch("base.textproto");
  WriteText(config, "server { calibration_profile: \"" + slow + "\" }\n");
  CliRun by_config = Servesim(std::string(kPlan) + " --json --config " + config);
  EXPECT_EQ(by_config.exit_code, by_device.exit_code) << by_config.err;
  EXPECT_EQ(by_config.out, by_device.out);

  CliRun wrong = Servesim(std::string(kPlan) + " --calibration t4=" + slow);
  EXPECT_EQ(wrong.exit_code, 2);
  EXPECT_THAT(wrong.err, HasSubstr("not one of the devices planned"));
}

TEST(PlanCliTest, EachRowNamesTheCheapestMatchingOffer) {
  const std::string base =
      "plan --devices l4 --model gemma-4-e2b --rate 1 --num-prompts 8 --max-replicas 1 "
      "--no-mixed --slo 'ttft_p99<=60s'";
  // Spot: the L4's only spot offer ($0.9412) is dearer than GCE on-demand.
  CliRun spot = Servesim(base + " --price spot");
  ASSERT_EQ(spot.exit_code, 0) << spot.err;
  EXPECT_THAT(spot.out, HasSubstr("l4: gce g2-standard-4 on-demand $0.7045/h"));
  EXPECT_THAT(spot.out, HasSubstr("on-demand is cheaper than any spot offer for l4"));
  CliRun aws = Servesim(base + " --provider aws-ec2 --region us-east-2");
  ASSERT_EQ(aws.exit_code, 0) << aws.err;
  EXPECT_THAT(aws.out, HasSubstr("l4: aws-ec2 g6.xlarge us-east-2 on-demand $0.8048/h"));
  CliRun own = Servesim(base + " --price-usd-per-hour l4=0.31");
  ASSERT_EQ(own.exit_code, 0) << own.err;
  EXPECT_THAT(own.out, HasSubstr("user --price-usd-per-hour user $0.31/h"));
  CliRun none = Servesim(base + " --region mars-1");
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_THAT(none.err, HasSubstr("in region mars-1"));
  EXPECT_EQ(Servesim(base + " --price-usd-per-hour l4=-1").exit_code, 2);
  EXPECT_EQ(Servesim(base + " --price-usd-per-hour t4=1").exit_code, 2);
}

// Bad plan inputs name the flag and the value (a negative rate read "give a
// workload"; --devices '' searched every device; 'nan' was suggested as a
// time).
TEST(PlanCliTest, BadRateDevicesAndSloValuesAreNamed) {
  const std::string base = "plan --model gemma-4-e2b --num-prompts 8 --max-replicas 1 ";
  CliRun rate = Servesim(base + "--devices l4 --slo 'ttft_p99<=2s' --request-rate -1");
  EXPECT_EQ(rate.exit_code, 2);
  EXPECT_THAT(rate.err, HasSubstr("--request-rate: -1 is out of range (allowed: > 0"));
  CliRun devices = Servesim(base + "--devices '' --slo 'ttft_p99<=2s' --request-rate 1");
  EXPECT_EQ(devices.exit_code, 2);
  EXPECT_THAT(devices.err, HasSubstr("--devices '': no device named"));
  CliRun slo = Servesim(base + "--devices l4 --slo 'ttft_p99<=nan' --request-rate 1");
  EXPECT_EQ(slo.exit_code, 2);
  EXPECT_THAT(slo.err, HasSubstr("'nan' is not a finite number"));
  EXPECT_THAT(slo.err, Not(HasSubstr("nanms")));
}

// "Unattainable" on a device whose profile never saw such prompts says the
// verdict rests on extrapolated prefill (the T4's cells have 40-token
// prompts; 12B's 1,024-token TTFT on it is a prediction beyond them).
TEST(PlanCliTest, AnUnattainableVerdictBeyondTheFitSaysSo) {
  CliRun r = Servesim(
      "plan --model gemma-4-12b --quantization w4a16-emb4 --max-model-len 8192 "
      "--request-rate 2 --slo 'ttft_p99<=2s' --devices t4 --num-prompts 16 "
      "--max-replicas 1 --no-mixed");
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_THAT(r.out, HasSubstr("unattainable on t4: single-request p99_ttft_ms"));
  EXPECT_THAT(r.out, HasSubstr("beyond the fit: its profile saw prompts of at most 40 "
                               "tokens, this workload's reach 1024"));
}

// simulate's cost lines pay the cheapest offer (it took the first listed:
// SageMaker's $1.1267 on-demand, EC2's $0.9412 spot) and name it.
TEST(SimulateCliTest, CostLinesUseTheCheapestOfferAndNameIt) {
  CliRun r = Servesim("simulate --device l4 --model gemma-4-e2b --num-prompts 4");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("on-demand: 1x l4 gce g2-standard-4 on-demand $0.7045/h"));
  EXPECT_THAT(r.out, HasSubstr("spot: 1x l4 gce g2-standard-4 on-demand $0.7045/h"));
}

// 31B W4A16 on an L4 at 131072 said "9288 tokens fit" (linear in the length
// on a hybrid sliding-window layout); 9288 did not fit.
TEST(MemoryCliTest, DoesNotFitExitsFourAndNamesTheLargestLengthThatFits) {
  const std::string base = "memory --device l4 --model gemma-4-31b --quantization w4a16";
  CliRun r = Servesim(base + " --max-model-len 131072");
  EXPECT_EQ(r.exit_code, 4) << r.err;
  std::smatch m;
  ASSERT_TRUE(
      std::regex_search(r.out, m, std::regex("fits with --max-model-len ([0-9]+)")))
      << r.out;
  const int n = std::stoi(m[1]);
  EXPECT_LT(n, 9288);
  EXPECT_EQ(Servesim(base + " --max-model-len " + std::to_string(n)).exit_code, 0);
  EXPECT_EQ(Servesim(base + " --max-model-len " + std::to_string(n + 1)).exit_code, 4);
  EXPECT_EQ(Servesim(base + " --max-model-len 9288").exit_code, 4);
  // simulate gives the same deployment the same exit code.
  CliRun sim = Servesim(
      "simulate --device l4 --model gemma-4-31b --quantization w4a16 --max-model-len "
      "131072 --num-prompts 1");
  EXPECT_EQ(sim.exit_code, 4) << sim.err;
  EXPECT_THAT(sim.err, HasSubstr("does not fit"));
}

// 31B bf16 (62 GB of weights) cannot load on one 24 GB L4: memory and
// simulate name the fewest chips that hold it, found with the planner.
TEST(MemoryCliTest, DoesNotFitNamesTheSmallestTensorParallelSizeThatFits) {
  const std::string base = "memory --device l4 --model gemma-4-31b --max-model-len 8192";
  CliRun r = Servesim(base);
  EXPECT_EQ(r.exit_code, 4) << r.err;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(
      r.out, m, std::regex("fits on ([0-9]+) chips: --tensor-parallel-size ([0-9]+)")))
      << r.out;
  const int tp = std::stoi(m[1]);
  EXPECT_EQ(std::stoi(m[2]), tp);
  EXPECT_GT(tp, 1);
  EXPECT_EQ(Servesim(base + " --tensor-parallel-size " + std::to_string(tp)).exit_code,
            0);
  for (int smaller = 2; smaller < tp; ++smaller) {
    // Too small to fit (4) or a size the model's heads refuse (2).
    EXPECT_NE(
        Servesim(base + " --tensor-parallel-size " + std::to_string(smaller)).exit_code,
        0)
        << smaller;
  }
  CliRun json = Servesim(base + " --json");
  EXPECT_THAT(json.out, HasSubstr("\"smallest_fitting_tensor_parallel_size\":"));
  CliRun sim = Servesim(
      "simulate --device l4 --model gemma-4-31b --max-model-len 8192 --num-prompts 1");
  EXPECT_EQ(sim.exit_code, 4) << sim.err;
  EXPECT_THAT(sim.err, HasSubstr("fits on " + std::to_string(tp) +
                                 " chips: --tensor-parallel-size " + std::to_string(tp)));
}

// The fewest-chips and longest-length hints covered single-replica
// simulate and memory only: a fleet replica that does not fit said nothing
// of what would. BuildFleet now solves it for every replica.
TEST(SimulateCliTest, FleetReplicaThatDoesNotFitSaysWhatWould) {
  const std::string config = Scratch("fleet.textproto");
  WriteText(config, R"pb(
    fleet {
      replicas { server { device: "l4" model: "gemma-4-e2b" max_model_len: 8192 } }
      replicas { server { device: "l4" model: "gemma-4-31b" max_model_len: 8192 } }
    }
    client { num_prompts: 1 random_input_len: 64 random_output_len: 4 }
  )pb");
  CliRun sim = Servesim("simulate --config " + config);
  EXPECT_EQ(sim.exit_code, 4) << sim.err;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(
      sim.err, m,
      std::regex("gemma-4-31b does not fit on l4: .*what fits, all else kept: fits on "
                 "([0-9]+) chips: --tensor-parallel-size ([0-9]+) \\(the fewest\\)")))
      << sim.err;
  const std::string tp = m[1];
  EXPECT_EQ(m[2], tp);
  EXPECT_EQ(Servesim("memory --device l4 --model gemma-4-31b --max-model-len 8192 "
                     "--tensor-parallel-size " +
                     tp)
                .exit_code,
            0);
}

// plan reported a device that does not fit ("cannot serve: ... does not
// fit") without saying what would. Now the reason names the fewest chips
// and the largest max_model_len, and the JSON group carries them as
// numbers (memory's keys), each checked here against `servesim memory`.
TEST(PlanCliTest, DeviceThatDoesNotFitNamesTheFewestChipsAndTheLongestLength) {
  const std::string base =
      "plan --devices l4 --model gemma-4-31b --quantization w4a16 --max-model-len 131072 "
      "--tensor-parallel-size 1 --rate 0.5 --num-prompts 4 --random-input-len 256 "
      "--random-output-len 8 --max-replicas 1 --slo 'ttft_p99<=60s' --no-progress";
  CliRun text = Servesim(base);
  EXPECT_EQ(text.exit_code, 3) << text.err;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(
      text.out, m,
      std::regex("l4: none \\(cannot serve: gemma-4-31b does not fit on l4: .*fits on "
                 "([0-9]+) chips: --tensor-parallel-size [0-9]+ \\(the fewest\\); "
                 "--max-model-len ([0-9]+) \\(the largest\\)")))
      << text.out;
  const int tp = std::stoi(m[1]);
  const int len = std::stoi(m[2]);
  CliRun json = Servesim(base + " --json");
  EXPECT_EQ(json.exit_code, 3) << json.err;
  EXPECT_THAT(json.out,
              HasSubstr("\"largest_fitting_max_model_len\": " + std::to_string(len)));
  EXPECT_THAT(json.out, HasSubstr("\"smallest_fitting_tensor_parallel_size\": " +
                                  std::to_string(tp)));
  const std::string mem = "memory --device l4 --model gemma-4-31b --quantization w4a16";
  EXPECT_EQ(Servesim(mem + " --max-model-len " + std::to_string(len)).exit_code, 0);
  EXPECT_EQ(Servesim(mem + " --max-model-len " + std::to_string(len + 1)).exit_code, 4);
  EXPECT_EQ(Servesim(mem + " --max-model-len 131072 --tensor-parallel-size " +
                     std::to_string(tp))
                .exit_code,
            0);
  EXPECT_EQ(Servesim(mem + " --max-model-len 131072").exit_code, 4);
}

// It reached 11.5 GB in 40 s without a word; now refused up front.
TEST(SimulateCliTest, RunThatCannotFitThisMachineIsRefusedUnlessForced) {
  CliRun r = Servesim(
      "simulate --device l4 --model gemma-4-e2b --num-prompts 2147483647 "
      "--request-rate inf");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("the run needs at least"));
  EXPECT_THAT(r.err, HasSubstr("--force"));
}

// Steps past the cap were dropped with only metadata.dropped_steps saying so.
TEST(SimulateCliTest, ChromeTraceCapIsAFlagAndDroppedStepsAreSaidOnStderr) {
  const std::string trace = Scratch("trace.json");
  const std::string base =
      "simulate --device l4 --model gemma-4-e2b --num-prompts 4 --random-input-len 32 "
      "--random-output-len 16 --overwrite --chrome-trace " +
      trace;
  CliRun capped = Servesim(base + " --chrome-trace-max-steps 5");
  ASSERT_EQ(capped.exit_code, 0) << capped.err;
  EXPECT_THAT(capped.err, HasSubstr("holds the first 5 steps"));
  CliRun full = Servesim(base);
  ASSERT_EQ(full.exit_code, 0) << full.err;
  EXPECT_THAT(full.err, Not(HasSubstr("dropped")));
  EXPECT_EQ(Servesim(base + " --chrome-trace-max-steps 0").exit_code, 2);
}

TEST(CliErrorTest, ParseErrorsTakeTheSubcommandForm) {
  CliRun r = Servesim("memory --device l4 --model gemma-4-e2b 8 --tensor-parallel-size");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, StartsWith("servesim memory: error: "));
  CliRun p = Servesim("plan --rate 1");
  EXPECT_EQ(p.exit_code, 2);
  EXPECT_THAT(p.err, StartsWith("servesim plan: error: "));
  CliRun top = Servesim("--bogus");
  EXPECT_EQ(top.exit_code, 2);
  EXPECT_THAT(top.err, StartsWith("servesim: error: "));
  EXPECT_EQ(Servesim("--help").exit_code, 0);
}

// --seed reads the same in every subcommand: an integer in [0, 2^63);
// plan's used to wrap -1 and saturate 2^64 and beyond into one seed.
TEST(CliErrorTest, SeedIsRangeCheckedInEverySubcommand) {
  const std::string plan =
      "plan --model gemma-4-e2b --no-progress --devices l4 --slo 'ttft_p99<=1s' --rate 2 "
      "--num-prompts 20 --seed ";
  const std::string gen =
      "trace generate '" + Scratch("g.csv") + "' --num-prompts 3 --seed ";
  for (const std::string& cmd :
       {plan, gen,
        std::string(
            "simulate --device l4 --model gemma-4-e2b --num-prompts 3 --seed ")}) {
    for (const char* bad : {"-1", "18446744073709551616", "1e3"}) {
      CliRun r = Servesim(cmd + bad);
      EXPECT_EQ(r.exit_code, 2) << cmd << bad;
      EXPECT_THAT(r.err, HasSubstr(std::string("--seed: ") + bad +
                                   " is out of range [0, 2^63) (an integer)"))
          << cmd << bad;
    }
    EXPECT_EQ(Servesim(cmd + "9223372036854775807").exit_code, 0) << cmd;
  }
}

// trace convert IN IN rewrote the input; an unknown extension was written
// as binary; a filter that left no request wrote a file every reader refuses.
TEST(TraceConvertCliTest, RefusesInPlaceUnknownExtensionAndEmptyResults) {
  const std::string in = Scratch("in.csv");
  WriteText(in,
            "TIMESTAMP,ContextTokens,GeneratedTokens\n"
            "2023-11-16 18:15:00.0000000,100,10\n"
            "2023-11-16 18:15:01.0000000,120,12\n");
  const std::string original = ReadText(in);
  CliRun same = Servesim("trace convert " + in + " " + in);
  EXPECT_EQ(same.exit_code, 2);
  EXPECT_THAT(same.err, HasSubstr("is the input file"));
  EXPECT_EQ(ReadText(in), original);

  const std::string txt = Scratch("out.txt");
  std::filesystem::remove(txt);
  CliRun unknown = Servesim("trace convert " + in + " " + txt);
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_THAT(unknown.err, HasSubstr("extension '.txt' names no format"));
  EXPECT_FALSE(std::filesystem::exists(txt));
  EXPECT_EQ(Servesim("trace convert " + in + " " + txt + " --to csv").exit_code, 0);
  EXPECT_EQ(Servesim("trace convert " + in + " " + Scratch("o.bin")).exit_code, 0);

  const std::string kept = Scratch("kept.csv");
  WriteText(kept, "left alone\n");
  // (--overwrite: it is the empty result, not the existing file, that stops it.)
  CliRun empty =
      Servesim("trace convert " + in + " " + kept + " --min-input 1000 --overwrite");
  EXPECT_EQ(empty.exit_code, 2);
  EXPECT_THAT(empty.err, HasSubstr("no request is left after the transforms"));
  EXPECT_EQ(ReadText(kept), "left alone\n");
  EXPECT_FALSE(std::filesystem::exists(kept + ".servesim-convert"));
}

// A bench file without start_times was replayed all at t = 0 without a
// word although it says request_rate: 16.
TEST(SimulateCliTest, BenchFileWithoutStartTimesSaysSoAndOffersItsRate) {
  const std::string bench = Scratch("bench.json");
  WriteText(bench,
            R"({"date": "20260917-000000", "completed": 3, "duration": 1.5,
                "request_rate": 16, "input_lens": [64, 64, 64],
                "output_lens": [4, 4, 4]})");
  const std::string base = "simulate --device l4 --model gemma-4-e2b --trace " + bench;
  CliRun r = Servesim(base);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("has no start_times: its requests are all sent at t = 0"));
  EXPECT_THAT(r.err, HasSubstr("give --request-rate 16"));
  CliRun rated = Servesim(base + " --request-rate 16");
  ASSERT_EQ(rated.exit_code, 0) << rated.err;
  EXPECT_THAT(rated.err, Not(HasSubstr("start_times")));
}

// A 10^7-point grid materialised every point (3.2 GB, no output after
// 60 s); now its memory is estimated first and the grid refused.
TEST(SweepCliTest, GridThatCannotFitTheMemoryLimitIsRefusedAtOnce) {
  std::string axes;
  const char* paths[] = {"client.random_input_len",
                         "client.random_output_len",
                         "client.max_concurrency",
                         "client.num_prompts",
                         "server.max_num_seqs",
                         "server.block_size",
                         "client.seed"};
  for (const char* p : paths) {
    axes += std::string("axes { path: \"") + p + "\" values: [";
    for (int v = 1; v <= 10; ++v)
      axes += (v > 1 ? ", \"" : "\"") + std::to_string(v * 16) + "\"";
    axes += "] }\n";
  }
  const std::string grid = Scratch("huge.grid.textproto");
  WriteText(grid, "base { server { device: \"l4\" model: \"gemma-4-e2b\" } }\n" + axes);
  const std::string out = Scratch("huge_out");
  std::filesystem::remove_all(out);
  CliRun r = Servesim("sweep --grid " + grid + " --out " + out + " --memory-limit-gb 4");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("10000000 points need about"));
  EXPECT_THAT(r.err, HasSubstr("--force"));
  EXPECT_FALSE(std::filesystem::exists(out));
}

// Peak RSS in KB of `servesim ARGS` run in the repository root (wait4's
// rusage of that one process); -1 when it did not exit 0 or 1.
long PeakRssKb(const std::string& args) {
  const std::string cmd = "cd '" + std::string(SERVESIM_SOURCE_DIR) + "' && exec '" +
                          SERVESIM_BINARY + "' " + args + " >/dev/null 2>&1";
  const pid_t pid = fork();
  if (pid == 0) {
    execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  rusage ru{};
  if (pid < 0 || wait4(pid, &status, 0, &ru) != pid || !WIFEXITED(status) ||
      WEXITSTATUS(status) > 1) {
    return -1;
  }
  return ru.ru_maxrss;
}

// A grid's points are decoded as they run, not expanded up front: a sweep
// of 40,000 points that stops after 2 takes no more memory than one of 2
// points (it took 55 MB more when every point was materialised; a 10^7
// grid, 3.2 GB). docs/performance.md "Sweep memory" has the figures.
TEST(SweepCliTest, GridPointsAreDecodedAsTheyRunNotHeld) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "a sanitizer's quarantine keeps freed memory resident";
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
  GTEST_SKIP() << "a sanitizer's quarantine keeps freed memory resident";
#endif
#endif
  auto grid = [](int n1, int n2) {
    std::string g =
        "base { server { device: \"l4\" model: \"gemma-4-e2b\" } client { num_prompts: 1 "
        "random_input_len: 16 random_output_len: 2 } }\naxes { path: \"client.seed\" "
        "values: [";
    for (int i = 1; i <= n1; ++i) g += (i > 1 ? ", \"" : "\"") + std::to_string(i) + "\"";
    g += "] }\naxes { path: \"client.random_output_len\" values: [";
    for (int i = 1; i <= n2; ++i) g += (i > 1 ? ", \"" : "\"") + std::to_string(i) + "\"";
    const std::string path = Scratch(std::to_string(n1 * n2) + ".grid.textproto");
    WriteText(path, g + "] }\n");
    return path;
  };
  const std::string small = grid(1, 2), large = grid(200, 200);
  const std::string out = Scratch("out");
  std::filesystem::remove_all(out);
  const long small_kb =
      PeakRssKb("sweep --grid '" + small + "' --out '" + out + "' --no-progress");
  std::filesystem::remove_all(out);
  const long large_kb = PeakRssKb("sweep --grid '" + large + "' --out '" + out +
                                  "' --stop-after 2 --no-progress");
  ASSERT_GT(small_kb, 0);
  ASSERT_GT(large_kb, 0);
  // What a 40,000-point grid must hold: a pointer per point, the grid file.
  EXPECT_LT(large_kb - small_kb, 16 * 1024) << small_kb << " KB vs " << large_kb << " KB";
  // Its grid.textproto still lists every point, and 2 of them ran.
  const std::string text = ReadText(out + "/grid.textproto");
  EXPECT_THAT(text, HasSubstr("# point 39999 "));
  const std::string jsonl = ReadText(out + "/results.jsonl");
  EXPECT_EQ(std::count(jsonl.begin(), jsonl.end(), '\n'), 2);
}

// Ctrl-C (or Slurm's SIGTERM) killed a sweep silently; now it writes the
// point in flight, says how to resume and exits 130 (143 for SIGTERM).
TEST(SweepCliTest, AnInterruptedSweepSaysHowToResume) {
  const std::string grid = Scratch("grid.textproto"), out = Scratch("out");
  std::filesystem::remove_all(out);
  WriteText(grid,
            "base { server { device: \"l4\" model: \"gemma-4-e2b\" } client { "
            "num_prompts: 100000 request_rate: 5 random_input_len: 64 "
            "random_output_len: 16 } }\naxes { path: \"client.seed\" values: [\"1\", "
            "\"2\", \"3\", \"4\", \"5\", \"6\", \"7\", \"8\"] }\n");
  // Signal once the first point is in the file (at most 300 s).
  const std::string script =
      "'" + std::string(SERVESIM_BINARY) + "' sweep --grid '" + grid + "' --out '" + out +
      "' -j 1 --no-progress 2>'" + out +
      ".err' & pid=$!; for i in $(seq 3000); do [ -s '" + out +
      "/results.jsonl' ] && break; sleep 0.1; done; kill -INT $pid; wait $pid";
  const int status = std::system(script.c_str());
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 130);
  const std::string err = ReadText(out + ".err");
  EXPECT_THAT(err, HasSubstr("interrupted: finishing the points in flight"));
  EXPECT_THAT(err, HasSubstr("[stopped early; rerun to resume]"));
  EXPECT_THAT(err, HasSubstr("interrupted by SIGINT: the "));
  EXPECT_THAT(err, HasSubstr("rerun the same command to run the rest"));
  const std::string jsonl = ReadText(out + "/results.jsonl");
  const auto done = std::count(jsonl.begin(), jsonl.end(), '\n');
  EXPECT_GE(done, 1);
  EXPECT_LT(done, 8);
  // The rerun keeps them: "N resumed".
  CliRun again = Servesim("sweep --grid '" + grid + "' --out '" + out +
                          "' -j 2 --no-progress --json");
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_THAT(again.out, HasSubstr("\"resumed\": " + std::to_string(done)));
  EXPECT_THAT(again.out, HasSubstr("\"interrupted\": false"));
  std::filesystem::remove_all(out);
}

// A grid kept as DIR/grid.textproto was overwritten by the resolved grid
// (the user's comments lost); the folder's own resolved grid may be given
// back to resume.
TEST(SweepCliTest, AGridFileWhereTheSweepWritesItsOwnIsRefused) {
  const std::string out = Scratch("gridout");
  std::filesystem::remove_all(out);
  std::filesystem::create_directories(out);
  const std::string mine = out + "/grid.textproto";
  const std::string text =
      "# my notes\nbase { server { device: \"l4\" model: \"gemma-4-e2b\" } client { "
      "num_prompts: 2 } }\naxes { path: \"client.seed\" values: [\"1\", \"2\"] }\n";
  WriteText(mine, text);
  CliRun r = Servesim("sweep --grid '" + mine + "' --out '" + out + "' --no-progress");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("where the sweep writes its resolved grid; keep your grid "
                               "file outside --out"));
  EXPECT_EQ(ReadText(mine), text);
  const std::string elsewhere = Scratch("mine.textproto");
  WriteText(elsewhere, text);
  std::filesystem::remove(mine);
  ASSERT_EQ(Servesim("sweep --grid '" + elsewhere + "' --out '" + out + "' --no-progress")
                .exit_code,
            0);
  r = Servesim("sweep --grid '" + mine + "' --out '" + out + "' --no-progress");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("(2 resumed, 0 run"));
  std::filesystem::remove_all(out);
}

// Long simulate runs said nothing until the end.
TEST(SimulateCliTest, ProgressLineOnRequest) {
  const std::string base = "simulate --device l4 --model gemma-4-e2b --num-prompts 8";
  CliRun on = Servesim(base + " --progress");
  ASSERT_EQ(on.exit_code, 0) << on.err;
  EXPECT_THAT(on.err, HasSubstr("simulate: 8 requests in"));
  CliRun off = Servesim(base + " --no-progress");
  EXPECT_THAT(off.err, Not(HasSubstr("requests in")));
  EXPECT_EQ(on.out, off.out);
}

// A trace gives each request's lengths: a random-length flag beside it
// is an error (it was silently ignored). With --rate they set the lengths.
TEST(PlanCliTest, RandomLengthFlagsDoNotApplyWithATrace) {
  const std::string base = std::string("plan --devices l4 --trace ") + SERVESIM_DATA_DIR +
                           "/traces/AzureLLMInferenceTrace_conv.csv.gz --num-prompts 20 "
                           "--slo 'ttft_p99<=1s' --max-replicas 1 --no-progress";
  for (const char* flag :
       {"--random-input-len 50", "--random-output-len 9", "--random-range-ratio 0.5"}) {
    CliRun r = Servesim(base + " " + flag);
    EXPECT_EQ(r.exit_code, 2) << flag;
    EXPECT_THAT(r.err, HasSubstr("does not apply with a trace (--trace gives each "
                                 "request's lengths)"))
        << flag;
  }
}

TEST(PlanCliTest, ProgressLineOnRequest) {
  const std::string base =
      "plan --devices l4 --model gemma-4-e2b --rate 1 --num-prompts 8 --max-replicas 1 "
      "--no-mixed --slo 'ttft_p99<=60s'";
  CliRun on = Servesim(base + " --progress");
  ASSERT_EQ(on.exit_code, 0) << on.err;
  EXPECT_THAT(on.err, HasSubstr("plan: 1 fleets simulated in"));
  CliRun off = Servesim(base + " --no-progress");
  EXPECT_EQ(off.err, "");
  EXPECT_EQ(on.out, off.out);
}

TEST(ValidateCliTest, ProgressLineOnRequest) {
  const std::string base = "validate --device t4 --no-held-out -j 1";
  CliRun on = Servesim(base + " --progress");
  ASSERT_TRUE(on.exit_code == 0 || on.exit_code == 3) << on.err;
  EXPECT_THAT(on.err, HasSubstr("validate: 0/"));
  EXPECT_THAT(on.err, HasSubstr("(now: t4 / "));
  EXPECT_THAT(on.err, HasSubstr("validate: fitted in"));
  CliRun off = Servesim(base + " --no-progress");
  EXPECT_EQ(off.exit_code, on.exit_code);
  EXPECT_THAT(off.err, Not(HasSubstr("fits done")));
  EXPECT_EQ(on.out, off.out);
}

TEST(CalibrateCliTest, ProgressLineOnRequest) {
  const std::string base = "calibrate --device mi300x --bench '" +
                           std::string(SERVESIM_DATA_DIR) +
                           "/bench/mi300x-gemma4-e2b-2026-09-17' -j 1 --out '" +
                           Scratch("profile.textproto") + "' --overwrite";
  CliRun on = Servesim(base + " --progress");
  ASSERT_TRUE(on.exit_code == 0 || on.exit_code == 3) << on.err;
  EXPECT_THAT(on.err, HasSubstr("calibrate: 0/1 fits done in"));
  EXPECT_THAT(on.err, HasSubstr("calibrate: fitted in"));
  CliRun off = Servesim(base + " --no-progress");
  EXPECT_EQ(off.exit_code, on.exit_code);
  EXPECT_THAT(off.err, Not(HasSubstr("fits done")));
  EXPECT_EQ(on.out, off.out);
}

// A scratch grid of E2B (4,096 context, 2 short prompts a point) with one
// axis over `path` taking `values` (text-format list items).
std::string OneAxisGrid(const std::string& name, const std::string& path,
                        const std::string& values) {
  const std::string grid = Scratch(name);
  WriteText(grid,
            "base {\n  server { model: \"gemma-4-e2b\" max_model_len: 4096 }\n"
            "  client { num_prompts: 2 random_input_len: 64 random_output_len: 4 }\n}\n"
            "axes { path: \"" +
                path + "\" values: [ " + values + " ] }\n");
  return grid;
}

// plan says which server settings its devices' profiles were not fitted
// under (simulate's "outside the fit" lines), per device shape.
TEST(PlanCliTest, NamesServerSettingsNoFittedRunHad) {
  const std::string args =
      "plan --devices tpu-v5e --model gemma-4-e2b --request-rate 1 --num-prompts 8 "
      "--random-input-len 128 --random-output-len 8 --max-replicas 1 "
      "--tensor-parallel-size 1 --slo 'ttft_p99<=60s' --no-progress ";
  CliRun same = Servesim(args);
  ASSERT_EQ(same.exit_code, 0) << same.err;
  EXPECT_THAT(same.out, Not(HasSubstr("not fitted under")));
  CliRun off = Servesim(args + "--no-async-scheduling");
  ASSERT_EQ(off.exit_code, 0) << off.err;
  EXPECT_THAT(off.out, HasSubstr("Server settings the calibration profiles were not "
                                 "fitted under:\n  tpu-v5e: outside the fit: the shipped "
                                 "tpu-v5e profile"));
  EXPECT_THAT(off.out, HasSubstr("async scheduling on; this run has off"));
  CliRun json = Servesim(args + "--no-async-scheduling --json");
  ASSERT_EQ(json.exit_code, 0) << json.err;
  EXPECT_THAT(json.out, HasSubstr("\"outside_fit\": [\n"));
}

// sweep merge has --json as every subcommand: one object on stdout.
TEST(SweepCliTest, MergeJsonIsOneObjectNamingWhatWasMerged) {
  const std::string grid =
      OneAxisGrid("merge.grid.textproto", "server.device", R"("l4", "t4")");
  std::string shards;
  for (int k = 0; k < 2; ++k) {
    const std::string dir = Scratch("merge_shard" + std::to_string(k));
    std::filesystem::remove_all(dir);
    CliRun r = Servesim("sweep --grid " + grid + " --out " + dir + " --shard " +
                        std::to_string(k) + "/2 --no-progress");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    shards += " " + dir;
  }
  const std::string out = Scratch("merge_out");
  std::filesystem::remove_all(out);
  CliRun m = Servesim("sweep merge" + shards + " --out " + out + " --json");
  ASSERT_EQ(m.exit_code, 0) << m.err;
  ASSERT_FALSE(m.out.empty());
  EXPECT_EQ(m.out.front(), '{');
  EXPECT_EQ(m.out.substr(m.out.size() - 2), "}\n");
  EXPECT_THAT(m.out, HasSubstr("\"num_points\": 2"));
  EXPECT_THAT(m.out, HasSubstr("\"num_shards\": 2"));
  EXPECT_THAT(m.out, HasSubstr("/results.csv\""));
  EXPECT_TRUE(std::filesystem::exists(out + "/results.csv"));
}

// A typo in a grid value ("tpu-v5") ran 60 of 240 points as errors and
// exited 0; now it is refused before any point runs.
TEST(SweepCliTest, UnknownNameInAGridIsAnInputErrorBeforeAnyPointRuns) {
  const std::string grid =
      OneAxisGrid("typo.grid.textproto", "server.device", R"("l4", "tpu-v5")");
  const std::string out = Scratch("typo_out");
  std::filesystem::remove_all(out);
  CliRun r = Servesim("sweep --grid " + grid + " --out " + out);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("tpu-v5"));
  EXPECT_THAT(r.err, HasSubstr("no point was run"));
  EXPECT_FALSE(std::filesystem::exists(out + "/results.csv"));

  // A model that does not fit is a result ("infeasible"), not an error.
  WriteText(grid, R"pb(
    base {
      server { max_model_len: 4096 }
      client { num_prompts: 2 random_input_len: 64 random_output_len: 4 }
    }
    axes {
      path: "server.device"
      values: [ "t4" ]
    }
    axes {
      path: "server.model"
      values: [ "gemma-4-e2b", "gemma-4-31b" ]
    }
  )pb");
  r = Servesim("sweep --grid " + grid + " --out " + out);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("1 infeasible, 0 failed"));
  EXPECT_THAT(r.err, HasSubstr("note: 1 infeasible point(s)"));
  const std::string csv = ReadText(out + "/results.csv");
  EXPECT_THAT(csv, HasSubstr(",infeasible,"));
  // The infeasible point says what would fit (solved with the planner).
  EXPECT_THAT(csv, HasSubstr("gemma-4-31b does not fit on t4"));
  EXPECT_THAT(csv, HasSubstr("what fits, all else kept: "));
  EXPECT_THAT(ReadText(out + "/results.jsonl"), HasSubstr("what fits, all else kept: "));
}

// plan --config with a fleet searched its default devices and ignored the
// fleet without a word; a field given twice took the last. Both are errors
// naming the file.
TEST(PlanCliTest, AConfigFleetOrARepeatedFieldIsRefused) {
  const std::string cfg = Scratch("plan_fleet.cfg");
  WriteText(cfg, R"pb(
    fleet {
      replicas {
        server { device: "l4" model: "gemma-4-e2b" max_model_len: 4096 }
        count: 3
      }
    }
    client { num_prompts: 50 request_rate: 5 random_input_len: 256 random_output_len: 32 }
  )pb");
  CliRun r = Servesim("plan --config " + cfg + " --slo 'ttft_p99<=1s'");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--config " + cfg +
                               ": field fleet: plan chooses the fleet itself"));
  WriteText(cfg, "server { device: \"l4\" device: \"t4\" }\n");
  r = Servesim("plan --config " + cfg + " --rate 2 --slo 'ttft_p99<=1s'");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr(cfg + ":1:"));
  EXPECT_THAT(r.err, HasSubstr("\"device\" is specified multiple times"));
}

// Flags given twice or alone were taken silently: a device listed twice, a
// device priced twice (the last won), --confidence-samples without
// --confidence (ignored).
TEST(PlanCliTest, RepeatedOrOrphanFlagsAreRefused) {
  const std::string base = "plan --rate 2 --model gemma-4-e2b --slo 'ttft_p99<=1s' ";
  CliRun r = Servesim(base + "--devices l4,l4");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--devices l4,l4: 'l4' is given twice"));
  r = Servesim(base + "--devices l4 --price-usd-per-hour l4=1 --price-usd-per-hour l4=2");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("device 'l4' already has a price (1 $/h)"));
  r = Servesim(base + "--devices l4 --confidence-samples 4");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--confidence-samples: only with --confidence"));
}

// A server flag whose field an axis sweeps was silently overridden at every
// point (--max-num-seqs 8 with an axis over server.max_num_seqs ran 1 and
// 256): refused naming the flag and the axis.
TEST(SweepCliTest, AFlagAnAxisWouldOverrideIsRefused) {
  const std::string grid =
      OneAxisGrid("flagaxis.grid.textproto", "server.max_num_seqs", R"("1", "256")");
  const std::string out = Scratch("flagaxis_out");
  std::filesystem::remove_all(out);
  CliRun r = Servesim("sweep --grid " + grid + " --out " + out +
                      " --device l4 --max-num-seqs 8 --no-progress");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--max-num-seqs: axis 0 (server.max_num_seqs) of the grid "
                               "sets it at every point"));
  EXPECT_FALSE(std::filesystem::exists(out + "/results.csv"));
  r = Servesim("sweep --grid " + grid + " --out " + out + " --device l4 --no-progress");
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

// A trace that is not there failed every point at run time (exit 1, each
// error kept for good): an input error before any point runs, naming the
// path and the folder a relative path is taken from.
TEST(SweepCliTest, AMissingTraceIsAnInputErrorBeforeAnyPointRuns) {
  const std::string grid = Scratch("notrace.grid.textproto");
  WriteText(grid, R"pb(
    base {
      server { device: "l4" model: "gemma-4-e2b" max_model_len: 4096 }
      client { trace: "no/such/trace.csv.gz" num_prompts: 4 }
    }
    axes {
      path: "client.request_rate"
      values: [ "1", "2" ]
    }
  )pb");
  const std::string out = Scratch("notrace_out");
  std::filesystem::remove_all(out);
  CliRun r = Servesim("sweep --grid " + grid + " --out " + out + " --no-progress");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("client.trace 'no/such/trace.csv.gz': no such file (a "
                               "relative path is taken from the current directory"));
  EXPECT_THAT(r.err, HasSubstr("(no point was run)"));
  EXPECT_FALSE(std::filesystem::exists(out + "/results.csv"));
}

// Every kind of bad grid value is exit 2 before any point runs (a typo'd
// device was rc 0 with 60 of 240 points failed): an out-of-range number, an
// unknown router or quantization, a value of the wrong type; a point that
// fails at run time (a trace that cannot be read) is exit 2 after the run.
TEST(SweepCliTest, EveryKindOfBadGridValueIsExitTwo) {
  const std::string base =
      R"pb(base {
             server { device: "l4" model: "gemma-4-e2b" max_model_len: 4096 }
             client { num_prompts: 2 random_input_len: 64 random_output_len: 4 }
           })pb";
  const std::pair<const char*, const char*> bad[] = {
      {R"(axes { path: "server.max_num_seqs" values: ["8", "-1"] })",
       "-1 is out of range"},
      {R"(axes { path: "fleet.router" values: ["kv-aware", "prefix-awar"] })",
       "\"prefix-awar\" is not one of"},
      {R"(axes { path: "server.quantization" values: ["w4a16", "int3"] })",
       "unknown value 'int3'"},
      {R"(axes { path: "client.request_rate" values: ["1", "nan"] })",
       "nan is out of range"},
      {R"(axes { path: "server.max_num_seqs" values: ["8", "many"] })",
       "'many' is not an int32"},
  };
  const std::string grid = Scratch("bad.grid.textproto");
  const std::string out = Scratch("bad_out");
  for (const auto& [axis, message] : bad) {
    WriteText(grid, base + "\n" + axis + "\n");
    std::filesystem::remove_all(out);
    CliRun r = Servesim("sweep --no-progress --grid " + grid + " --out " + out);
    EXPECT_EQ(r.exit_code, 2) << axis;
    EXPECT_THAT(r.err, StartsWith("servesim sweep: error: ")) << axis;
    EXPECT_THAT(r.err, HasSubstr(message)) << axis;
    EXPECT_FALSE(std::filesystem::exists(out + "/results.csv")) << axis;
  }
  WriteText(grid,
            base + R"(axes { path: "client.trace" values: ["/nonexistent/a.csv"] })");
  std::filesystem::remove_all(out);
  CliRun r = Servesim("sweep --no-progress --grid " + grid + " --out " + out);
  EXPECT_EQ(r.exit_code, 2);
  // A missing trace is named before any point runs (it was a failed point).
  EXPECT_THAT(r.err, HasSubstr("client.trace '/nonexistent/a.csv': no such file"));
  EXPECT_FALSE(std::filesystem::exists(out + "/results.csv"));
}

// plan --confidence on the Azure conversation trace: the point estimate
// picks 2 x tpu-v6e (p99 TTFT 417 ms <= 450 ms), but with the device's
// structural band and parameter draws 2 replicas meet it with probability
// 0.54; the chosen fleet (3) meets 0.9 and the one-fewer fleet is shown
// failing. The test asks only that the sure fleet be larger than the point
// estimate's. (The SLO was 400 ms until the async arrival rule moved the
// 2-replica p99 from 306 to 417 ms: then both picks were 3.)
TEST(PlanCliTest, ConfidenceChoosesAFleetMeetingItAndShowsTheSmallerOneFailing) {
  const std::string base =
      std::string("plan --devices tpu-v6e --trace ") + SERVESIM_DATA_DIR +
      "/traces/AzureLLMInferenceTrace_conv.csv.gz --num-prompts 600 "
      "--rate 30 --slo 'ttft_p99<=450ms' --no-mixed --max-replicas 8 "
      "--no-progress";
  CliRun point = Servesim(base);
  CliRun sure = Servesim(base + " --confidence 0.9");
  ASSERT_EQ(point.exit_code, 0) << point.err;
  ASSERT_EQ(sure.exit_code, 0) << sure.err;
  std::smatch m;
  const std::regex cheapest(R"(Cheapest overall: (\d+) x tpu-v6e)");
  ASSERT_TRUE(std::regex_search(point.out, m, cheapest)) << point.out;
  const int point_n = std::stoi(m[1]);
  EXPECT_THAT(sure.out, HasSubstr("slo_probability"));
  const std::regex chosen(
      R"(\n  (\d+) x tpu-v6e +[0-9.]+ met +[0-9.]+ +([0-9.e+-]+) .*<- chosen)");
  ASSERT_TRUE(std::regex_search(sure.out, m, chosen)) << sure.out;
  const int n = std::stoi(m[1]);
  EXPECT_GE(std::stod(m[2]), 0.9);
  EXPECT_GT(n, point_n);
  const std::regex fewer(
      R"(one replica fewer \((\d+) x tpu-v6e\) misses: slo_probability ([0-9.e+-]+) < 0.9)");
  ASSERT_TRUE(std::regex_search(sure.out, m, fewer)) << sure.out;
  EXPECT_EQ(std::stoi(m[1]), n - 1);
  EXPECT_LT(std::stod(m[2]), 0.9);
  CliRun bad = Servesim(base + " --confidence 1");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_THAT(bad.err, HasSubstr("--confidence: 1 is out of range"));
}

const char kSimulate[] =
    "simulate --device t4 --model gemma-4-e2b --num-prompts 40 --random-input-len 256 "
    "--random-output-len 32 --random-range-ratio 0.5 --max-concurrency 4 --seed 3 "
    "--date 20260101-000000 --no-progress";

TEST(SimulateIntervalCliTest, JsonIntervalsOnEveryMetricByteIdenticalWhateverJobs) {
  CliRun one = Servesim(std::string(kSimulate) + " --json --interval 0.9 -j 1");
  CliRun three = Servesim(std::string(kSimulate) + " --json --interval 0.9 -j 3");
  ASSERT_EQ(one.exit_code, 0) << one.err;
  EXPECT_EQ(one.out, three.out);
  for (const char* key :
       {"\"intervals\"", "\"p99_ttft_ms\": {", "\"output_throughput\": {",
        "\"kv_occupancy_mean\": {", "\"usd_per_m_output_tokens_on-demand\": {",
        "\"sources\"", "\"parameters\"", "\"prior_parameters\"", "\"workload\"",
        "\"structural\"", "\"level\": 0.9", "\"interval_method\""}) {
    EXPECT_THAT(one.out, HasSubstr(key)) << key;
  }
  // vLLM's keys stay the point values: the same as without --interval.
  CliRun plain = Servesim(std::string(kSimulate) + " --json");
  const std::regex p99(R"("p99_ttft_ms": [0-9.e+-]+)");
  std::smatch a, b;
  ASSERT_TRUE(std::regex_search(one.out, a, p99));
  ASSERT_TRUE(std::regex_search(plain.out, b, p99));
  EXPECT_EQ(a[0], b[0]);
}

TEST(SimulateIntervalCliTest, TextShowsBracketsAndATraceHasNoWorkloadSource) {
  CliRun text = Servesim(std::string(kSimulate) + " --interval 0.5");
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_TRUE(std::regex_search(
      text.out, std::regex(R"(p99 TTFT [0-9.]+ ms \[[0-9.]+, [0-9.]+\])")))
      << text.out;
  CliRun trace =
      Servesim(std::string("simulate --device t4 --model gemma-4-e2b --trace ") +
               SERVESIM_DATA_DIR +
               "/traces/AzureLLMInferenceTrace_conv.csv.gz --num-prompts 20 "
               "--date 20260101-000000 --no-progress --interval 0.9");
  ASSERT_EQ(trace.exit_code, 0) << trace.err;
  EXPECT_THAT(trace.out,
              HasSubstr("workload: none (a trace replays fixed arrival times"));
}

// A device with no profile (priors by rule) draws its step parameters from
// their priors: a source of its own, byte-identical whatever the threads.
TEST(SimulateIntervalCliTest, DatasheetOnlyDeviceDrawsItsPriorsWhateverJobs) {
  const std::string cmd =
      "simulate --device h100-sxm --model gemma-4-e2b --num-prompts 40 "
      "--random-input-len 256 --random-output-len 32 --random-range-ratio 0.5 "
      "--max-concurrency 4 --seed 3 --date 20260101-000000 --no-progress --json "
      "--interval 0.9";
  CliRun one = Servesim(cmd + " -j 1");
  CliRun two = Servesim(cmd + " -j 2");
  ASSERT_EQ(one.exit_code, 0) << one.err;
  EXPECT_EQ(one.out, two.out);
  EXPECT_THAT(one.out, HasSubstr("\"num_parameter_samples\": 0"));
  EXPECT_THAT(one.out, HasSubstr("\"num_prior_samples\": 4"));
  EXPECT_THAT(one.out, HasSubstr("prior_parameters: 4 draws from the datasheet-only"));
  // The TTFT's prior band is not the point.
  const std::regex band(
      R"re("mean_ttft_ms": \{[\s\S]*?"prior_parameters": \{\s*"lo": ([0-9.e+-]+),\s*"hi": ([0-9.e+-]+))re");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(one.out, m, band)) << one.out.substr(0, 3000);
  EXPECT_LT(std::stod(m[1]), std::stod(m[2]));
}

TEST(SimulateIntervalCliTest, RefusesLevelsOutOfRangeNamingTheFlag) {
  for (const char* level : {"0", "1", "1.5", "-0.1"}) {
    CliRun r = Servesim(std::string(kSimulate) + " --interval " + level);
    EXPECT_EQ(r.exit_code, 2) << level;
    EXPECT_THAT(r.err, HasSubstr("servesim simulate: error: --interval: ")) << level;
  }
  CliRun k = Servesim(std::string(kSimulate) + " --interval 0.9 --interval-samples 1");
  EXPECT_EQ(k.exit_code, 2);
  EXPECT_THAT(k.err, HasSubstr("--interval-samples: 1 is out of range"));
  // Without --interval the draws are never made: an error, not ignored.
  CliRun alone = Servesim(std::string(kSimulate) + " --interval-samples 8");
  EXPECT_EQ(alone.exit_code, 2);
  EXPECT_THAT(alone.err, HasSubstr("--interval-samples: given without --interval"));
}

TEST(SweepIntervalCliTest, LoHiColumnsBracketThePointWhateverJobs) {
  const std::string grid = Scratch("interval_grid.textproto");
  WriteText(grid, R"pb(
    name: "ivgrid"
    base {
      server { device: "t4" model: "gemma-4-e2b" max_model_len: 2048 }
      client {
        num_prompts: 16
        random_input_len: 128
        random_output_len: 16
        random_range_ratio: 0.5
        seed: 1
      }
    }
    axes {
      path: "client.max_concurrency"
      values: [ "1", "4" ]
    }
  )pb");
  const std::string one = Scratch("interval_sweep_1"), two = Scratch("interval_sweep_2");
  std::filesystem::remove_all(one);
  std::filesystem::remove_all(two);
  CliRun a = Servesim("sweep --grid " + grid + " --out " + one + " --interval 0.9 -j 1");
  CliRun b = Servesim("sweep --grid " + grid + " --out " + two + " --interval 0.9 -j 2");
  ASSERT_EQ(a.exit_code, 0) << a.err;
  ASSERT_EQ(b.exit_code, 0) << b.err;
  const std::string csv = ReadText(one + "/results.csv");
  EXPECT_EQ(csv, ReadText(two + "/results.csv"));
  EXPECT_THAT(csv, HasSubstr(",p99_ttft_ms_lo,p99_ttft_ms_hi"));
  // The re-simulations that fell behind the offered rate, per point.
  EXPECT_THAT(csv, HasSubstr(",interval_saturated_runs"));
  const std::string jsonl = ReadText(one + "/results.jsonl");
  const std::regex row(
      R"re("p99_ttft_ms":([0-9.e+-]+).*"p99_ttft_ms_lo":([0-9.e+-]+),"p99_ttft_ms_hi":([0-9.e+-]+))re");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(jsonl, m, row)) << jsonl.substr(0, 2000);
  EXPECT_LT(std::stod(m[2]), std::stod(m[1]));
  EXPECT_GT(std::stod(m[3]), std::stod(m[1]));
  CliRun bad = Servesim("sweep --grid " + grid + " --out " + Scratch("interval_bad") +
                        " --interval 0");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_THAT(bad.err, HasSubstr("--interval: 0 is out of range"));
}

}  // namespace
}  // namespace servesim
