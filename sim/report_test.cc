#include "sim/report.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "sim/analytic_step_model.h"
#include "sim/random_source.h"

namespace servesim {
namespace {

struct Outputs {
  std::string json, csv, trace, summary;
};

Outputs RunOnce(uint64_t seed) {
  AnalyticStepParams p;
  p.host_base_ns = 700'000;
  p.device_base_ns = 4'000'000;
  p.device_per_token_ns = 7'000;
  p.device_per_context_token_ns = 3;
  AnalyticStepModel model(p);
  std::vector<ReplicaConfig> reps(2);
  for (auto& r : reps) {
    r.scheduler.max_num_batched_tokens = 1024;
    r.scheduler.max_num_seqs = 32;
    r.scheduler.max_model_len = 4096;
    r.kv_cache.num_blocks = 400;
    r.kv_cache.groups = {KvGroupSpec{16, 0, 1}, KvGroupSpec{32, 256, 4}};
    r.step_model = &model;
  }
  ClientConfig cc;
  cc.request_rate = 30;
  cc.burstiness = 0.7;
  cc.max_concurrency = 40;
  cc.seed = seed;
  EngineOptions opts;
  opts.keep_request_itls = true;
  auto e = Engine::Create(std::move(reps), std::make_unique<LeastOutstandingRouter>(), cc,
                          opts)
               .value();
  RandomDatasetConfig dc;
  dc.num_prompts = 300;
  dc.input_len = 600;
  dc.output_len = 50;
  dc.range_ratio = 0.9;
  dc.seed = seed;
  auto src = RandomSource::Create(dc).value();
  ChromeTraceRecorder trace;
  EXPECT_TRUE(e->Run(src.get(), &trace).ok());
  ReportContext ctx;
  ctx.model_id = "test-model";
  ctx.request_rate = cc.request_rate;
  ctx.burstiness = cc.burstiness;
  ctx.max_concurrency = cc.max_concurrency;
  ctx.provenance = {e->Describe(), model.Describe(), src->Describe()};
  const RunResult r = e->Result();
  return Outputs{
      BenchResultJson(r, ctx, e->records(), e->request_itls(), /*detailed=*/true),
      RequestsCsv(e->records()), trace.Finish(e->num_replicas()), SummaryText(r, ctx)};
}

TEST(ReportTest, SameConfigTwiceGivesByteIdenticalOutputs) {
  const Outputs a = RunOnce(42), b = RunOnce(42), c = RunOnce(43);
  EXPECT_EQ(a.json, b.json);
  EXPECT_EQ(a.csv, b.csv);
  EXPECT_EQ(a.trace, b.trace);
  EXPECT_EQ(a.summary, b.summary);
  EXPECT_NE(a.json, c.json);  // the seed matters
}

TEST(ReportTest, JsonHasTheVllmSaveResultKeys) {
  const Outputs a = RunOnce(1);
  for (const char* key : {"date",
                          "backend",
                          "model_id",
                          "num_prompts",
                          "request_rate",
                          "burstiness",
                          "max_concurrency",
                          "duration",
                          "completed",
                          "failed",
                          "total_input_tokens",
                          "total_output_tokens",
                          "request_throughput",
                          "output_throughput",
                          "total_token_throughput",
                          "mean_ttft_ms",
                          "median_ttft_ms",
                          "std_ttft_ms",
                          "p90_ttft_ms",
                          "p99_ttft_ms",
                          "mean_tpot_ms",
                          "p99_tpot_ms",
                          "mean_itl_ms",
                          "p99_itl_ms",
                          "mean_e2el_ms",
                          "p99_e2el_ms",
                          "input_lens",
                          "output_lens",
                          "ttfts",
                          "itls",
                          "start_times",
                          "errors",
                          "servesim",
                          "preemptions",
                          "rejected",
                          "kv_occupancy",
                          "provenance"}) {
    EXPECT_NE(a.json.find(std::string("\"") + key + "\":"), std::string::npos) << key;
  }
  EXPECT_NE(a.json.find("\"backend\": \"vllm\""), std::string::npos);
  EXPECT_NE(a.json.find("\"num_prompts\": 300"), std::string::npos);
}

TEST(ReportTest, CsvHasOneRowPerRequestAndTraceIsOneJsonDocument) {
  const Outputs a = RunOnce(2);
  size_t lines = 0;
  for (char ch : a.csv) lines += ch == '\n' ? 1 : 0;
  EXPECT_EQ(lines, 301u);  // header + 300 requests
  EXPECT_EQ(a.trace.rfind("{\"displayTimeUnit\"", 0), 0u);
  EXPECT_NE(a.trace.find("\"ph\":\"X\""), std::string::npos);
  EXPECT_NE(a.trace.find("\"ph\":\"b\""), std::string::npos);
  EXPECT_EQ(a.trace.find(",]"), std::string::npos);
  EXPECT_NE(a.summary.find("Serving Benchmark Result"), std::string::npos);
}

TEST(ReportTest, PerReplicaRequestSharesAreInTheSummaryAndJson) {
  std::vector<RequestRecord> records(5);
  const int32_t replica[] = {0, 1, 1, -1, 1};  // -1: never routed
  for (size_t i = 0; i < records.size(); ++i) records[i].replica = replica[i];
  const std::vector<int64_t> per = RequestsPerReplica(records, 3);
  EXPECT_EQ(per, (std::vector<int64_t>{1, 3, 0}));
  ReportContext ctx;
  ctx.replica_shares = {{"l4/m", 1}, {"l4/m", 3}, {"t4/m", 0}};
  const RunResult r;
  const std::string summary = SummaryText(r, ctx);
  EXPECT_NE(summary.find("Requests on replica 1 (l4/m):"), std::string::npos) << summary;
  EXPECT_NE(summary.find("3          (75.0%)"), std::string::npos) << summary;
  const std::string json = BenchResultJson(r, ctx, {}, {}, false, 0);
  EXPECT_NE(json.find("\"replicas\":[{\"replica\":0,\"description\":\"l4/m\","
                      "\"requests\":1,\"share\":0.25}"),
            std::string::npos)
      << json;
}

}  // namespace
}  // namespace servesim
