#include "calibration/validation.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "calibration/bench_import.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"

namespace servesim {
namespace {

const std::string kRoot = SERVESIM_SOURCE_DIR;

servesim::proto::FitConfig Config() {
  auto c = LoadFitConfig(kRoot + "/" + kDefaultFitConfig);
  EXPECT_TRUE(c.ok()) << c.status();
  return *c;
}

std::vector<servesim::proto::MeasurementSet> ShippedSets() {
  auto db = MeasurementDb::LoadDir(kRoot + "/calibration/data");
  EXPECT_TRUE(db.ok()) << db.status();
  servesim::proto::MeasurementSet set;
  for (const auto& r : db->runs()) *set.add_runs() = r;
  for (const auto& m : db->measurements()) *set.add_measurements() = m;
  return {set};
}

const ValidatedPoint* Find(const ValidationReport& r, const std::string& id) {
  for (const auto& p : r.points) {
    if (p.id == id) return &p;
  }
  return nullptr;
}

ValidationReport RunFor(const std::vector<servesim::proto::MeasurementSet>& sets,
                        const std::string& device, bool skip_loo = false) {
  auto db = MeasurementDb::FromSets(sets, "test");
  EXPECT_TRUE(db.ok()) << db.status();
  ValidateOptions o;
  o.device = device;
  o.skip_loo = skip_loo;
  o.jobs = 2;  // the refits on two threads: the report is the same for any count
  auto r = RunValidation(*db, Config(), o);
  EXPECT_TRUE(r.ok()) << r.status();
  return *r;
}

TEST(ValidationTest, HeldOutPredictionDoesNotSeeThePointsOwnMeasurement) {
  auto sets = ShippedSets();
  const std::string id = "tpu-v5e/output_throughput/in1024/c16";
  const ValidationReport base = RunFor(sets, "tpu-v5e");
  for (auto& m : *sets[0].mutable_measurements()) {
    if (m.id() == id) m.set_value(m.value() * 1.5);
  }
  const ValidationReport changed = RunFor(sets, "tpu-v5e");
  const ValidatedPoint* a = Find(base, id);
  const ValidatedPoint* b = Find(changed, id);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_TRUE(a->refit_without_cell);
  EXPECT_EQ(a->held_out, b->held_out);    // held out: blind to its own value
  EXPECT_NE(a->predicted, b->predicted);  // in-sample: sees it
  // The per-dollar row of the same cell is held out with it.
  const std::string row = "tpu-v5e/tok_s_per_usd_hour/in1024/c16";
  EXPECT_EQ(Find(base, row)->held_out, Find(changed, row)->held_out);
}

// A block pass refits without every point of the block: changing all of
// the 16-stream cell's measurements (every metric) leaves their
// leave-one-concurrency-out predictions bit-identical, while a point of
// another block, whose refit does see the 16-stream cell, moves. Fails as
// soon as any point of the block leaks into its own refit.
TEST(ValidationTest, BlockHeldOutRefitDoesNotSeeTheBlock) {
  auto sets = ShippedSets();
  const ValidationReport base = RunFor(sets, "tpu-v6e");
  int changed_points = 0;
  for (auto& m : *sets[0].mutable_measurements()) {
    if (m.run() == "tpu-v6e-e2b-2026-08-25" && m.client().max_concurrency() == 16) {
      m.set_value(m.value() * 1.5);
      ++changed_points;
    }
  }
  ASSERT_GE(changed_points, 7);
  const ValidationReport changed = RunFor(sets, "tpu-v6e");
  int in_block = 0;
  for (const ValidatedPoint& a : base.points) {
    if (a.device != "tpu-v6e") continue;
    const ValidatedPoint* b = Find(changed, a.id);
    ASSERT_NE(b, nullptr);
    auto ia = a.block_held_out.find(kLeaveOneConcurrencyOut);
    auto ib = b->block_held_out.find(kLeaveOneConcurrencyOut);
    ASSERT_EQ(ia == a.block_held_out.end(), ib == b->block_held_out.end()) << a.id;
    if (ia == a.block_held_out.end()) continue;
    if (a.id.find("/c16") != std::string::npos) {
      ++in_block;
      EXPECT_EQ(ia->second, ib->second) << a.id;
    }
  }
  EXPECT_GE(in_block, 7);
  const ValidatedPoint* other = Find(base, "tpu-v6e/output_throughput/in1024/c4");
  ASSERT_NE(other, nullptr);
  EXPECT_NE(other->block_held_out.at(kLeaveOneConcurrencyOut),
            Find(changed, other->id)->block_held_out.at(kLeaveOneConcurrencyOut));
  // One length only: leave-one-input-length-out has nothing to hold out.
  bool saw_pass = false;
  for (const BlockPass& bp : base.blocks) {
    if (bp.device != "tpu-v6e") continue;
    if (bp.pass == std::string(kLeaveOneInputLengthOut)) {
      EXPECT_FALSE(bp.applicable);
    }
    if (bp.pass == std::string(kLeaveOneConcurrencyOut)) {
      saw_pass = true;
      EXPECT_TRUE(bp.applicable);
      EXPECT_EQ(bp.blocks.size(), 7u);
    }
  }
  EXPECT_TRUE(saw_pass);
}

// Write-up A's runs alone (T4 and L4 through one SageMaker client, fitted
// jointly). Leave-one-device-out of the T4 takes the shared client cost
// from a refit of the L4 alone: scaling every T4 measurement leaves the
// T4's device-out predictions bit-identical, while the L4's, whose shared
// value now comes from a T4-only refit, move. Fails when the joint fit's
// value (which saw the T4) leaks into the T4's device-out pass.
TEST(ValidationTest, DeviceOutTakesTheSharedClientCostFromTheOtherMembersAlone) {
  std::ifstream in(kRoot + "/calibration/data/writeup_a_t4_l4.textproto");
  std::stringstream text;
  text << in.rdbuf();
  servesim::proto::MeasurementSet set;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(text.str(), &set));
  auto device_out = [](const ValidationReport& r, const std::string& device) {
    std::map<std::string, double> out;
    for (const ValidatedPoint& p : r.points) {
      auto it = p.block_held_out.find(kLeaveOneDeviceOut);
      if (p.device == device && it != p.block_held_out.end()) out[p.id] = it->second;
    }
    return out;
  };
  const ValidationReport base = RunFor({set}, "");
  bool noted = false;
  for (const BlockPass& bp : base.blocks) {
    if (bp.device == "t4" && bp.pass == std::string(kLeaveOneDeviceOut)) {
      EXPECT_TRUE(bp.applicable) << bp.note;
      noted = bp.note.find("parallel_call_extra_s") != std::string::npos &&
              bp.note.find("shared: refit on l4") != std::string::npos;
    }
  }
  EXPECT_TRUE(noted);
  int scaled = 0;
  for (auto& m : *set.mutable_measurements()) {
    if (m.id().rfind("t4/", 0) == 0) {
      m.set_value(m.value() * 1.5);
      ++scaled;
    }
  }
  ASSERT_GE(scaled, 6);
  const ValidationReport changed = RunFor({set}, "");
  const auto t4_base = device_out(base, "t4");
  ASSERT_GE(t4_base.size(), 6u);
  EXPECT_EQ(t4_base, device_out(changed, "t4"));
  EXPECT_NE(device_out(base, "l4"), device_out(changed, "l4"));
}

// The physics rule: the v5e 4 and 16 x 8,192 cells (mean TTFT below what
// fresh prompts allow) are excluded from every fit and grade, every metric
// of them, and the report says so; 1 and 64 x 8,192 are kept.
TEST(ValidationTest, PhysicallyImpossibleCellsAreExcludedAndNamed) {
  const ValidationReport r = RunFor(ShippedSets(), "tpu-v5e", /*skip_loo=*/true);
  for (const char* id :
       {"tpu-v5e/output_throughput/in8192/c4", "tpu-v5e/mean_ttft_ms/in8192/c16",
        "tpu-v5e/median_tpot_ms/in8192/c16"}) {
    const ValidatedPoint* p = Find(r, id);
    ASSERT_NE(p, nullptr) << id;
    EXPECT_NE(p->excluded.find("physically impossible"), std::string::npos) << id;
    EXPECT_FALSE(p->fitted) << id;
    EXPECT_FALSE(p->checked) << id;
  }
  for (const char* id :
       {"tpu-v5e/output_throughput/in8192/c1", "tpu-v5e/output_throughput/in8192/c64"}) {
    const ValidatedPoint* p = Find(r, id);
    ASSERT_NE(p, nullptr) << id;
    EXPECT_EQ(p->excluded, "") << id;
    EXPECT_TRUE(p->fitted) << id;
  }
  EXPECT_NE(FormatReportText(r).find("excluded by the physics and warm-up rules"),
            std::string::npos);
  // The warm-up rule: v5e 1 x 128 (mean 45.2 ms, median 15.9, p99 234) loses
  // its mean and p99 TTFT, keeps its median and throughput.
  for (const char* id :
       {"tpu-v5e/mean_ttft_ms/in128/c1", "tpu-v5e/p99_ttft_ms/in128/c1"}) {
    const ValidatedPoint* p = Find(r, id);
    ASSERT_NE(p, nullptr) << id;
    EXPECT_NE(p->excluded.find("warm-up rule"), std::string::npos) << id;
    EXPECT_FALSE(p->fitted) << id;
    EXPECT_FALSE(p->checked) << id;
  }
  for (const char* id :
       {"tpu-v5e/median_ttft_ms/in128/c1", "tpu-v5e/output_throughput/in128/c1"}) {
    const ValidatedPoint* p = Find(r, id);
    ASSERT_NE(p, nullptr) << id;
    EXPECT_EQ(p->excluded, "") << id;
    EXPECT_TRUE(p->fitted) << id;
  }
}

const GroupReport* FindGroup(const ValidationReport& r, const std::string& device) {
  for (const auto& g : r.groups) {
    if (g.device == device && !g.joint_with.empty()) return &g;
  }
  return nullptr;
}

// T4 and L4 (write-up A) share the measuring client: one value of its
// parallel-batch call cost for both, the same whether one device or all are
// validated, and a held-out cell is blind to its own value even though the
// other device's cells stay in the refit.
TEST(ValidationTest, JointFitSharesOneClientValueAcrossDevices) {
  auto sets = ShippedSets();
  const ValidationReport t4 = RunFor(sets, "t4", /*skip_loo=*/true);
  const ValidationReport l4 = RunFor(sets, "l4");
  const GroupReport* a = FindGroup(t4, "t4");
  const GroupReport* b = FindGroup(l4, "l4");
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  ASSERT_EQ(a->shared_parameters, std::vector<std::string>{"parallel_call_extra_s"});
  const double va = a->fitted.Get("parallel_call_extra_s");
  EXPECT_EQ(va, b->fitted.Get("parallel_call_extra_s"));
  EXPECT_NE(va, 0.0);  // moved from its prior by the data
  // Each device keeps its own kernel efficiency.
  EXPECT_NE(a->fitted.Get("quant_kernel_eff"), b->fitted.Get("quant_kernel_eff"));
  // Only the requested device is reported.
  for (const auto& g : t4.groups) EXPECT_EQ(g.device, "t4");

  const std::string id = "l4/output_throughput_16par/e2b";
  for (auto& m : *sets[0].mutable_measurements()) {
    if (m.id() == id) m.set_value(m.value() * 1.5);
  }
  const ValidationReport changed = RunFor(sets, "l4");
  EXPECT_EQ(Find(l4, id)->held_out, Find(changed, id)->held_out);
  EXPECT_NE(Find(l4, id)->predicted, Find(changed, id)->predicted);
}

// Broken joint fits are errors that name the entry, never ignored.
TEST(ValidationTest, FitConfigRejectsBrokenJointFits) {
  auto check = [](const std::string& extra) {
    servesim::proto::FitConfig c = Config();
    servesim::proto::FitConfig add;
    EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(extra, &add)) << extra;
    c.clear_joint_fits();
    for (const auto& j : add.joint_fits()) *c.add_joint_fits() = j;
    return CheckJointFits(c, "fit.textproto");
  };
  const std::string t4 =
      R"(members { device: "t4" software_build: "vllm-0.30.0-sagemaker-turing-patch" })";
  const std::string l4 =
      R"(members { device: "l4" software_build: "vllm-0.30.0-sagemaker" })";
  const std::string shared = R"(shared_parameters: "parallel_call_extra_s")";
  EXPECT_TRUE(check("joint_fits { " + t4 + l4 + shared + " }").ok());
  struct Bad {
    std::string text, says;
  };
  for (const Bad& b : std::vector<Bad>{
           {absl::StrCat("joint_fits { ", t4, shared, " }"), "at least 2"},
           {absl::StrCat("joint_fits { ", t4, l4, " }"), "no shared_parameters"},
           {absl::StrCat("joint_fits { ", t4,
                         R"(members { device: "l4" software_build: "vllm-0.30-typo" })",
                         shared, " }"),
            "no `fits` entry"},
           {absl::StrCat("joint_fits { ", t4, t4, shared, " }"), "listed twice"},
           {absl::StrCat("joint_fits { ", t4, l4,
                         R"(shared_parameters: "bw_eff_weights")", " }"),
            "not a free parameter"}}) {
    const absl::Status st = check(b.text);
    EXPECT_FALSE(st.ok()) << b.text;
    EXPECT_NE(st.message().find(b.says), std::string::npos) << st.message();
    EXPECT_NE(st.message().find("joint_fits[0]"), std::string::npos) << st.message();
  }
}

