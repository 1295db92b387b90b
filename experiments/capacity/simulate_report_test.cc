#include "experiments/capacity/simulate_report.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"

namespace servesim {
namespace {

using ::testing::HasSubstr;

// A run on `device` (default the TPU v5e, whose shipped profile has E2B
// cells; its fitted_range gives the prompt lengths and concurrencies) of
// `model` with the given prompt length and concurrency.
proto::ExperimentConfig V5e(const std::string& model, int input_len, int concurrency,
                            const std::string& device = "tpu-v5e") {
  proto::ExperimentConfig c;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(
      absl::StrCat(
          "server { max_model_len: 16384 device: \"", device, "\" model: \"", model,
          "\" } client { random_output_len: 8 seed: 3 random_input_len: ", input_len,
          " max_concurrency: ", concurrency, " num_prompts: ", 2 * concurrency, " }"),
      &c));
  return c;
}

std::vector<std::string> Warnings(const proto::ExperimentConfig& config) {
  absl::StatusOr<ExperimentRun> run = RunExperiment(config);
  EXPECT_TRUE(run.ok()) << run.status();
  if (!run.ok()) return {};
  return FitRangeWarnings(*run, run->engine->Result());
}

proto::FittedRange ShippedRange() {
  absl::StatusOr<ExperimentRun> run = RunExperiment(V5e("gemma-4-e2b", 128, 1));
  EXPECT_TRUE(run.ok()) << run.status();
  return run.ok() ? run->fleet.deployments[0].fitted_range : proto::FittedRange();
}

TEST(FitRangeWarningsTest, InsideTheFittedCellsSaysNothing) {
  const proto::FittedRange r = ShippedRange();
  ASSERT_GT(r.min_input_tokens(), 0);
  ASSERT_GT(r.max_input_tokens(), r.min_input_tokens());
  ASSERT_GT(r.max_concurrency(), 1);
  ASSERT_THAT(r.models(), ::testing::ElementsAre("gemma-4-e2b"));
  EXPECT_THAT(Warnings(V5e("gemma-4-e2b", r.min_input_tokens(), 1)),
              ::testing::IsEmpty());
  EXPECT_THAT(Warnings(V5e("gemma-4-e2b", r.max_input_tokens(), 4)),
              ::testing::IsEmpty());
  EXPECT_THAT(Warnings(V5e("gemma-4-e2b", r.min_input_tokens(), r.max_concurrency())),
              ::testing::IsEmpty());
}

TEST(FitRangeWarningsTest, EachWayOutIsNamedWithItsExtent) {
  const proto::FittedRange r = ShippedRange();
  // Longer prompts than any fitted cell: every request.
  const int longer = r.max_input_tokens() + 1000;
  std::vector<std::string> w = Warnings(V5e("gemma-4-e2b", longer, 2));
  ASSERT_EQ(w.size(), 1u);
  EXPECT_THAT(w[0], HasSubstr("outside the fit: the shipped tpu-v5e profile"));
  EXPECT_THAT(w[0], HasSubstr(absl::StrCat("prompts of ", r.min_input_tokens(), " to ",
                                           r.max_input_tokens(), " tokens")));
  EXPECT_THAT(w[0], HasSubstr(absl::StrCat("4 of this run's 4 requests (100.0%) have "
                                           "longer prompts (up to ",
                                           longer, " tokens)")));
  // Shorter.
  w = Warnings(V5e("gemma-4-e2b", r.min_input_tokens() / 2, 1));
  ASSERT_EQ(w.size(), 1u);
  EXPECT_THAT(w[0], HasSubstr(absl::StrCat("have shorter prompts (down to ",
                                           r.min_input_tokens() / 2, " tokens)")));
  // More sequences in a step than the most concurrent fitted cell.
  absl::StatusOr<ExperimentRun> run =
      RunExperiment(V5e("gemma-4-e2b", r.min_input_tokens(), 2 * r.max_concurrency()));
  ASSERT_TRUE(run.ok()) << run.status();
  const RunResult result = run->engine->Result();
  ASSERT_GT(result.batch_size[3], r.max_concurrency());
  w = FitRangeWarnings(*run, result);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_THAT(w[0],
              HasSubstr(absl::StrCat("fitted on cells of 1 to ", r.max_concurrency(),
                                     " concurrent requests; this run batches up to ",
                                     result.batch_size[3], " sequences")));
  // A model no fitted cell served (E4B does not load on the v5e; the v6e's
  // profile has E2B cells of 1,024-token prompts too).
  w = Warnings(V5e("gemma-4-e4b", 1024, 1, "tpu-v6e"));
  ASSERT_EQ(w.size(), 1u);
  EXPECT_THAT(w[0],
              HasSubstr("the shipped tpu-v6e profile (vllm-tpu-0.26.1rc1) was fitted "
                        "on gemma-4-e2b; this run serves gemma-4-e4b"));
}

// A profile from `calibrate` names the model by the bench file's model_id
// (a Hugging Face id): the same catalog entry as the served id.
TEST(FitRangeWarningsTest, ModelsCompareByCatalogEntry) {
  const proto::FittedRange r = ShippedRange();
  absl::StatusOr<ExperimentRun> run =
      RunExperiment(V5e("gemma-4-e2b", r.max_input_tokens(), 1));
  ASSERT_TRUE(run.ok()) << run.status();
  proto::FittedRange& range = run->fleet.deployments[0].fitted_range;
  range.clear_models();
  range.add_models("google/gemma-4-E2B-it");
  EXPECT_THAT(FitRangeWarnings(*run, run->engine->Result()), ::testing::IsEmpty());
  range.set_models(0, "google/gemma-4-E4B-it");
  const std::vector<std::string> w = FitRangeWarnings(*run, run->engine->Result());
  ASSERT_EQ(w.size(), 1u);
  EXPECT_THAT(w[0],
              HasSubstr("fitted on google/gemma-4-E4B-it; this run serves gemma-4-e2b"));
}

TEST(FitRangeWarningsTest, NoRangeNoProfileNoWarning) {
  // A profile written before the range was recorded checks nothing.
  absl::StatusOr<ExperimentRun> run = RunExperiment(V5e("gemma-4-e2b", 16, 2));
  ASSERT_TRUE(run.ok()) << run.status();
  ASSERT_FALSE(FitRangeWarnings(*run, run->engine->Result()).empty());
  run->fleet.deployments[0].fitted_range.Clear();
  EXPECT_THAT(FitRangeWarnings(*run, run->engine->Result()), ::testing::IsEmpty());
  // An uncalibrated deployment (priors; its own warning says so) has no fit.
  run->fleet.deployments[0].fitted_range.set_max_input_tokens(1);
  run->fleet.deployments[0].calibrated = false;
  EXPECT_THAT(FitRangeWarnings(*run, run->engine->Result()), ::testing::IsEmpty());
}

// The lines are in the provenance, so --json readers get them too.
TEST(FitRangeWarningsTest, InTheReportProvenance) {
  const proto::ExperimentConfig config = V5e("gemma-4-e2b", 16, 1);
  absl::StatusOr<ExperimentRun> run = RunExperiment(config);
  ASSERT_TRUE(run.ok()) << run.status();
  const ReportContext ctx = SimulateReportContext(config, *run, "20260101-000000");
  int found = 0;
  for (const std::string& p : ctx.provenance)
    found += p.rfind("outside the fit: ", 0) == 0;
  EXPECT_EQ(found, 1);
}

// The settings findings of `config`'s run (the lines saying "served with").
std::vector<std::string> SettingWarnings(const proto::ExperimentConfig& config) {
  std::vector<std::string> out;
  for (std::string& w : Warnings(config)) {
    if (w.find(" was fitted on runs served with ") != std::string::npos)
      out.push_back(std::move(w));
  }
  return out;
}

TEST(FitRangeWarningsTest, ServerSettingsNoFittedRunHadAreNamed) {
  // The v5e's run: bf16, no quantization, KV auto, TP 1, async on.
  proto::ExperimentConfig c = V5e("gemma-4-e2b", 128, 1);
  EXPECT_THAT(SettingWarnings(c), ::testing::IsEmpty());
  c.mutable_server()->set_async_scheduling(false);
  std::vector<std::string> w = SettingWarnings(c);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_THAT(w[0],
              HasSubstr("the shipped tpu-v5e profile (vllm-tpu-0.26.1rc1) was fitted "
                        "on runs served with async scheduling on; this run has off"));
  c = V5e("gemma-4-e2b", 128, 1);
  c.mutable_server()->set_tensor_parallel_size(2);
  w = SettingWarnings(c);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_THAT(w[0], HasSubstr("--tensor-parallel-size 1; this run has 2"));
  // The L4's main profile was fitted on W4A16 runs: a 16-bit L4 is not, and
  // the shipped profile fitted on a 16-bit L4 run is named.
  c = V5e("gemma-4-e2b", 128, 1, "l4");
  w = SettingWarnings(c);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_THAT(w[0],
              HasSubstr("served with --quantization w4a16-emb4; this run has none"));
  EXPECT_THAT(w[0], HasSubstr("fitted under this run's settings: --calibration "
                              "calibration/profiles/l4@vllm-0.28.0.textproto"));
  c.mutable_server()->set_quantization("w4a16-emb4");
  EXPECT_THAT(SettingWarnings(c), ::testing::IsEmpty());
  // fp8 KV on the MI300X, whose run kept 16-bit KV.
  c = V5e("gemma-4-e2b", 128, 1, "mi300x");
  c.mutable_server()->set_kv_cache_dtype("fp8");
  w = SettingWarnings(c);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_THAT(w[0], HasSubstr("--kv-cache-dtype auto; this run has fp8"));
  EXPECT_THAT(w[0], ::testing::Not(HasSubstr("--calibration")));
}

// A fleet whose replica groups share a profile but not their flags: each
// group's settings are checked (only the first group's were).
TEST(FitRangeWarningsTest, EveryReplicaGroupOfAFleetIsChecked) {
  proto::ExperimentConfig c;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(
      R"pb(
        fleet {
          replicas {
            server { device: "tpu-v5e" model: "gemma-4-e2b" max_model_len: 4096 }
            count: 1
          }
          replicas {
            server {
              device: "tpu-v5e"
              model: "gemma-4-e2b"
              max_model_len: 4096
              async_scheduling: false
            }
            count: 2
          }
        }
        client { num_prompts: 6 random_input_len: 128 random_output_len: 8 seed: 3 }
      )pb",
      &c));
  const std::vector<std::string> w = SettingWarnings(c);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_THAT(w[0], HasSubstr("async scheduling on; this run has off"));
}

