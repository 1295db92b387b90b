// Runs the built `servesim validate` on one device (tpu-v6e: the narrowest
// selection with every metric family graded) and checks the interval
// coverage it prints: the text table's shape, the JSON "coverage" object's
// keys, and that the two agree with each other and with themselves (the
// "all" row is the n-weighted mean of the metric rows, the family rows
// split the same predictions) and the verdict column.
#include <cmath>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/cli_run.h"
#include "traces/json.h"

namespace servesim {
namespace {

using servesim::cli_test::CliRun;
using servesim::cli_test::Servesim;
using ::testing::HasSubstr;

constexpr char kArgs[] = "validate --device tpu-v6e -j 2";

struct Row {
  int n = 0;
  double cov_50 = 0, cov_90 = 0, q_50 = 0, q_90 = 0;  // percent, percent, log, log
  std::string verdict;
};

// The rows of the coverage section, by metric, in printed order.
std::vector<std::pair<std::string, Row>> TextRows(const std::string& out) {
  std::vector<std::pair<std::string, Row>> rows;
  const size_t at = out.find("Interval coverage over the block-held-out predictions");
  EXPECT_NE(at, std::string::npos) << out.substr(0, 400);
  if (at == std::string::npos) return rows;
  std::istringstream in(out.substr(at));
  std::string line;
  std::getline(in, line);  // title
  std::getline(in, line);  // header
  std::istringstream header(line);
  std::vector<std::string> cols;
  for (std::string c; header >> c;) cols.push_back(c);
  EXPECT_EQ(cols, (std::vector<std::string>{"metric", "n", "cov_50", "cov_90", "q_50",
                                            "q_90", "verdict"}));
  while (std::getline(in, line) && !line.empty() && line[0] == ' ') {
    std::istringstream f(line);
    std::string metric, c50, c90;
    Row r;
    f >> metric >> r.n >> c50 >> c90 >> r.q_50 >> r.q_90;
    EXPECT_FALSE(f.fail()) << line;
    EXPECT_EQ(c50.back(), '%') << line;
    EXPECT_EQ(c90.back(), '%') << line;
    r.cov_50 = std::stod(c50);
    r.cov_90 = std::stod(c90);
    std::getline(f >> std::ws, r.verdict);
    rows.emplace_back(metric, r);
  }
  return rows;
}

TEST(CoverageCliTest, TextTableAndJsonAgreePerMetric) {
  const CliRun text = Servesim(kArgs);
  ASSERT_TRUE(text.exit_code == 0 || text.exit_code == 3) << text.err;
  const CliRun json = Servesim(std::string(kArgs) + " --json");
  ASSERT_EQ(json.exit_code, text.exit_code) << json.err;

  const auto rows = TextRows(text.out);
  ASSERT_GE(rows.size(), 4u);  // tpu-v6e grades all three families
  EXPECT_EQ(rows.back().first, "all");

  auto doc = ParseJson(json.out, "stdout");
  ASSERT_TRUE(doc.ok()) << doc.status();
  const JsonValue* cov = doc->Find("coverage");
  ASSERT_NE(cov, nullptr);
  ASSERT_EQ(cov->type, JsonValue::Type::kObject);
  ASSERT_EQ(cov->members.size(), rows.size());

  int sum_n = 0, family_n = 0;
  double in_50 = 0, in_90 = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto& [metric, r] = rows[i];
    const JsonMember& m = cov->members[i];
    EXPECT_EQ(m.key, metric);  // same metrics, same order
    const JsonValue* n = m.value.Find("num_predictions");
    const JsonValue* c50 = m.value.Find("coverage_50");
    const JsonValue* c90 = m.value.Find("coverage_90");
    const JsonValue* q50 = m.value.Find("median_half_width_log_50");
    const JsonValue* q90 = m.value.Find("median_half_width_log_90");
    ASSERT_TRUE(n && c50 && c90 && q50 && q90) << metric;
    EXPECT_EQ(static_cast<int>(n->number), r.n) << metric;
    EXPECT_GT(r.n, 0) << metric;
    EXPECT_GE(c50->number, 0) << metric;
    EXPECT_LE(c90->number, 1) << metric;
    // A band at 90% is never narrower than at 50%, nor covers less.
    EXPECT_LE(c50->number, c90->number) << metric;
    EXPECT_LE(q50->number, q90->number) << metric;
    // The table prints the JSON's values (percent to 0.1, log to 0.001).
    EXPECT_NEAR(r.cov_50, 100 * c50->number, 0.05 + 1e-9) << metric;
    EXPECT_NEAR(r.cov_90, 100 * c90->number, 0.05 + 1e-9) << metric;
    EXPECT_NEAR(r.q_50, q50->number, 0.0005 + 1e-9) << metric;
    EXPECT_NEAR(r.q_90, q90->number, 0.0005 + 1e-9) << metric;
    // Coverage is a count over n.
    EXPECT_NEAR(c50->number * r.n, std::round(c50->number * r.n), 1e-9) << metric;
    // Judged from kMinJudgedPredictions on; a judged row says whether it
    // is inside both targets, a smaller one is "too few to judge".
    const JsonValue* judged = m.value.Find("judged");
    const JsonValue* in_target = m.value.Find("in_target");
    const JsonValue* min_n = m.value.Find("min_judged_predictions");
    ASSERT_TRUE(judged && in_target && min_n) << metric;
    EXPECT_EQ(judged->bool_value, r.n >= min_n->number) << metric;
    const bool inside = c50->number >= 0.4 && c50->number <= 0.6 && c90->number >= 0.8 &&
                        c90->number <= 0.97;
    EXPECT_EQ(in_target->bool_value, judged->bool_value && inside) << metric;
    EXPECT_EQ(r.verdict.rfind(!judged->bool_value ? "too few to judge"
                              : inside            ? "in target"
                                                  : "OUT of target",
                              0),
              0u)
        << metric << ": " << r.verdict;
    if (metric == "all") {
      EXPECT_EQ(r.n, sum_n);
      EXPECT_NEAR(c50->number, in_50 / sum_n, 1e-12);
      EXPECT_NEAR(c90->number, in_90 / sum_n, 1e-12);
      EXPECT_EQ(family_n, sum_n);  // every prediction is in one family row
    } else if (metric.rfind("family:", 0) == 0) {
      family_n += r.n;
    } else {
      sum_n += r.n;
      in_50 += c50->number * r.n;
      in_90 += c90->number * r.n;
    }
  }
  EXPECT_THAT(text.out, HasSubstr("target 90%: 80-97%, 50%: 40-60%"));
}

}  // namespace
}  // namespace servesim