TEST(ValidationTest, FitConfigRejectsBrokenKnownGaps) {
  auto check = [](const std::string& text) {
    servesim::proto::FitConfig c;
    EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &c)) << text;
    return CheckKnownGaps(c, "fit.textproto");
  };
  const std::string why = R"(missing: "a term" settle_with: "a run")";
  EXPECT_TRUE(check(R"(known_gaps { device: "t4" points: "t4/x" )" + why + " }").ok());
  struct Bad {
    std::string text, says;
  };
  for (const Bad& b : std::vector<Bad>{
           {R"(known_gaps { points: "t4/x" )" + why + " }", "no device"},
           {R"(known_gaps { device: "t4" )" + why + " }",
            "set passes, metrics or points"},
           {R"(known_gaps { device: "t4" passes: "leave_one_cell_out" )" + why + " }",
            "'leave_one_cell_out' is not a block pass"},
           {R"(known_gaps { device: "t4" points: "t4/x" settle_with: "a run" })",
            "missing: empty"},
           {R"(known_gaps { device: "t4" points: "t4/x" missing: "a term" })",
            "settle_with: empty"}}) {
    const absl::Status st = check(b.text);
    EXPECT_FALSE(st.ok()) << b.text;
    EXPECT_NE(st.message().find(b.says), std::string::npos) << st.message();
    EXPECT_NE(st.message().find("fit.textproto: known_gaps[0]"), std::string::npos)
        << st.message();
  }
}

