// The CLI11 bindings of the experiment flags: each flag reaches its config
// field, --config / --set / explicit-flag precedence, the flags' own parsing.
// The config's defaults and range checks are tested without CLI11 in
// experiments/runner/config_test.cc.
#include "experiments/cli/server_flags.h"

#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "experiments/runner/config.h"
#include "gtest/gtest.h"

namespace servesim::cli {
namespace {

// Parses `argv` (without the program name) and resolves the config.
absl::StatusOr<proto::ExperimentConfig> ResolveArgs(std::vector<std::string> argv) {
  CLI::App app;
  ExperimentFlags flags;
  flags.RegisterServerFlags(&app);
  flags.RegisterClientFlags(&app);
  flags.RegisterConfigFlags(&app);
  std::vector<std::string> rev(argv.rbegin(), argv.rend());
  app.parse(rev);  // CLI11 takes the arguments in reverse order
  return flags.Resolve();
}

std::vector<std::string> Base(std::vector<std::string> extra) {
  std::vector<std::string> v = {"--device", "l4", "--model", "gemma-4-e2b"};
  v.insert(v.end(), extra.begin(), extra.end());
  return v;
}

void ExpectErrorNaming(std::vector<std::string> extra, const std::string& flag) {
  const auto r = ResolveArgs(Base(std::move(extra)));
  ASSERT_FALSE(r.ok()) << flag;
  EXPECT_NE(r.status().message().find(flag), std::string::npos) << r.status();
}

// No flag given: the config's own defaults (ApplyDefaults, tested in
// experiments/runner/config_test.cc), and nothing else set.
TEST(ServerFlagsTest, NoFlagsResolveToTheConfigDefaults) {
  const auto r = ResolveArgs(Base({}));
  ASSERT_TRUE(r.ok()) << r.status();
  proto::ExperimentConfig expected;
  expected.mutable_server()->set_device("l4");
  expected.mutable_server()->set_model("gemma-4-e2b");
  ApplyDefaults(expected);
  EXPECT_EQ(ConfigToText(*r), ConfigToText(expected));
}

TEST(ServerFlagsTest, SeedIsParsedByHand) {
  // CLI11 clamps an overflowing integer to INT64_MAX: the seed is parsed by hand.
  ExpectErrorNaming({"--seed", "99999999999999999999"}, "--seed");
  ExpectErrorNaming({"--seed", "-1"}, "--seed");
  const auto seed = ResolveArgs(Base({"--seed", "9223372036854775807"}));
  ASSERT_TRUE(seed.ok()) << seed.status();
  EXPECT_EQ(seed->client().seed(), 9223372036854775807ULL);
}

TEST(ServerFlagsTest, FlagsThatWouldBeIgnoredAreErrors) {
  ExpectErrorNaming({"--trace", "t.csv", "--random-input-len", "999"},
                    "does not apply with --trace");
  ExpectErrorNaming({"--trace", "t.csv", "--burstiness", "0.5"}, "--burstiness");
  ExpectErrorNaming({"--trace", ""}, "--trace: empty path");
  const std::string path = ::testing::TempDir() + "/fleet.textproto";
  std::ofstream(path)
      << R"(fleet { replicas { count: 2 server { device: "l4" model: "gemma-4-e2b" } } })";
  const auto r = ResolveArgs({"--config", path, "--device", "t4"});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("defines a fleet"), std::string::npos)
      << r.status();
  const auto dir = ResolveArgs({"--config", ::testing::TempDir()});
  ASSERT_FALSE(dir.ok());
  EXPECT_NE(dir.status().message().find("is a directory"), std::string::npos);
}

// Each flag reaches its config field: a value the flag itself refuses (0
// or negative where the config reads 0 as unset) or one the config's
// checks refuse (experiments/runner/config_test.cc) names the flag.
TEST(ServerFlagsTest, EachBadFlagIsAnErrorNamingIt) {
  ExpectErrorNaming({"--random-input-len", "-5"}, "--random-input-len");
  ExpectErrorNaming({"--random-output-len", "0"}, "--random-output-len");
  ExpectErrorNaming({"--max-concurrency", "0"}, "--max-concurrency");
  ExpectErrorNaming({"--num-prompts", "0"}, "--num-prompts");
  ExpectErrorNaming({"--max-model-len", "0"}, "--max-model-len");
  ExpectErrorNaming({"--max-num-seqs", "0"}, "--max-num-seqs");
  ExpectErrorNaming({"--max-num-batched-tokens", "-3"}, "--max-num-batched-tokens");
  ExpectErrorNaming({"--request-rate", "fast"}, "--request-rate");
  ExpectErrorNaming({"--request-rate", "-1"}, "--request-rate");
  ExpectErrorNaming({"--burstiness", "0"}, "--burstiness");
  ExpectErrorNaming({"--random-range-ratio", "1.5"}, "--random-range-ratio");
  ExpectErrorNaming({"--client-overhead-s", "-0.1"}, "--client-overhead-s");
  ExpectErrorNaming({"--gpu-memory-utilization", "1.2"}, "--gpu-memory-utilization");
  ExpectErrorNaming({"--block-size", "7"}, "--block-size");
  ExpectErrorNaming({"--trace-format", "azure"}, "--trace-format");
  ExpectErrorNaming({"--max-num-batched-tokens", "1", "--max-num-seqs", "256"},
                    "max_num_batched_tokens >= max_num_seqs");
  ExpectErrorNaming({"--max-model-len", "1000", "--random-input-len", "900",
                     "--random-output-len", "200"},
                    "--max-model-len");
  const auto r = ResolveArgs({"--model", "gemma-4-e2b"});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("--device"), std::string::npos);
}

