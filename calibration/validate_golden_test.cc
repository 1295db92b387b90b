// Golden-file test of the `servesim validate` report (the table the README
// shows): tests/golden/validate.txt. Rewritten only when the environment
// variable SERVESIM_UPDATE_GOLDEN=1 is set; otherwise any difference fails.
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "absl/strings/str_join.h"
#include "calibration/coverage.h"
#include "calibration/measurements.h"
#include "calibration/validation.h"
#include "gtest/gtest.h"

namespace servesim {
namespace {

const std::string kRoot = SERVESIM_SOURCE_DIR;

absl::StatusOr<ValidationReport> FullReport(int jobs) {
  auto db = MeasurementDb::LoadDir(kRoot + "/calibration/data");
  if (!db.ok()) return db.status();
  auto config = LoadFitConfig(kRoot + "/" + kDefaultFitConfig);
  if (!config.ok()) return config.status();
  ValidateOptions o;
  o.jobs = jobs;
  return RunValidation(*db, *config, o);
}

TEST(ValidateGoldenTest, ReportMatchesGoldenFile) {
  auto report = FullReport(1);
  ASSERT_TRUE(report.ok()) << report.status();
  // What `servesim validate` prints: the table, then the interval coverage
  // (the README's tables come from both).
  const std::string text =
      FormatReportText(*report) + FormatCoverageText(ComputeCoverage(*report));
  const std::string path = kRoot + "/tests/golden/validate.txt";
  const char* update = std::getenv("SERVESIM_UPDATE_GOLDEN");
  if (update != nullptr && std::string(update) == "1") {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
    GTEST_SKIP() << "rewrote " << path;
  }
  std::ifstream in(path, std::ios::binary);
  ASSERT_TRUE(in.good()) << path << " missing; run with SERVESIM_UPDATE_GOLDEN=1";
  std::stringstream golden;
  golden << in.rdbuf();
  EXPECT_EQ(text, golden.str()) << "validate report changed; if intended, rerun with "
                                   "SERVESIM_UPDATE_GOLDEN=1 and review the diff";
  // Every miss of the shipped report says what the model lacks and what
  // would settle it (calibration/fit_config.textproto known_gaps), and no
  // known gap outlives the miss it explained.
  EXPECT_TRUE(report->undiagnosed.empty())
      << "misses without a known gap: " << absl::StrJoin(report->undiagnosed, "; ");
  EXPECT_TRUE(report->stale_gaps.empty())
      << "stale known gaps: " << absl::StrJoin(report->stale_gaps, "; ");
  // Every shipped gap files at least one miss (a misspelt device, build,
  // metric or point would match nothing and go unnoticed otherwise).
  auto config = LoadFitConfig(kRoot + "/" + kDefaultFitConfig);
  ASSERT_TRUE(config.ok());
  std::set<int> filed;
  for (const Diagnosis& d : report->diagnoses) filed.insert(d.gap_index);
  for (int i = 0; i < config->known_gaps_size(); ++i) {
    EXPECT_TRUE(filed.count(i))
        << "known_gaps[" << i << "] (" << config->known_gaps(i).device()
        << ") files no miss of the shipped report";
  }
  // The same data give byte-identical reports (text and JSON), whatever
  // the thread count.
  auto again = FullReport(2);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(FormatReportText(*again) + FormatCoverageText(ComputeCoverage(*again)), text);
  EXPECT_EQ(FormatReportJson(*again), FormatReportJson(*report));
}

}  // namespace
}  // namespace servesim