// A misspelt name in a fit config is an error naming the entry and what is
// allowed: it used to drop its checks (an unknown pass, metric, statistic
// or device) or fit a device on its priors (a device typo, a missing
// entry), without a word. The shipped config passes.
TEST(ValidationTest, FitConfigRejectsMisspeltFitsAndTargets) {
  auto check = [](const std::string& text) {
    servesim::proto::FitConfig c;
    EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &c)) << text;
    return CheckFitSpecs(c, "fit.textproto");
  };
  const std::string fit = R"(fits { device: "t4" free_parameters: "bw_eff_weights" } )";
  EXPECT_TRUE(check(fit).ok());
  EXPECT_TRUE(LoadNamedFitConfig(kDefaultFitConfig).ok());
  struct Bad {
    std::string text, says;
  };
  for (const Bad& b : std::vector<Bad>{
           {"", "fit.textproto: no fits entry"},
           {R"(fits { device: "t5" })", "fits[0]: --device: unknown device 't5'"},
           {fit + fit, "fits[1]: t4 /  has an earlier fits entry"},
           {R"(fits { device: "t4" free_parameters: "bw_eff_weight" })",
            "fits[0] (t4 / ): free parameter 'bw_eff_weight' is not a parameter; "
            "allowed: "
            "api_overhead_ms, parallel_call_extra_s, bw_eff_weights"},
           {R"(fits { device: "t4" free_parameters: "bw_eff_weights" )"
            R"(free_parameters: "bw_eff_weights" })",
            "'bw_eff_weights' is listed twice"},
           {R"(fits { device: "t4" huber_delta: -1 })", "fits[0]: huber_delta -1"},
           {fit + R"(block_targets { passes: "leave_one_x_out" })",
            "block_targets[0]: passes: 'leave_one_x_out' is not a block pass"},
           {fit + R"(block_targets { passes: "leave_one_model_out" metrics: "ttft" })",
            "block_targets[0]: metrics: 'ttft' is not a metric (allowed: "
            "output_throughput"},
           {fit + R"(block_targets { passes: "leave_one_model_out" )"
                  R"(limits { statistic: "median" limit_pct: 10 } })",
            "limits[0]: statistic 'median' (allowed: MAPE, worst)"},
           {fit + R"(block_targets { passes: "leave_one_model_out" )"
                  R"(limits { statistic: "MAPE" limit_pct: nan } })",
            "limits[0]: limit_pct nan is out of range"},
           {fit + R"(point_set_targets { device: "t4" metric: "banana" limit_pct: 5 })",
            "point_set_targets[0]: metric 'banana' is not a metric"},
           {fit + R"(point_set_targets { device: "t9" metric: "decode_rate" )"
                  R"(limit_pct: 5 })",
            "point_set_targets[0]: --device: unknown device 't9'"}}) {
    const absl::Status st = check(b.text);
    EXPECT_FALSE(st.ok()) << b.text;
    EXPECT_NE(st.message().find(b.says), std::string::npos) << st.message();
  }
}

