// Sweep and plan through the real simulator (SimulatorPointRunner).
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "experiments/capacity/plan.h"
#include "experiments/capacity/sweep.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "hwmodels/catalog.h"

namespace servesim {
namespace {

namespace fs = std::filesystem;

std::string ReadFile(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// 4 devices x 10 concurrencies x 13 input lengths = 520 cheap points (the
// MI300X is left out: its 1.7M-block KV pool makes each point slower).
TEST(SimulatorSweepTest, FiveHundredPointsTwoJobsByteIdenticalToOneAndResumable) {
  proto::SweepGrid g;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(
      R"pb(
        name: "sim500"
        base {
          server { model: "gemma-4-e2b" max_model_len: 4096 }
          client { num_prompts: 8 random_output_len: 8 }
        }
        axes {
          path: "server.device"
          values: [ "t4", "l4", "tpu-v5e", "tpu-v6e" ]
        }
        axes {
          path: "client.max_concurrency"
          values: [ "1", "2", "3", "4", "5", "6", "7", "8", "9", "10" ]
        }
        axes {
          path: "client.random_input_len"
          values: [
            "16",
            "32",
            "48",
            "64",
            "96",
            "128",
            "160",
            "192",
            "256",
            "320",
            "384",
            "512",
            "1024"
          ]
        }
      )pb",
      &g));
  const fs::path base =
      fs::temp_directory_path() / absl::StrCat("servesim_simsweep_", getpid());
  fs::remove_all(base);
  SweepOptions o1, o2;
  o1.progress = o2.progress = 0;
  o2.jobs = 2;
  auto s1 = RunSweep(g, (base / "j1").string(), SimulatorPointRunner(), o1);
  ASSERT_TRUE(s1.ok()) << s1.status();
  EXPECT_EQ(s1->num_points, 520);
  EXPECT_EQ(s1->num_failed, 0);
  // Stopped after 150 points with 2 jobs, then resumed with 2 jobs.
  o2.stop_after = 150;
  auto part = RunSweep(g, (base / "j2").string(), SimulatorPointRunner(), o2);
  ASSERT_TRUE(part.ok()) << part.status();
  EXPECT_FALSE(part->complete);
  o2.stop_after = -1;
  auto s2 = RunSweep(g, (base / "j2").string(), SimulatorPointRunner(), o2);
  ASSERT_TRUE(s2.ok()) << s2.status();
  EXPECT_TRUE(s2->complete);
  EXPECT_EQ(s2->num_resumed, part->num_run);
  EXPECT_EQ(s2->num_resumed + s2->num_run, 520);
  for (const char* f : {"results.jsonl", "results.csv"}) {
    const std::string a = ReadFile(base / "j1" / f);
    EXPECT_GT(a.size(), 520u * 100);
    EXPECT_EQ(a, ReadFile(base / "j2" / f)) << f;
  }
  fs::remove_all(base);
}

// plan on the Azure conversation trace (first 600 requests, timeline
// rescaled to 12 req/s): the chosen fleet's simulation meets the SLO and the
// fleet with one replica fewer misses it, re-simulated here independently.
TEST(SimulatorPlanTest, AzureConversationPlanMeetsAndOneFewerMisses) {
  const PointRunner runner = SimulatorPointRunner();
  PlanOptions o;
  o.base.mutable_server()->set_model("gemma-4-e2b");
  o.base.mutable_server()->set_max_model_len(16384);
  o.base.mutable_client()->set_trace(SERVESIM_DATA_DIR
                                     "/traces/AzureLLMInferenceTrace_conv.csv.gz");
  o.base.mutable_client()->set_num_prompts(600);
  o.base.mutable_client()->set_request_rate(12);
  o.base.mutable_fleet()->set_router("least-outstanding");
  for (const char* id : {"t4", "l4"}) {
    auto dev = FindDevice(id);
    ASSERT_TRUE(dev.ok()) << dev.status();
    PlanDevice d;
    d.device = id;
    auto offer = SelectOffer(OffersFromDevice(*dev), id, "on-demand");
    ASSERT_TRUE(offer.ok()) << offer.status();
    d.offer = *offer;
    o.devices.push_back(d);
  }
  auto slo = ParseSlo("ttft_p99<=1s,tpot_p99<=50ms", runner.metric_names);
  ASSERT_TRUE(slo.ok()) << slo.status();
  o.slo = *slo;
  o.max_replicas = 8;
  o.jobs = 2;
  auto plan = RunPlan(o, runner);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_GE(plan->best_group, 0) << FormatPlanText(o, *plan);
  int multi = 0;  // chosen fleets of 2+ replicas (the one-fewer check bites)
  for (const PlanGroup& g : plan->groups) {
    if (g.chosen < 0) continue;
    const PlanCandidate& chosen = plan->candidates[g.chosen];
    auto again = runner.run(FleetExperiment(o.base, chosen.fleet));
    ASSERT_TRUE(again.ok()) << again.status();
    for (const SloTerm& t : o.slo) {
      const size_t k =
          std::find(runner.metric_names.begin(), runner.metric_names.end(), t.metric) -
          runner.metric_names.begin();
      EXPECT_TRUE(t.Meets((*again)[k])) << chosen.label << " " << t.text;
    }
    if (chosen.num_replicas < 2) continue;
    ++multi;
    ASSERT_FALSE(g.one_fewer.empty()) << chosen.label;
    for (int f : g.one_fewer) {
      auto fewer = runner.run(FleetExperiment(o.base, plan->candidates[f].fleet));
      ASSERT_TRUE(fewer.ok()) << fewer.status();
      bool all_met = true;
      for (const SloTerm& t : o.slo) {
        const size_t k =
            std::find(runner.metric_names.begin(), runner.metric_names.end(), t.metric) -
            runner.metric_names.begin();
        all_met = all_met && t.Meets((*fewer)[k]);
      }
      EXPECT_FALSE(all_met) << plan->candidates[f].label << " should miss";
    }
  }
  EXPECT_GE(multi, 1) << "no chosen fleet needs 2+ replicas; raise the rate\n"
                      << FormatPlanText(o, *plan);
}

}  // namespace
}  // namespace servesim