TEST(ServerFlagsTest, ConfigThenSetThenExplicitFlagsWin) {
  const std::string path = ::testing::TempDir() + "/exp.textproto";
  {
    std::ofstream out(path);
    out << "server { device: \"t4\" model: \"gemma-4-12b\" max_num_seqs: 4 }\n"
           "client { max_concurrency: 2 random_input_len: 100 }\n";
  }
  const auto r =
      ResolveArgs({"--config", path, "--set", "client { max_concurrency: 8 }", "--set",
                   "server { max_num_seqs: 16 }", "--max-num-seqs", "32"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->server().device(), "t4");
  EXPECT_EQ(r->client().max_concurrency(), 8);  // --set over the file
  EXPECT_EQ(r->server().max_num_seqs(), 32);    // explicit flag over --set
  EXPECT_EQ(r->client().random_input_len(), 100);
}

TEST(ServerFlagsTest, BadConfigTextNamesTheFileAndLine) {
  const std::string path = ::testing::TempDir() + "/bad.textproto";
  {
    std::ofstream out(path);
    out << "server { device: \"t4\" }\nclient { max_concurency: 2 }\n";
  }
  const auto r = ResolveArgs({"--config", path});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find(path + ":2:"), std::string::npos) << r.status();
  const auto s = ResolveArgs(Base({"--set", "client { nope: 1 }"}));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("--set #1"), std::string::npos) << s.status();
  // A field the file gives twice was merged (the last won): an error.
  {
    std::ofstream out(path, std::ios::trunc);
    out << "server {\n  device: \"l4\"\n  device: \"t4\"\n}\n";
  }
  const auto twice = ResolveArgs({"--config", path});
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.status().message().find(path + ":3:"), std::string::npos)
      << twice.status();
  EXPECT_NE(twice.status().message().find("specified multiple times"), std::string::npos)
      << twice.status();
  // The same within one --set; across two, the later wins (0 included).
  const auto set_twice =
      ResolveArgs(Base({"--set", "client { num_prompts: 3 num_prompts: 4 }"}));
  ASSERT_FALSE(set_twice.ok());
  EXPECT_NE(set_twice.status().message().find("--set #1"), std::string::npos)
      << set_twice.status();
  const auto later = ResolveArgs(Base({"--set", "client { max_concurrency: 8 }", "--set",
                                       "client { max_concurrency: 0 }"}));
  ASSERT_TRUE(later.ok()) << later.status();
  EXPECT_EQ(later->client().max_concurrency(), 0);
}

TEST(ServerFlagsTest, PrefixCachingAndAsyncCanBeSwitchedOff) {
  const auto r =
      ResolveArgs(Base({"--no-enable-prefix-caching", "--no-async-scheduling"}));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->server().enable_prefix_caching());
  EXPECT_FALSE(r->server().async_scheduling());
}

// vLLM's --scheduler-reserve-full-isl: on unless switched off, and not
// written in a resolved config unless given (configs read as before).
TEST(ServerFlagsTest, FullIslReserveIsOnUnlessSwitchedOff) {
  const auto d = ResolveArgs(Base({}));
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_FALSE(d->server().has_scheduler_reserve_full_isl());
  EXPECT_TRUE(ToServerSpec(d->server()).scheduler_reserve_full_isl);
  EXPECT_EQ(ConfigToText(*d).find("reserve_full_isl"), std::string::npos);
  const auto off = ResolveArgs(Base({"--no-scheduler-reserve-full-isl"}));
  ASSERT_TRUE(off.ok()) << off.status();
  EXPECT_FALSE(ToServerSpec(off->server()).scheduler_reserve_full_isl);
}

TEST(ServerFlagsTest, ParallelSizesAreServerFlags) {
  const auto r = ResolveArgs(Base({"--tensor-parallel-size", "4"}));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->server().tensor_parallel_size(), 4);
  // Not given: not written in the resolved config (unset means 1:
  // experiments/runner/config_test.cc).
  const auto d = ResolveArgs(Base({}));
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(ConfigToText(*d).find("parallel"), std::string::npos);
  ExpectErrorNaming({"--tensor-parallel-size", "0"},
                    "--tensor-parallel-size: 0 is out of range [1, 64]");
  ExpectErrorNaming({"--pipeline-parallel-size", "65"}, "--pipeline-parallel-size");
  ExpectErrorNaming({"--data-parallel-size", "-1"}, "--data-parallel-size");
  ExpectErrorNaming({"--set", "server { tensor_parallel_size: 100 }"},
                    "--tensor-parallel-size: 100 is out of range");
}

}  // namespace
}  // namespace servesim::cli