// Every miss lands under the first known gap that matches it or in the
// undiagnosed list; a gap whose graded checks all pass, or a listed point
// that passes, is stale; a gap that matches no graded check (another build,
// a pass that did not run) is not; a passing check is never filed.
ValidationReport GapFixture() {
  ValidationReport r;
  auto point = [&r](const std::string& id, const std::string& device,
                    const std::string& metric, bool pass) {
    ValidatedPoint v;
    v.id = id;
    v.device = device;
    v.software_build = "b";
    v.metric = metric;
    v.checked = true;
    v.pass = pass;
    r.points.push_back(v);
  };
  point("dev/median_tpot_ms/c1", "dev", "median_tpot_ms", false);
  point("dev/median_tpot_ms/c4", "dev", "median_tpot_ms", true);
  point("dev/output_throughput/c1", "dev", "output_throughput", false);
  point("dev/output_throughput/c4", "dev", "output_throughput", true);
  point("dev/decode_rate/e2b", "dev", "decode_rate", false);
  point("other/decode_rate", "other", "decode_rate", false);
  auto block = [&r](const std::string& pass, const std::string& metric, bool ok) {
    AggregateCheck a;
    a.name = absl::StrCat("dev / b ", pass, " ", metric, " MAPE");
    a.id = a.name;
    a.device = "dev";
    a.software_build = "b";
    a.pass_name = pass;
    a.metric = metric;
    a.pass = ok;
    r.aggregates.push_back(a);
  };
  block(kLeaveOneConcurrencyOut, "median_ttft_ms", false);
  block(kLeaveOneInputLengthOut, "median_ttft_ms", false);
  block(kLeaveOneDeviceOut, "output_throughput", false);
  block(kLeaveOneConcurrencyOut, "output_throughput", true);
  block(kLeaveOneModelOut, "output_throughput", true);
  AggregateCheck target;  // a point-set target
  target.name = "dev grid (3 cells): held-out MAE";
  target.id = "dev grid";
  target.device = "dev";
  target.metric = "output_throughput";
  target.pass = false;
  r.aggregates.push_back(target);
  return r;
}

