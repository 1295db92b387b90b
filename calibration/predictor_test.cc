#include "calibration/predictor.h"

#include <cmath>

#include "gtest/gtest.h"

namespace servesim {
namespace {

const std::string kRoot = SERVESIM_SOURCE_DIR;

// The SageMaker parallel-batch client's extra per-call cost is a property of
// the measuring client: it moves the 16-parallel throughput (whose wall time
// includes the calls' fixed cost) and nothing else, and it shifts the batch
// wall time by exactly that many seconds.
TEST(PredictorTest, ParallelCallExtraMovesOnlyParallelBatchCells) {
  auto db = MeasurementDb::LoadDir(kRoot + "/calibration/data");
  ASSERT_TRUE(db.ok()) << db.status();
  const std::string par = "t4/output_throughput_16par/e2b";
  const std::string dec = "t4/decode_rate/e2b";
  auto p = Predictor::Create(*db, {par, dec});
  ASSERT_TRUE(p.ok()) << p.status();
  ParameterSet params = p->prior_params();
  Parameter* extra = params.FindMutable(kParallelCallExtraParam);
  ASSERT_NE(extra, nullptr);
  EXPECT_EQ(extra->value, 0);
  auto base = p->PredictValues(params);
  ASSERT_TRUE(base.ok()) << base.status();
  extra->value = 1.0;
  auto moved = p->PredictValues(params);
  ASSERT_TRUE(moved.ok()) << moved.status();

  // Throughput = 16 x 256 tokens / wall: one more second of wall per call.
  const double tokens = 16.0 * 256.0;
  const double wall0 = tokens / (*base)[0], wall1 = tokens / (*moved)[0];
  EXPECT_NEAR(wall1 - wall0, 1.0, 1e-6);
  // The decode rate is a difference of two single-call wall times: unmoved.
  EXPECT_DOUBLE_EQ((*moved)[1], (*base)[1]);
}

TEST(PredictorTest, ParallelCallExtraCannotMakeTheCallCostNegative) {
  auto db = MeasurementDb::LoadDir(kRoot + "/calibration/data");
  ASSERT_TRUE(db.ok()) << db.status();
  auto p = Predictor::Create(*db, {"t4/output_throughput_16par/e2b"});
  ASSERT_TRUE(p.ok()) << p.status();
  ParameterSet params = p->prior_params();
  const Parameter* extra = params.Find(kParallelCallExtraParam);
  ASSERT_NE(extra, nullptr);
  // Bounds keep 0.62 s + extra >= 0.32 s.
  EXPECT_GE(extra->lower, -0.3);
  params.FindMutable(kParallelCallExtraParam)->value = -100;  // out of bounds
  auto v = p->PredictValues(params);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_TRUE(std::isfinite((*v)[0]));
  EXPECT_GT((*v)[0], 0);
}

}  // namespace
}  // namespace servesim