TEST(FitRangeWarningsTest, AProfileWithoutServerSettingsChecksNone) {
  proto::ExperimentConfig c = V5e("gemma-4-e2b", 128, 1);
  c.mutable_server()->set_async_scheduling(false);
  absl::StatusOr<ExperimentRun> run = RunExperiment(c);
  ASSERT_TRUE(run.ok()) << run.status();
  ASSERT_FALSE(FitRangeWarnings(*run, run->engine->Result()).empty());
  run->fleet.deployments[0].fitted_servers.clear();
  EXPECT_THAT(FitRangeWarnings(*run, run->engine->Result()), ::testing::IsEmpty());
}

// Every prediction says under which server settings its profile was fitted.
TEST(FitRangeWarningsTest, ProvenanceNamesTheFittedRunsSettings) {
  const proto::ExperimentConfig config = V5e("gemma-4-e2b", 128, 1);
  absl::StatusOr<ExperimentRun> run = RunExperiment(config);
  ASSERT_TRUE(run.ok()) << run.status();
  const ReportContext ctx = SimulateReportContext(config, *run, "20260101-000000");
  std::vector<std::string> lines;
  for (const std::string& p : ctx.provenance) {
    if (p.find(" fitted under: ") != std::string::npos) lines.push_back(p);
  }
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_THAT(lines[0], HasSubstr("calibration/profiles/tpu-v5e.textproto"));
  EXPECT_THAT(lines[0], HasSubstr("fitted under: run tpu-v5e-e2b-2026-08-06: vLLM "));
  EXPECT_THAT(lines[0],
              HasSubstr("--dtype bf16 --quantization none --kv-cache-dtype auto "
                        "--tensor-parallel-size 1, async scheduling on"));
  EXPECT_THAT(lines[0], HasSubstr("--max-num-batched-tokens 4096"));
}

}  // namespace
}  // namespace servesim