servesim::proto::FitConfig GapConfig() {
  servesim::proto::FitConfig c;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(
      R"pb(
        # 0: a point by id, a point that passes, and the concurrency-out TTFT block.
        known_gaps {
          device: "dev"
          passes: "leave_one_concurrency_out"
          metrics: "median_ttft_ms"
          points: "dev/median_tpot_ms/c1"
          points: "dev/median_tpot_ms/c4"
          missing: "m0"
          settle_with: "s0"
        }
        # 1: every TTFT block of the device (the concurrency one went to 0).
        known_gaps {
          device: "dev"
          metrics: "median_ttft_ms"
          missing: "m1"
          settle_with: "s1"
        }
        # 2: another build: matches no graded check, not stale.
        known_gaps {
          device: "dev"
          software_build: "other-build"
          metrics: "output_throughput"
          missing: "m2"
          settle_with: "s2"
        }
        # 3: a pass whose checks all pass: stale.
        known_gaps {
          device: "dev"
          passes: "leave_one_model_out"
          missing: "m3"
          settle_with: "s3"
        }
        # 4: metrics alone: the point checks of that metric.
        known_gaps {
          device: "dev"
          metrics: "decode_rate"
          missing: "m4"
          settle_with: "s4"
        }
        # 5: a point-set target by name.
        known_gaps { device: "dev" points: "dev grid" missing: "m5" settle_with: "s5" }
        # 6: a device not in the report: not stale.
        known_gaps {
          device: "absent"
          metrics: "decode_rate"
          missing: "m6"
          settle_with: "s6"
        }
      )pb",
      &c));
  EXPECT_TRUE(CheckKnownGaps(c, "test").ok());
  return c;
}

TEST(ValidationTest, MissesAreFiledUnderTheFirstMatchingKnownGap) {
  ValidationReport r = GapFixture();
  DiagnoseMisses(GapConfig(), r);
  ASSERT_EQ(r.diagnoses.size(), 4u);
  EXPECT_EQ(r.diagnoses[0].gap_index, 0);
  EXPECT_EQ(r.diagnoses[0].misses,
            (std::vector<std::string>{
                "dev/median_tpot_ms/c1",
                "dev / b leave_one_concurrency_out median_ttft_ms MAPE"}));
  EXPECT_EQ(r.diagnoses[0].missing, "m0");
  EXPECT_EQ(r.diagnoses[0].settle_with, "s0");
  EXPECT_EQ(r.diagnoses[1].gap_index, 1);
  EXPECT_EQ(r.diagnoses[1].misses,
            (std::vector<std::string>{
                "dev / b leave_one_input_length_out median_ttft_ms MAPE"}));
  EXPECT_EQ(r.diagnoses[2].gap_index, 4);
  EXPECT_EQ(r.diagnoses[2].misses, (std::vector<std::string>{"dev/decode_rate/e2b"}));
  EXPECT_EQ(r.diagnoses[3].gap_index, 5);
  EXPECT_EQ(r.diagnoses[3].misses,
            (std::vector<std::string>{"dev grid (3 cells): held-out MAE"}));
  EXPECT_EQ(r.undiagnosed, (std::vector<std::string>{
                               "dev/output_throughput/c1", "other/decode_rate",
                               "dev / b leave_one_device_out output_throughput MAPE"}));
  EXPECT_EQ(r.stale_gaps,
            (std::vector<std::string>{
                "known_gaps[0] dev: point dev/median_tpot_ms/c4 no longer misses",
                "known_gaps[3] dev: no miss left (leave_one_model_out)"}));

  const std::string text = FormatReportText(r);
  EXPECT_NE(text.find("known_gaps[0] dev, 2 misses:\n  dev/median_tpot_ms/c1\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("  missing:\n    m0\n  would settle it:\n    s0\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("no diagnosis recorded (3 misses):"), std::string::npos) << text;
  EXPECT_NE(text.find("stale known gaps"), std::string::npos) << text;
  const std::string json = FormatReportJson(r);
  EXPECT_NE(json.find(R"("settle_with": "s1")"), std::string::npos) << json;
  EXPECT_NE(json.find("\"undiagnosed\": [\n  \"dev/output_throughput/c1\""),
            std::string::npos)
      << json;
}

// With --no-held-out every check is graded in sample: misses are still
// filed, but nothing is called stale. Without DiagnoseMisses (a user's
// calibrate report) the JSON has no diagnosis keys at all.
TEST(ValidationTest, KnownGapsAreNotStaleWithoutTheHeldOutPasses) {
  ValidationReport r = GapFixture();
  r.held_out = false;
  DiagnoseMisses(GapConfig(), r);
  EXPECT_EQ(r.diagnoses.size(), 4u);
  EXPECT_TRUE(r.stale_gaps.empty());
  ValidationReport plain = GapFixture();
  EXPECT_EQ(FormatReportJson(plain).find("\"undiagnosed\""), std::string::npos);
  EXPECT_EQ(FormatReportText(plain).find("== misses"), std::string::npos);
}

TEST(ValidationTest, KnownGapNotesAreTheDevicesAndTheProfilesBuilds) {
  servesim::proto::FitConfig c;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(
      R"pb(
        known_gaps {
          device: "l4"
          metrics: "median_ttft_ms"
          missing: "m0"
          settle_with: "s0"
        }
        known_gaps {
          device: "l4"
          software_build: "b1"
          points: "l4/x"
          missing: "m1"
          settle_with: "s1"
        }
        known_gaps { device: "t4" metrics: "decode_rate" missing: "m2" settle_with: "s2" }
      )pb",
      &c));
  const std::vector<std::string> b1 = KnownGapNotes(c, "l4", "b1");
  ASSERT_EQ(b1.size(), 2u);
  EXPECT_EQ(b1[0],
            "known gap of the shipped l4 profile (fit config known_gaps[0]; `servesim "
            "validate` misses median_ttft_ms): m0 Would settle it: s0");
  EXPECT_EQ(b1[1],
            "known gap of the shipped l4 profile (fit config known_gaps[1]; `servesim "
            "validate` misses l4/x): m1 Would settle it: s1");
  EXPECT_EQ(KnownGapNotes(c, "l4", "b2").size(), 1u);
  EXPECT_TRUE(KnownGapNotes(c, "mi300x", "").empty());
  // The embedded shipped config gives the same notes as the file.
  const std::vector<std::string> shipped = ShippedKnownGapNotes("tpu-v5e", "");
  EXPECT_FALSE(shipped.empty());
  EXPECT_EQ(shipped, KnownGapNotes(Config(), "tpu-v5e", ""));
}

