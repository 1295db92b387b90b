// One vocabulary of server flags: every subcommand that takes a server
// (simulate, memory, calibrate, plan, sweep's base) accepts every flag of
// ServerFlags, as its --help lists them; where one cannot apply, the
// exception is stated here with the reason.
#include <map>
#include <set>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "experiments/capacity/intervals.h"
#include "experiments/capacity/plan.h"
#include "experiments/cli/server_flags.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "hwmodels/server_spec.h"
#include "sim/client.h"
#include "sim/random_source.h"
#include "sim/report.h"
#include "tests/cli_run.h"
#include "traces/synthetic.h"

namespace servesim::cli {
namespace {

using servesim::cli_test::CliRun;
using servesim::cli_test::Servesim;

// The long options a subcommand's --help lists ("--device", "--no-..."),
// from CLI11's "-q,--quantization" and "--x,--no-x{false}" spellings.
std::set<std::string> HelpFlags(const std::string& help) {
  std::set<std::string> out;
  std::istringstream in(help);
  std::string tok;
  while (in >> tok) {
    std::istringstream parts(tok);
    std::string part;
    while (std::getline(parts, part, ',')) {
      part = part.substr(0, part.find('{'));
      if (part.rfind("--", 0) == 0 && part.size() > 2) out.insert(part);
    }
  }
  return out;
}

TEST(FlagVocabularyTest, EveryServerSubcommandTakesEveryServerFlag) {
  // Documented exceptions: subcommand -> flag -> why it cannot apply.
  const std::map<std::string, std::map<std::string, std::string>> exceptions = {};
  const std::vector<std::string> names = ServerFlags::Names();
  ASSERT_GE(names.size(), 12u);
  for (const char* sub : {"simulate", "memory", "calibrate", "plan", "sweep"}) {
    CliRun r = Servesim(std::string(sub) + " --help");
    ASSERT_EQ(r.exit_code, 0) << sub << ": " << r.err;
    const std::set<std::string> listed = HelpFlags(r.out);
    for (const std::string& flag : names) {
      auto e = exceptions.find(sub);
      if (e != exceptions.end() && e->second.count(flag)) continue;
      EXPECT_TRUE(listed.count(flag)) << "servesim " << sub << " lacks " << flag;
    }
  }
}

TEST(FlagVocabularyTest, AnUnknownSubcommandIsNamedWithTheChoices) {
  // CLI11 alone said "A subcommand is required" for `servesim simulte`.
  CliRun r = Servesim("simulte --device l4");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err,
              ::testing::HasSubstr(
                  "servesim: error: unknown subcommand 'simulte' (one of: simulate, "
                  "memory, validate, calibrate, trace, sweep, plan, devices, models)"));
  r = Servesim("trace stat x.csv");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err,
              ::testing::HasSubstr("servesim trace: error: unknown subcommand 'stat' "
                                   "(one of: stats, convert, generate)"));
  r = Servesim("");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, ::testing::HasSubstr("servesim: error: a subcommand is required"));
}

TEST(FlagVocabularyTest, BothSpellingsOfTheOnOffFlags) {
  for (const char* sub : {"simulate", "memory", "calibrate", "sweep"}) {
    const std::set<std::string> listed =
        HelpFlags(Servesim(std::string(sub) + " --help").out);
    for (const char* flag :
         {"--async-scheduling", "--no-async-scheduling", "--enable-prefix-caching",
          "--no-enable-prefix-caching", "--scheduler-reserve-full-isl",
          "--no-scheduler-reserve-full-isl"}) {
      EXPECT_TRUE(listed.count(flag)) << "servesim " << sub << " lacks " << flag;
    }
  }
}

