#include "calibration/measurements.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "calibration/validation.h"
#include "gtest/gtest.h"

namespace servesim {
namespace {

std::string DataDir() { return std::string(SERVESIM_SOURCE_DIR) + "/calibration/data"; }

TEST(MeasurementDbTest, ShippedDataLoadsAndHoldsEveryPublishedTable) {
  auto db = MeasurementDb::LoadDir(DataDir());
  ASSERT_TRUE(db.ok()) << db.status();
  int grid = 0, infeasible = 0;
  for (const auto& m : db->measurements()) {
    EXPECT_FALSE(m.provenance().writeup().empty()) << m.id();
    EXPECT_FALSE(m.provenance().cell().empty()) << m.id();
    if (m.provenance().derived()) {
      EXPECT_FALSE(m.provenance().derivation().empty()) << m.id();
    }
    if (m.run() == "mi300x-e2b-bf16-2026-09-17" &&
        m.metric() == servesim::proto::OUTPUT_THROUGHPUT) {
      (m.infeasible() ? infeasible : grid)++;
    }
  }
  EXPECT_EQ(grid, 12);
  EXPECT_EQ(infeasible, 4);
  const auto* kv = db->FindMeasurement("mi300x/kv_capacity_tokens/len32768");
  ASSERT_NE(kv, nullptr);
  EXPECT_EQ(kv->value(), 9026017);
  const auto* run = db->FindRun("mi300x-e2b-bf16-2026-09-17");
  ASSERT_NE(run, nullptr);
  EXPECT_EQ(run->max_model_len(), 32768);
  EXPECT_DOUBLE_EQ(run->kv_cache_gib(), 155.04);
}

// A run "r" (t4, gemma-4-e2b) added to `set`.
void AddRun(servesim::proto::MeasurementSet& set) {
  auto* r = set.add_runs();
  r->set_id("r");
  r->set_device("t4");
  r->set_model("gemma-4-e2b");
}

// An output-throughput measurement `id` of run "r" with `value`, added to
// `set`.
servesim::proto::Measurement* AddMeasurement(servesim::proto::MeasurementSet& set,
                                             const std::string& id, double value) {
  auto* m = set.add_measurements();
  m->set_id(id);
  m->set_run("r");
  m->set_metric(servesim::proto::OUTPUT_THROUGHPUT);
  m->set_value(value);
  return m;
}

TEST(MeasurementDbTest, RejectsMeasurementOfUnknownRun) {
  servesim::proto::MeasurementSet set;
  auto* m = set.add_measurements();
  m->set_id("x");
  m->set_run("nope");
  m->set_metric(servesim::proto::OUTPUT_THROUGHPUT);
  m->set_value(1);
  auto db = MeasurementDb::FromSets({set}, "test");
  ASSERT_FALSE(db.ok());
  EXPECT_NE(db.status().message().find("unknown run 'nope'"), std::string::npos);
}

TEST(MeasurementDbTest, RejectsZeroValueOfFeasibleCell) {
  servesim::proto::MeasurementSet set;
  AddRun(set);
  auto* m = AddMeasurement(set, "x", 0);
  EXPECT_FALSE(MeasurementDb::FromSets({set}, "test").ok());
  m->set_infeasible(true);
  EXPECT_TRUE(MeasurementDb::FromSets({set}, "test").ok());
}

// Loaded from several files, an error names the file that holds the run or
// measurement at fault, not every file of the folder.
TEST(MeasurementDbTest, ErrorNamesTheFileOfTheRunOrMeasurement) {
  servesim::proto::MeasurementSet good;
  AddRun(good);
  servesim::proto::MeasurementSet bad;
  bad.add_runs()->set_id("no-device");
  auto db =
      MeasurementDb::FromNamedSets({good, bad}, {"data/a.textproto", "data/b.textproto"});
  ASSERT_FALSE(db.ok());
  EXPECT_EQ(db.status().message().rfind("data/b.textproto: run 'no-device'", 0), 0)
      << db.status();
  bad.clear_runs();
  AddMeasurement(bad, "x", 1)->add_depends_on("missing");  // run "r": the other file's
  db =
      MeasurementDb::FromNamedSets({good, bad}, {"data/a.textproto", "data/b.textproto"});
  ASSERT_FALSE(db.ok());
  EXPECT_EQ(db.status().message().rfind(
                "data/b.textproto: measurement 'x': field depends_on: unknown", 0),
            0)
      << db.status();
}

// A measurement appears once: a second id for the same run, metric,
// client, price and value (a copied row) is refused naming both ids;
// another concurrency, metric or value (a repetition) is kept.
TEST(MeasurementDbTest, RejectsTheSameMeasurementUnderTwoIds) {
  servesim::proto::MeasurementSet set;
  AddRun(set);
  for (const char* id : {"a", "b"}) {
    auto* m = AddMeasurement(set, id, 100);
    m->mutable_client()->set_kind(servesim::proto::ClientMethod::BENCH_SERVE_CLOSED_LOOP);
    m->mutable_client()->set_max_concurrency(4);
  }
  auto db = MeasurementDb::FromSets({set}, "test");
  ASSERT_FALSE(db.ok());
  EXPECT_NE(db.status().message().find("measurement 'b': the same measurement as 'a' "
                                       "(run, metric, client, price and value"),
            std::string::npos)
      << db.status();
  auto* b = set.mutable_measurements(1);
  b->mutable_client()->set_max_concurrency(16);
  EXPECT_TRUE(MeasurementDb::FromSets({set}, "test").ok());
  b->mutable_client()->set_max_concurrency(4);
  b->set_metric(servesim::proto::MEDIAN_TTFT_MS);
  EXPECT_TRUE(MeasurementDb::FromSets({set}, "test").ok());
  b->set_metric(servesim::proto::OUTPUT_THROUGHPUT);
  b->set_value(103);
  EXPECT_TRUE(MeasurementDb::FromSets({set}, "test").ok());
}

// NaN tolerances and sigmas, negative or non-finite prices, prompt counts
// no fit can re-simulate and values out of any instrument's range are
// errors naming the field (a NaN tolerance unchecked the point, a negative
// price gave negative costs, a million prompts ran for hours, a value of
// 1e-300 printed a 300-digit error).
TEST(MeasurementDbTest, RejectsNanTolerancesBadPricesHugePromptCountsAndValues) {
  const double nan = std::nan("");
  struct Case {
    std::function<void(servesim::proto::MeasurementSet&)> edit;
    std::string says;
  };
  for (const Case& c : std::vector<Case>{
           {[&](auto& s) { s.mutable_measurements(0)->set_tolerance_pct(nan); },
            "tolerance_pct (nan) and rel_sigma (0) must be finite and >= 0"},
           {[&](auto& s) { s.mutable_measurements(0)->set_rel_sigma(nan); },
            "rel_sigma (nan) must be finite"},
           {[](auto& s) { s.mutable_runs(0)->set_price_usd_per_hour(-1.99); },
            "run 'r': field price_usd_per_hour: -1.99 must be finite and > 0"},
           {[](auto& s) {
              s.mutable_measurements(0)->set_price_usd_per_hour(
                  std::numeric_limits<double>::infinity());
            },
            "measurement 'x': field price_usd_per_hour: inf must be finite and > 0"},
           {[](auto& s) {
              s.mutable_measurements(0)->mutable_client()->set_num_prompts(1000000);
            },
            "client.num_prompts: 1000000 is out of range [0, 100000]"},
           {[](auto& s) {
              s.mutable_measurements(0)->set_metric(
                  static_cast<servesim::proto::Metric>(99));
            },
            "field metric: 99 is not a Metric"},
           // A value no instrument reads (a typo, a unit slip) and a value on
           // a cell that was never run.
           {[](auto& s) { s.mutable_measurements(0)->set_value(1e-300); },
            "field value: 1e-300 is out of range [1e-06, 1e+12]"},
           {[](auto& s) { s.mutable_measurements(0)->set_value(3e14); },
            "field value: 3e+14 is out of range"},
           {[](auto& s) { s.mutable_measurements(0)->set_infeasible(true); },
            "field value: 1 with infeasible: true"},
           {[](auto& s) {
              s.mutable_measurements(0)->set_metric(servesim::proto::FITS_IN_MEMORY);
              s.mutable_measurements(0)->set_value(0.5);
            },
            "field value: 0.5 for FITS_IN_MEMORY must be 0 (failed to load) or 1"}}) {
    servesim::proto::MeasurementSet set;
    AddRun(set);
    AddMeasurement(set, "x", 1);
    ASSERT_TRUE(MeasurementDb::FromSets({set}, "test").ok());
    c.edit(set);
    auto db = MeasurementDb::FromSets({set}, "test");
    ASSERT_FALSE(db.ok()) << c.says;
    EXPECT_NE(db.status().message().find(c.says), std::string::npos) << db.status();
  }
}

TEST(MeasurementDbTest, ParseErrorNamesFileAndLine) {
  const std::string path = ::testing::TempDir() + "/bad.textproto";
  FILE* f = fopen(path.c_str(), "w");
  fputs("runs {\n  id: \"a\"\n  nonsense: 3\n}\n", f);
  fclose(f);
  auto db = MeasurementDb::Load({path});
  ASSERT_FALSE(db.ok());
  EXPECT_NE(db.status().message().find("bad.textproto:3:"), std::string::npos)
      << db.status().message();
}

// Restores the working directory when the test ends.
class ScopedCwd {
 public:
  explicit ScopedCwd(const std::filesystem::path& dir)
      : old_(std::filesystem::current_path()) {
    std::filesystem::current_path(dir);
  }
  ~ScopedCwd() { std::filesystem::current_path(old_); }
  ScopedCwd(const ScopedCwd&) = delete;
  ScopedCwd& operator=(const ScopedCwd&) = delete;