// A shared parameter must have one prior: sharing flops_eff_gemm between the
// TPUs (priors 0.14 and 0.19) is refused instead of depending on the order.
TEST(ValidationTest, SharedParameterWithDifferentPriorsIsRefused) {
  servesim::proto::FitConfig c = Config();
  auto* j = c.add_joint_fits();
  for (const char* d : {"tpu-v5e", "tpu-v6e"}) {
    auto* m = j->add_members();
    m->set_device(d);
    m->set_software_build("vllm-tpu-0.26.1rc1");
  }
  j->add_shared_parameters("flops_eff_gemm");
  ASSERT_TRUE(CheckJointFits(c, "fit.textproto").ok());
  auto db = MeasurementDb::FromSets(ShippedSets(), "test");
  ASSERT_TRUE(db.ok());
  ValidateOptions o;
  o.device = "tpu-v5e";
  o.skip_loo = true;
  auto r = RunValidation(*db, c, o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("needs one prior"), std::string::npos)
      << r.status();
}

TEST(ValidationTest, MeasuredInfeasibleCellsAreRejectedBySimulator) {
  const ValidationReport r = RunFor(ShippedSets(), "mi300x", /*skip_loo=*/true);
  for (int c : {1, 4, 16, 64}) {
    const ValidatedPoint* p =
        Find(r, "mi300x/output_throughput/in32768/c" + std::to_string(c));
    ASSERT_NE(p, nullptr);
    EXPECT_TRUE(p->measured_infeasible);
    EXPECT_FALSE(p->predicted_feasible);
    EXPECT_TRUE(p->pass);
    EXPECT_NE(p->note.find("max_model_len 32768"), std::string::npos) << p->note;
  }
  const ValidatedPoint* kv = Find(r, "mi300x/kv_capacity_tokens/len32768");
  ASSERT_NE(kv, nullptr);
  EXPECT_LT(std::abs(kv->error_pct), 0.01);
}

// The acceptance targets are data (calibration/fit_config.textproto's
// block_targets and point_set_targets), not rules written in the code.
TEST(ValidationTest, AcceptanceTargetsAreTheFitConfigs) {
  auto db = MeasurementDb::FromSets(ShippedSets(), "test");
  ASSERT_TRUE(db.ok()) << db.status();
  ValidateOptions o;
  o.device = "mi300x";
  o.skip_loo = true;  // no block pass: only the point-set targets grade
  servesim::proto::FitConfig c = Config();
  ASSERT_GT(c.point_set_targets_size(), 0);
  c.mutable_point_set_targets(0)->set_name("the grid");
  c.mutable_point_set_targets(0)->set_limit_pct(55);
  c.mutable_point_set_targets(0)->set_rule("a rule from the data");
  auto r = RunValidation(*db, c, o);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->aggregates.size(), 1u);
  EXPECT_EQ(r->aggregates[0].name, "the grid (12 cells): held-out MAE");
  EXPECT_EQ(r->aggregates[0].rule, "a rule from the data");
  EXPECT_EQ(r->aggregates[0].limit, 55);
  c.clear_point_set_targets();
  auto none = RunValidation(*db, c, o);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_TRUE(none->aggregates.empty());
  EXPECT_EQ(none->num_checked, r->num_checked - 1);
}

TEST(ValidationTest, PlannerSays26bDoesNotFitOneT4) {
  const ValidationReport r = RunFor(ShippedSets(), "t4", /*skip_loo=*/true);
  const ValidatedPoint* p = Find(r, "t4/fits_in_memory/26b-a4b");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->predicted, 0);
  EXPECT_TRUE(p->pass);
}

