#include "calibration/measurements.h"

#include <filesystem>
#include <set>

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
  auto* r = set.add_runs();
  r->set_id("r");
  r->set_device("t4");
  r->set_model("gemma-4-e2b");
  auto* m = set.add_measurements();
  m->set_id("x");
  m->set_run("r");
  m->set_metric(servesim::proto::OUTPUT_THROUGHPUT);
  m->set_value(0);
  EXPECT_FALSE(MeasurementDb::FromSets({set}, "test").ok());
  m->set_infeasible(true);
  EXPECT_TRUE(MeasurementDb::FromSets({set}, "test").ok());
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

TEST(ResolveRepoPathTest, DefaultPathsResolveToTheSourceTreeFromAnyDirectory) {
  ScopedCwd cwd(::testing::TempDir());
  EXPECT_EQ(ResolveRepoPath(kDefaultDataDir), DataDir());
  EXPECT_EQ(ResolveRepoPath(kDefaultFitConfig),
            std::string(SERVESIM_SOURCE_DIR) + "/" + kDefaultFitConfig);
  EXPECT_TRUE(MeasurementDb::LoadDir(ResolveRepoPath(kDefaultDataDir)).ok());
  // Not in the source tree either: returned unchanged, so the open names it.
  EXPECT_EQ(ResolveRepoPath("calibration/no-such-dir"), "calibration/no-such-dir");
}

TEST(ResolveRepoPathTest, PathPresentInWorkingDirectoryWins) {
  const std::filesystem::path dir =
      std::filesystem::path(::testing::TempDir()) / "resolve_cwd";
  std::filesystem::create_directories(dir / "calibration" / "data");
  ScopedCwd cwd(dir);
  EXPECT_EQ(ResolveRepoPath(kDefaultDataDir), kDefaultDataDir);
}

}  // namespace
}  // namespace servesim