TEST(FlagVocabularyTest, SameDefaultsEverywhere) {
  // memory and simulate resolve the same server from the same flags: the
  // planned KV capacity is one number.
  const std::string flags =
      "--device l4 --model gemma-4-e2b --max-model-len 4096 --no-async-scheduling";
  CliRun mem = Servesim("memory " + flags + " --json");
  ASSERT_EQ(mem.exit_code, 0) << mem.err;
  EXPECT_THAT(mem.out, ::testing::HasSubstr("\"async_scheduling\": false"));
  EXPECT_THAT(mem.out, ::testing::HasSubstr("\"gpu_memory_utilization\": 0.9"));
}

// The help text of `flag` in a subcommand's --help: its option line (the
// first word names it, as "--seed" or "-q,--quantization") and the
// continuation lines below it, up to the next option's.
std::string HelpOf(const std::string& help, const std::string& flag) {
  std::istringstream in(help);
  std::string line, out;
  bool in_flag = false;
  while (std::getline(in, line)) {
    const size_t first = line.find_first_not_of(' ');
    const bool option_line = first != std::string::npos && line[first] == '-';
    if (option_line) {
      if (in_flag) break;
      std::istringstream words(line.substr(first));
      std::string name;
      words >> name;
      std::istringstream parts(name);
      std::string part;
      while (std::getline(parts, part, ','))
        if (part.substr(0, part.find('{')) == flag) in_flag = true;
    }
    if (in_flag) out += line + "\n";
  }
  return out;
}

// A help that states a default reads it from the default's one home (the
// struct whose initialiser ApplyDefaults / the readers use), so changing a
// default changes its help.
TEST(FlagVocabularyTest, HelpShowsTheDefaultFromItsHome) {
  const RandomDatasetConfig data;
  const ClientConfig client;
  const ServerSpec server;
  const SyntheticOptions syn;
  auto def = [](const auto& v) { return absl::StrCat("(default ", v); };
  const struct {
    const char* sub;
    const char* flag;
    std::string expected;
  } cases[] = {
      {"simulate", "--num-prompts", def(data.num_prompts)},
      {"simulate", "--random-input-len", def(data.input_len)},
      {"simulate", "--random-output-len", def(data.output_len)},
      {"simulate", "--random-range-ratio", def(data.range_ratio)},
      {"simulate", "--seed", def(client.seed)},
      {"simulate", "--burstiness", def(client.burstiness)},
      {"simulate", "--request-rate", def(client.request_rate)},
      {"simulate", "--gpu-memory-utilization", def(server.gpu_memory_utilization)},
      {"simulate", "--block-size", def(server.block_size)},
      {"simulate", "--tensor-parallel-size", def(server.tensor_parallel_size)},
      {"simulate", "--dtype", def(server.dtype)},
      {"simulate", "--quantization", def(server.quantization)},
      {"simulate", "--interval-samples", def(kDefaultIntervalSamples)},
      {"simulate", "--chrome-trace-max-steps",
       def(ChromeTraceRecorder::kDefaultMaxSteps)},
      {"sweep", "--interval-samples", def(kDefaultIntervalSamples)},
      {"plan", "--confidence-samples", def(kDefaultIntervalSamples)},
      {"plan", "--busy-hours", def(PlanOptions{}.busy_hours_per_day)},
      {"trace generate", "--num-prompts", def(syn.num_requests)},
      {"trace generate", "--random-input-len", def(syn.lengths.input_len)},
      {"trace generate", "--random-output-len", def(syn.lengths.output_len)},
      {"trace generate", "--request-rate", def(syn.arrival.rate_per_s)},
      {"trace generate", "--hash-block", def(syn.hash_block_tokens)},
  };
  for (const auto& c : cases) {
    CliRun r = Servesim(absl::StrCat(c.sub, " --help"));
    ASSERT_EQ(r.exit_code, 0) << c.sub << ": " << r.err;
    const std::string text = HelpOf(r.out, c.flag);
    ASSERT_FALSE(text.empty()) << c.sub << " --help lacks " << c.flag;
    EXPECT_THAT(text, ::testing::HasSubstr(c.expected)) << c.sub << " " << c.flag;
  }
}

}  // namespace
}  // namespace servesim::cli