TEST(BenchImportTest, InfersSingleStreamCellFromSummaryKeys) {
  auto c = ImportBenchFile(std::string(SERVESIM_DATA_DIR) +
                           "/bench/mi300x-gemma4-e2b-2026-09-17/c1-in1024-out128.json");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->max_concurrency, 1);
  EXPECT_EQ(c->num_prompts, 8);
  EXPECT_EQ(c->input_tokens, 1024);
  EXPECT_EQ(c->output_tokens, 128);
  EXPECT_TRUE(c->fixed_lengths);
  auto ms = CellMeasurements(*c, "run", 5);
  ASSERT_TRUE(ms.ok()) << ms.status();
  // Fitted: throughput, median TTFT, median TPOT; reported beside them:
  // mean and p99 TTFT, mean TPOT, median and p99 ITL.
  ASSERT_EQ(ms->size(), 8u);
  int fitted = 0;
  for (const auto& m : *ms) fitted += m.fit();
  EXPECT_EQ(fitted, 3);
  EXPECT_EQ((*ms)[4].metric(), servesim::proto::P99_TTFT_MS);
  EXPECT_FALSE((*ms)[4].fit());
  EXPECT_EQ((*ms)[4].tolerance_pct(), 0);  // reported, never a check
}

// The dstack files: open loop (Poisson, 16 requests/s), ShareGPT lengths,
// per-request arrays. Their cells replay the measured lengths in order at
// the measured rate. About 38% of their requests streamed no token (no
// error, TTFT 0 in the file): they are replayed as one-token requests for
// the prefill they cost, and left out of the metrics; the median TTFT is
// then the median over the measured requests, not the file's (which counts
// those requests' zeros).
TEST(BenchImportTest, OpenLoopFilesReplayTheirRateAndPerRequestLengths) {
  for (const char* f : {"h100x8-16qps.json.gz", "mi300x8-16qps.json.gz"}) {
    auto c =
        ImportBenchFile(std::string(SERVESIM_DATA_DIR) + "/bench/dstack-llama405b/" + f);
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_TRUE(c->has_per_request) << f;
    EXPECT_EQ(c->num_prompts, 1000);
    EXPECT_FALSE(c->fixed_lengths);
    EXPECT_EQ(c->request_rate, 16);
    EXPECT_EQ(c->burstiness, 1);  // older client: no key, Poisson
    ASSERT_EQ(c->input_lens.size(), 1000u);
    int with_output = 0;
    for (int32_t n : c->output_lens) with_output += n > 0;
    auto ms = CellMeasurements(*c, "run", 5);
    ASSERT_TRUE(ms.ok()) << ms.status();
    ASSERT_EQ(ms->size(), 8u);  // 3 fitted, mean/p99 TTFT, mean TPOT, median/p99 ITL
    const auto& client = ms->front().client();
    EXPECT_EQ(client.kind(), servesim::proto::ClientMethod::BENCH_SERVE_OPEN_LOOP);
    EXPECT_EQ(client.request_rate(), 16);
    EXPECT_EQ(client.burstiness(), 1);
    EXPECT_EQ(client.max_concurrency(), 0);
    EXPECT_EQ(client.input_lens_size(), 1000);  // no request has an error
    EXPECT_EQ(client.num_prompts(), 1000);
    EXPECT_EQ(client.input_lens(0), c->input_lens[0]);
    ASSERT_EQ(client.unmeasured_size(), 1000 - with_output) << f;
    EXPECT_GT(client.unmeasured_size(), 300) << f;
    std::vector<double> measured_ttfts_ms;
    for (int i = 0; i < 1000; ++i) {
      if (c->output_lens[i] > 0) measured_ttfts_ms.push_back(c->ttfts[i] * 1e3);
    }
    for (int32_t i : client.unmeasured()) {
      EXPECT_EQ(c->output_lens[i], 0) << f << " request " << i;
      EXPECT_EQ(client.output_lens(i), 1) << f << " request " << i;
    }
    std::sort(measured_ttfts_ms.begin(), measured_ttfts_ms.end());
    const size_t mid = measured_ttfts_ms.size() / 2;
    const double median =
        measured_ttfts_ms.size() % 2 == 1
            ? measured_ttfts_ms[mid]
            : 0.5 * (measured_ttfts_ms[mid - 1] + measured_ttfts_ms[mid]);
    const auto& ttft = (*ms)[1];
    ASSERT_EQ(ttft.metric(), servesim::proto::MEDIAN_TTFT_MS);
    EXPECT_NEAR(ttft.value(), median, 1e-9) << f;
    EXPECT_GT(ttft.value(), c->median_ttft_ms) << f;  // the file's counts the zeros
  }
}

// A --save-detailed file written by hand: 4 requests of 100 in / 20 out.
std::string DetailedFile(const std::string& name, const std::string& rate,
                         const std::string& max_concurrency,
                         const std::string& extra = "") {
  std::string path = ::testing::TempDir() + "/" + name + ".json";
  std::ofstream(path, std::ios::binary)
      << "{\"model_id\": \"gemma-4-e2b\", \"num_prompts\": 4, \"request_rate\": " << rate
      << ", \"burstiness\": 1.0, \"max_concurrency\": " << max_concurrency
      << ", \"duration\": 2.0, \"completed\": 4, \"total_input_tokens\": 400, "
         "\"total_output_tokens\": 80, \"output_throughput\": 40.0, "
         "\"median_ttft_ms\": 30.0, \"median_tpot_ms\": 10.0, "
         "\"input_lens\": [100, 100, 100, 100], \"output_lens\": [20, 20, 20, 20], "
         "\"start_times\": [5.0, 5.5, 5.6, 6.5], \"errors\": [\"\", \"\", \"\", \"\"]"
      << extra << "}";
  return path;
}

