// End to end through the binary: a tensor-parallel replica is planned per
// rank by `memory`, simulated, and priced at its multi-chip instance.
#include <fstream>
#include <string>

#include "gtest/gtest.h"
#include "tests/cli_run.h"

namespace servesim::cli {
namespace {

using servesim::cli_test::CliRun;
using servesim::cli_test::Servesim;

const char kGemma31bOnL4[] = "--device l4 --model gemma-4-31b --max-model-len 8192";

TEST(MultichipCliTest, MemoryFitsOnFourL4AndPrintsThePerRankPlan) {
  CliRun one = Servesim(std::string("memory ") + kGemma31bOnL4);
  ASSERT_EQ(one.exit_code, 4) << one.err;  // does not fit
  EXPECT_NE(one.out.find("DOES NOT FIT"), std::string::npos) << one.out;
  CliRun four =
      Servesim(std::string("memory ") + kGemma31bOnL4 + " --tensor-parallel-size 4");
  ASSERT_EQ(four.exit_code, 0) << four.err;
  EXPECT_NE(four.out.find("per rank of tensor parallel 4"), std::string::npos)
      << four.out;
  EXPECT_NE(four.out.find("weights              14.29 GiB"), std::string::npos)
      << four.out;
  EXPECT_NE(four.out.find("GPU KV cache size: "), std::string::npos) << four.out;
  EXPECT_NE(four.out.find("Maximum concurrency for 8192 tokens per request: "),
            std::string::npos)
      << four.out;
}

TEST(MultichipCliTest, SimulateIsPricedAtTheFourChipInstance) {
  CliRun r = Servesim(std::string("simulate ") + kGemma31bOnL4 +
                      " --tensor-parallel-size 4 --max-concurrency 4 --num-prompts 8 "
                      "--random-input-len 256 --random-output-len 16");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("1x l4 TP4 aws-ec2 g6.12xlarge us-east-1 on-demand $4.6016/h"),
            std::string::npos)
      << r.out;
}

// 31B does not fit one L4: plan says so and searches 4- and 8-chip
// instances, naming the tensor parallel size of each fleet.
TEST(MultichipCliTest, PlanSearchesTensorParallelSizesWhereOneChipDoesNotFit) {
  CliRun r = Servesim(
      "plan --devices l4 --model gemma-4-31b --max-model-len 8192 --rate 0.5 "
      "--num-prompts 8 --random-input-len 256 --random-output-len 16 --max-replicas 2 "
      "--slo 'ttft_p99<=60s' --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("\"group\": \"l4 TP4\""), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"tensor_parallel_size\": 4"), std::string::npos);
  EXPECT_NE(r.out.find("does not fit on l4"), std::string::npos);
  CliRun text = Servesim(
      "plan --devices l4 --model gemma-4-31b --max-model-len 8192 --rate 0.5 "
      "--num-prompts 8 --random-input-len 256 --random-output-len 16 --max-replicas 2 "
      "--slo 'ttft_p99<=60s'");
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("l4: none (cannot serve: gemma-4-31b does not fit"),
            std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find("Cheapest overall: 1 x l4 TP4 at $4.6016/h"), std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find(
                "not searched (one replica costs no less than the device's fleet chosen "
                "at a smaller tensor parallel size): l4 TP8"),
            std::string::npos)
      << text.out;
}

// --data-parallel-size 2: two engines behind vLLM's DP balancer, the same
// run as a fleet of two replicas routed vllm-dp, priced as one instance of
// DP x TP chips.
TEST(MultichipCliTest, DataParallelEnginesAreReplicasBehindTheVllmBalancer) {
  const std::string workload =
      "simulate --num-prompts 24 --request-rate 8 --random-input-len 512 "
      "--random-output-len 32 --date 20261201-093500";
  const std::string base = workload +
                           " --device l4 --model gemma-4-e2b --max-model-len 4096 "
                           "--tensor-parallel-size 2";
  CliRun dp = Servesim(base + " --data-parallel-size 2 --json");
  ASSERT_EQ(dp.exit_code, 0) << dp.err;
  const std::string config = ::testing::TempDir() + "/dp_fleet.textproto";
  {
    std::ofstream out(config);
    out << "fleet { router: \"vllm-dp\" replicas { count: 2 server { device: \"l4\" "
           "model: \"gemma-4-e2b\" max_model_len: 4096 tensor_parallel_size: 2 } } }\n";
  }
  CliRun fleet = Servesim(workload + " --config " + config + " --json");
  ASSERT_EQ(fleet.exit_code, 0) << fleet.err;
  auto metric = [](const std::string& json, const std::string& key) {
    const size_t at = json.find("\"" + key + "\": ");
    return at == std::string::npos ? std::string("absent")
                                   : json.substr(at, json.find('\n', at) - at);
  };
  for (const char* key : {"mean_ttft_ms", "p99_ttft_ms", "median_tpot_ms",
                          "output_throughput", "duration"}) {
    EXPECT_EQ(metric(dp.out, key), metric(fleet.out, key)) << key;
    EXPECT_NE(metric(dp.out, key), "absent") << key;
  }
  CliRun text = Servesim(base + " --data-parallel-size 2");
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("1x l4 TP2 DP2 aws-ec2 g6.12xlarge us-east-1 on-demand"),
            std::string::npos)
      << text.out;
}

TEST(MultichipCliTest, BadParallelSizesAreErrorsNamingTheFlag) {
  CliRun tp3 =
      Servesim(std::string("memory ") + kGemma31bOnL4 + " --tensor-parallel-size 3");
  EXPECT_EQ(tp3.exit_code, 2);
  EXPECT_NE(
      tp3.err.find("--tensor-parallel-size: 3 does not divide the 32 attention heads"),
      std::string::npos)
      << tp3.err;
  CliRun pp =
      Servesim(std::string("memory ") + kGemma31bOnL4 + " --pipeline-parallel-size 2");
  EXPECT_EQ(pp.exit_code, 2);
  EXPECT_NE(pp.err.find("--pipeline-parallel-size: 2 is not modelled yet"),
            std::string::npos)
      << pp.err;
}

}  // namespace
}  // namespace servesim::cli
