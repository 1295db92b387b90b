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

// simulate --json on a deployment that does not fit prints a JSON object
// with the answer (it printed nothing, where `memory --json` gives the plan).
TEST(MultichipCliTest, SimulateJsonSaysWhatWouldFitWhenNothingDoes) {
  CliRun r =
      Servesim(std::string("simulate ") + kGemma31bOnL4 + " --num-prompts 4 --json");
  ASSERT_EQ(r.exit_code, 4) << r.err;
  EXPECT_NE(r.out.find("\"fits\": false"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--tensor-parallel-size 4"), std::string::npos) << r.out;
}

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

// 26B A4B with --enable-expert-parallel on 2 and 4 MI300X: memory names the
// whole experts per rank, simulate runs, and the experiment config's
// enable_expert_parallel field gives the same run as the flag.
TEST(MultichipCliTest, ExpertParallelOnMi300xTp2AndTp4) {
  const std::string server =
      " --device mi300x --model gemma-4-26b-a4b --max-model-len 8192";
  for (const int tp : {2, 4}) {
    const std::string flags = server + " --tensor-parallel-size " + std::to_string(tp) +
                              " --enable-expert-parallel";
    CliRun mem = Servesim("memory" + flags);
    ASSERT_EQ(mem.exit_code, 0) << mem.err;
    EXPECT_NE(mem.out.find(
                  "experts           128 experts -> " + std::to_string(128 / tp) +
                  " whole experts per rank (expert parallel " + std::to_string(tp) + ")"),
              std::string::npos)
        << mem.out;
    CliRun json = Servesim("memory" + flags + " --json");
    ASSERT_EQ(json.exit_code, 0) << json.err;
    EXPECT_NE(json.out.find("\"experts_per_rank\": " + std::to_string(128 / tp)),
              std::string::npos)
        << json.out;
  }
  const std::string workload =
      "simulate --num-prompts 16 --request-rate 8 --random-input-len 512 "
      "--random-output-len 32 --date 20261201-093500 --json";
  CliRun flag =
      Servesim(workload + server + " --tensor-parallel-size 4 --enable-expert-parallel");
  ASSERT_EQ(flag.exit_code, 0) << flag.err;
  const std::string config = ::testing::TempDir() + "/ep_fleet.textproto";
  {
    std::ofstream out(config);
    out << "fleet { replicas { count: 1 server { device: \"mi300x\" model: "
           "\"gemma-4-26b-a4b\" max_model_len: 8192 tensor_parallel_size: 4 "
           "enable_expert_parallel: true } } }\n";
  }
  CliRun cfg = Servesim(workload + " --config " + config);
  ASSERT_EQ(cfg.exit_code, 0) << cfg.err;
  for (const char* key :
       {"\"mean_ttft_ms\": ", "\"median_tpot_ms\": ", "\"duration\": "}) {
    const size_t a = flag.out.find(key), b = cfg.out.find(key);
    ASSERT_NE(a, std::string::npos) << key;
    ASSERT_NE(b, std::string::npos) << key;
    EXPECT_EQ(flag.out.substr(a, flag.out.find('\n', a) - a),
              cfg.out.substr(b, cfg.out.find('\n', b) - b));
  }
  EXPECT_NE(flag.out.find("expert parallel size 4"), std::string::npos) << flag.out;
}

// MoE with DP 8: DP attention + EP experts, the eight engines in
// lock-step, priced as one MI300X x8 server; without
// --enable-expert-parallel a clear error.
TEST(MultichipCliTest, MoeDataParallelNeedsExpertParallelAndRunsInLockstep) {
  const std::string base =
      "simulate --device mi300x --model gemma-4-26b-a4b --max-model-len 8192 "
      "--data-parallel-size 8 --num-prompts 16 --request-rate 8 --random-input-len 512 "
      "--random-output-len 32 --date 20261201-093500";
  CliRun no_ep = Servesim(base);
  EXPECT_EQ(no_ep.exit_code, 2);
  EXPECT_NE(no_ep.err.find("is modelled with --enable-expert-parallel only"),
            std::string::npos)
      << no_ep.err;
  CliRun ep = Servesim(base + " --enable-expert-parallel");
  ASSERT_EQ(ep.exit_code, 0) << ep.err;
  EXPECT_NE(ep.out.find("1x mi300x DP8 digitalocean-amd-dev-cloud MI300X x8"),
            std::string::npos)
      << ep.out;
  CliRun mem = Servesim(
      "memory --device mi300x --model gemma-4-26b-a4b --max-model-len 8192 "
      "--data-parallel-size 2 --enable-expert-parallel");
  ASSERT_EQ(mem.exit_code, 0) << mem.err;
  EXPECT_NE(mem.out.find("128 experts -> 64 whole experts per rank (expert parallel 2)"),
            std::string::npos)
      << mem.out;
  EXPECT_NE(mem.out.find("60 DP expert all-gathers / reduce-scatters"), std::string::npos)
      << mem.out;
}

TEST(MultichipCliTest, BadParallelSizesAreErrorsNamingTheFlag) {
  CliRun tp3 =
      Servesim(std::string("memory ") + kGemma31bOnL4 + " --tensor-parallel-size 3");
  EXPECT_EQ(tp3.exit_code, 2);
  EXPECT_NE(
      tp3.err.find("--tensor-parallel-size: 3 does not divide the 32 attention heads"),
      std::string::npos)
      << tp3.err;
  CliRun pp = Servesim(std::string("memory ") + kGemma31bOnL4 +
                       " --tensor-parallel-size 2 --pipeline-parallel-size 5");
  EXPECT_EQ(pp.exit_code, 2);
  EXPECT_NE(pp.err.find("servesim memory: error: --pipeline-parallel-size: 5 x "
                        "--tensor-parallel-size 2 = 10 chips exceed the 8 l4 devices"),
            std::string::npos)
      << pp.err;
}

// Pipeline parallelism end to end: `memory` prints each stage's plan (the
// 31B stages at TP 2 x PP 2 each hold 14.95 GiB: half of 30 layers plus
// half the vocab of the tied embedding, which every Gemma 4 stage holds),
// `simulate` runs and prices the replica at a 4-chip instance.
TEST(MultichipCliTest, PipelineParallelMemoryAndSimulateOnL4) {
  // 14.95 GiB of weights a rank leave ~2 GiB of KV: a short context.
  const std::string b31 =
      "--device l4 --model gemma-4-31b --max-model-len 4096 --max-num-batched-tokens "
      "1024 --tensor-parallel-size 2 --pipeline-parallel-size 2";
  CliRun mem = Servesim("memory " + b31);
  ASSERT_EQ(mem.exit_code, 0) << mem.err << mem.out;
  EXPECT_NE(mem.out.find("pipeline parallel 2: stages of 2 chip(s) each"),
            std::string::npos)
      << mem.out;
  EXPECT_NE(mem.out.find("stage 0 (layers 0-29, embedding): weights 14.95 GiB"),
            std::string::npos)
      << mem.out;
  EXPECT_NE(mem.out.find("stage 1 (layers 30-59, LM head): weights 14.95 GiB"),
            std::string::npos)
      << mem.out;
  EXPECT_NE(mem.out.find("GPU KV cache size: "), std::string::npos) << mem.out;

  // 12B bf16 (22 GiB of weights) does not fit one L4; two stages of 24
  // layers do.
  const std::string b12 = "--device l4 --model gemma-4-12b --max-model-len 8192";
  CliRun one = Servesim("memory " + b12);
  EXPECT_EQ(one.exit_code, 4) << one.out;
  CliRun two = Servesim("memory " + b12 + " --pipeline-parallel-size 2 --json");
  ASSERT_EQ(two.exit_code, 0) << two.err << two.out;
  EXPECT_NE(two.out.find("\"pipeline_parallel_size\": 2"), std::string::npos) << two.out;
  EXPECT_NE(two.out.find("\"end_layer\": 48"), std::string::npos) << two.out;

  const std::string load =
      " --max-concurrency 4 --num-prompts 8 --random-input-len 256 "
      "--random-output-len 16";
  CliRun sim = Servesim("simulate " + b12 + " --pipeline-parallel-size 2" + load);
  ASSERT_EQ(sim.exit_code, 0) << sim.err;
  EXPECT_NE(sim.out.find("Successful requests:"), std::string::npos) << sim.out;
  CliRun sim4 = Servesim("simulate " + b31 + load);
  ASSERT_EQ(sim4.exit_code, 0) << sim4.err;
  EXPECT_NE(sim4.out.find("1x l4 TP2 PP2 aws-ec2 g6.12xlarge"), std::string::npos)
      << sim4.out;
}

// `plan` on L4s for `model` with a one-replica search, 256-token prompts
// and 16-token outputs, a loose SLO, and `extra` flags.
CliRun PlanOneL4Replica(const std::string& model, int max_model_len,
                        const std::string& extra) {
  return Servesim("plan --devices l4 --model " + model + " --max-model-len " +
                  std::to_string(max_model_len) +
                  " --random-input-len 256 --random-output-len 16 --max-replicas 1 "
                  "--slo 'ttft_p99<=60s' " +
                  extra);
}

// plan keeps a given --pipeline-parallel-size (PP is not searched) and
// prices TP x PP chips: 12B at PP 2 has no 2-chip L4 instance, so TP 1 is
// skipped and TP 2 x PP 2 is priced at the 4-chip g6.12xlarge.
TEST(MultichipCliTest, PlanKeepsAGivenPipelineParallelSize) {
  CliRun r = PlanOneL4Replica("gemma-4-12b", 8192,
                              "--pipeline-parallel-size 2 --request-rate 0.5 "
                              "--num-prompts 8 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("\"tensor_parallel_size\": 2"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("\"tensor_parallel_size\": 1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("g6.12xlarge"), std::string::npos) << r.out;
}

// plan prices a DP replica at TP x PP x DP chips and names the shape (a
// DP 4 L4 replica was billed as one chip, $0.7045/h, and chosen as the
// cheapest fleet at a quarter of its cost).
TEST(MultichipCliTest, PlanPricesDataParallelEnginesAsChips) {
  CliRun r = PlanOneL4Replica("gemma-4-e2b", 4096,
                              "--data-parallel-size 4 --request-rate 2 --num-prompts 16 "
                              "--no-progress");
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("Prices: l4 DP4 $4.6016/h"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("1 x l4 DP4"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("g6.12xlarge"), std::string::npos) << r.out;
  // A per-chip price of the user's is paid per chip.
  CliRun user = PlanOneL4Replica("gemma-4-e2b", 4096,
                                 "--data-parallel-size 4 --tensor-parallel-size 1 "
                                 "--request-rate 2 --num-prompts 16 "
                                 "--price-usd-per-hour l4=1 --no-progress");
  ASSERT_EQ(user.exit_code, 0) << user.err << user.out;
  EXPECT_NE(user.out.find("l4 DP4 $4/h"), std::string::npos) << user.out;
}

}  // namespace
}  // namespace servesim::cli