// vLLM stamps start_times after the concurrency semaphore: only an open loop
// without a limit has start times that are the client's own schedule, and
// only those are replayed (as offsets from the first).
TEST(BenchImportTest, StartTimesAreReplayedOnlyForAnUnlimitedOpenLoop) {
  struct Case {
    const char* name;
    const char* rate;
    const char* max_concurrency;
    bool replayed;
  };
  for (const Case& k :
       {Case{"closed", "\"inf\"", "2", false}, Case{"open_limited", "4.0", "2", false},
        Case{"open_unlimited", "4.0", "null", true}}) {
    auto c = ImportBenchFile(DetailedFile(k.name, k.rate, k.max_concurrency));
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_TRUE(c->fixed_lengths) << k.name;
    auto ms = CellMeasurements(*c, "run", 5);
    ASSERT_TRUE(ms.ok()) << ms.status();
    const auto& client = ms->front().client();
    if (k.replayed) {
      ASSERT_EQ(client.send_times_s_size(), 4) << k.name;
      EXPECT_EQ(client.send_times_s(0), 0);
      EXPECT_DOUBLE_EQ(client.send_times_s(3), 1.5);
      EXPECT_EQ(client.input_lens_size(), 4);
    } else {
      EXPECT_EQ(client.send_times_s_size(), 0) << k.name;
    }
    // Drawn open-loop arrivals: throughput known to ~1/sqrt(4) only.
    const bool drawn = std::string(k.rate) != "\"inf\"" && !k.replayed;
    EXPECT_EQ(ms->front().metric(), servesim::proto::OUTPUT_THROUGHPUT);
    EXPECT_DOUBLE_EQ(ms->front().rel_sigma(), drawn ? 0.5 : 0.03) << k.name;
  }
}

// Per-request arrays that disagree with the file's own summary are refused,
// naming the key: the medians cannot be trusted to describe them.
TEST(BenchImportTest, ArraysMustAgreeWithTheSummary) {
  const std::string good = DetailedFile("agree", "4.0", "null");
  ASSERT_TRUE(ImportBenchFile(good).ok());
  auto rewrite = [&](const std::string& name, const std::string& from,
                     const std::string& to) {
    std::ifstream in(good);
    std::stringstream buf;
    buf << in.rdbuf();
    std::string text = buf.str();
    text.replace(text.find(from), from.size(), to);
    std::string path = ::testing::TempDir() + "/" + name + ".json";
    std::ofstream(path, std::ios::binary) << text;
    return path;
  };
  struct Case {
    const char *name, *from, *to, *key, *detail;
  };
  for (const Case& k :
       {Case{"sum", "\"total_output_tokens\": 80", "\"total_output_tokens\": 81",
             "\"output_lens\"", "total_output_tokens (81)"},
        Case{"errs", "[\"\", \"\", \"\", \"\"]", "[\"\", \"timeout\", \"\", \"\"]",
             "\"errors\"", "completed 4"}}) {
    auto c = ImportBenchFile(rewrite(k.name, k.from, k.to));
    ASSERT_FALSE(c.ok()) << k.name;
    EXPECT_NE(c.status().message().find(k.key), std::string::npos) << c.status();
    EXPECT_NE(c.status().message().find(k.detail), std::string::npos) << c.status();
  }
}

TEST(BenchImportTest, RampUpRunsAreRefusedNamingTheKey) {
  const std::string path =
      DetailedFile("ramp", "\"inf\"", "null", ", \"ramp_up_strategy\": \"linear\"");
  auto c = ImportBenchFile(path);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("ramp_up_strategy"), std::string::npos);
  EXPECT_NE(c.status().message().find(path), std::string::npos);
}

// Lengths that vary with no per-request arrays to replay cannot be
// simulated faithfully: refused, saying what is missing.
TEST(BenchImportTest, VaryingLengthsWithoutArraysAreRefused) {
  std::string text;
  {
    std::ifstream in(std::string(SERVESIM_DATA_DIR) +
                     "/bench/mi300x-gemma4-e2b-2026-09-17/c1-in128-out128.json");
    std::stringstream buf;
    buf << in.rdbuf();
    text = buf.str();
  }
  const std::string from = "\"total_input_tokens\": 1024";
  ASSERT_NE(text.find(from), std::string::npos);
  text.replace(text.find(from), from.size(), "\"total_input_tokens\": 1030");
  const std::string path = ::testing::TempDir() + "/varying.json";
  std::ofstream(path, std::ios::binary) << text;
  auto c = ImportBenchFile(path);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FALSE(c->fixed_lengths);
  auto ms = CellMeasurements(*c, "run", 5);
  EXPECT_EQ(ms.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(ms.status().message().find("per-request"), std::string::npos) << ms.status();
}

}  // namespace
}  // namespace servesim
