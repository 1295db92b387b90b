// One vocabulary of server flags: every subcommand that takes a server
// (simulate, memory, calibrate, plan, sweep's base) accepts every flag of
// ServerFlags, as its --help lists them; where one cannot apply, the
// exception is stated here with the reason.
#include <map>
#include <set>
#include <sstream>
#include <string>

#include "experiments/cli/server_flags.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/cli_run.h"

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

TEST(FlagVocabularyTest, BothSpellingsOfTheOnOffFlags) {
  for (const char* sub : {"simulate", "memory", "calibrate", "sweep"}) {
    const std::set<std::string> listed =
        HelpFlags(Servesim(std::string(sub) + " --help").out);
    for (const char* flag : {"--async-scheduling", "--no-async-scheduling",
                             "--enable-prefix-caching", "--no-enable-prefix-caching"}) {
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

}  // namespace
}  // namespace servesim::cli