 private:
  std::filesystem::path old_;
};

TEST(ShippedDataTest, EmbeddedDataIsTheSourceTreesData) {
  auto shipped = MeasurementDb::LoadShipped();
  auto source = MeasurementDb::LoadDir(DataDir());
  ASSERT_TRUE(shipped.ok()) << shipped.status();
  ASSERT_TRUE(source.ok()) << source.status();
  ASSERT_EQ(shipped->measurements().size(), source->measurements().size());
  for (size_t i = 0; i < shipped->measurements().size(); ++i) {
    EXPECT_EQ(shipped->measurements()[i].DebugString(),
              source->measurements()[i].DebugString());
  }
  auto fit = LoadNamedFitConfig(kDefaultFitConfig);
  auto fit_src =
      LoadFitConfig(std::string(SERVESIM_SOURCE_DIR) + "/" + kDefaultFitConfig);
  ASSERT_TRUE(fit.ok()) << fit.status();
  ASSERT_TRUE(fit_src.ok()) << fit_src.status();
  EXPECT_EQ(fit->DebugString(), fit_src->DebugString());
}

TEST(ShippedDataTest, DecoyInTheWorkingDirectoryIsIgnored) {
  // A folder that happens to hold calibration/data and a fit config must not
  // change what the default names load.
  const std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) / "decoy";
  std::filesystem::create_directories(dir / "calibration" / "data");
  {
    std::ofstream(dir / "calibration" / "data" / "decoy.textproto")
        << "runs { id: \"x\" }\n";
  }
  { std::ofstream(dir / "calibration" / "fit_config.textproto") << "not a proto\n"; }
  ScopedCwd cwd(dir);
  auto named = MeasurementDb::LoadNamed(kDefaultDataDir);
  auto shipped = MeasurementDb::LoadShipped();
  ASSERT_TRUE(named.ok()) << named.status();
  ASSERT_TRUE(shipped.ok()) << shipped.status();
  EXPECT_EQ(named->measurements().size(), shipped->measurements().size());
  EXPECT_TRUE(LoadNamedFitConfig(kDefaultFitConfig).ok());
  // An explicit path is a path: the decoy is read, and its error names it.
  auto decoy = MeasurementDb::LoadNamed("./calibration/data");
  EXPECT_FALSE(decoy.ok());
  EXPECT_NE(decoy.status().message().find("decoy.textproto"), std::string::npos)
      << decoy.status();
}

}  // namespace
}  // namespace servesim
