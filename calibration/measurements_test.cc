#include "calibration/measurements.h"

#include <set>

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

}  // namespace
}  // namespace servesim
