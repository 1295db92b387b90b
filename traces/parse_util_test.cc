#include "traces/parse_util.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace servesim {
namespace {

TEST(ParseUtilTest, Azure2023TimestampIsExactTo100ns) {
  int64_t a = 0, b = 0;
  ASSERT_TRUE(ParseTimestampToNs("2023-11-16 18:17:03.9799600", &a));
  ASSERT_TRUE(ParseTimestampToNs("2023-11-16 18:17:04.0319600", &b));
  EXPECT_EQ(b - a, 52'000'000);
  // 2023-11-16 00:00:00 UTC is 1700092800 s after the epoch.
  int64_t midnight = 0;
  ASSERT_TRUE(ParseTimestampToNs("2023-11-16 00:00:00", &midnight));
  EXPECT_EQ(midnight, 1'700'092'800LL * 1'000'000'000);
  EXPECT_EQ(a - midnight, (18 * 3600 + 17 * 60 + 3) * 1'000'000'000LL + 979'960'000);
}

TEST(ParseUtilTest, Azure2024TimestampWithZoneAndWithoutFraction) {
  int64_t a = 0, b = 0, c = 0;
  ASSERT_TRUE(ParseTimestampToNs("2024-05-10 00:00:00.009930+00:00", &a));
  ASSERT_TRUE(ParseTimestampToNs("2024-05-10 00:00:01+00:00", &b));
  ASSERT_TRUE(ParseTimestampToNs("2024-05-10 02:00:01+02:00", &c));
  EXPECT_EQ(b - a, 990'070'000);
  EXPECT_EQ(b, c);
}

TEST(ParseUtilTest, TimestampRejectsOutOfRangeFields) {
  int64_t t;
  EXPECT_FALSE(ParseTimestampToNs("2023-02-29 00:00:00", &t));  // not a leap year
  // Found by the Azure fuzzer: year 4046 minus year 2023 overflowed int64 ns.
  EXPECT_FALSE(ParseTimestampToNs("4046-11-16 18:17:03.9799600", &t));
  EXPECT_FALSE(ParseTimestampToNs("1969-12-31 23:59:59", &t));
  EXPECT_TRUE(ParseTimestampToNs("2200-12-31 23:59:59", &t));
  EXPECT_TRUE(ParseTimestampToNs("2024-02-29 00:00:00", &t));
  EXPECT_FALSE(ParseTimestampToNs("2023-13-01 00:00:00", &t));
  EXPECT_FALSE(ParseTimestampToNs("2023-11-16 24:00:00", &t));
  EXPECT_FALSE(ParseTimestampToNs("2023-11-16 18:17:03.", &t));
  EXPECT_FALSE(ParseTimestampToNs("2023-11-16 18:17:03.9799600x", &t));
  EXPECT_FALSE(ParseTimestampToNs("2023-11-16 18:17", &t));
}

TEST(ParseUtilTest, DecimalSecondsToNsIsExactAndRoundsHalfUp) {
  int64_t ns = 0;
  ASSERT_TRUE(ParseDecimalToNs("61.114", 1'000'000'000, &ns));
  EXPECT_EQ(ns, 61'114'000'000);
  ASSERT_TRUE(ParseDecimalToNs("0.0000000005", 1'000'000'000, &ns));
  EXPECT_EQ(ns, 1);
  ASSERT_TRUE(ParseDecimalToNs("1.5e3", 1'000'000, &ns));
  EXPECT_EQ(ns, 1'500'000'000);
  ASSERT_TRUE(ParseDecimalToNs("3536999", 1'000'000, &ns));
  EXPECT_EQ(ns, 3'536'999'000'000);
  EXPECT_FALSE(ParseDecimalToNs("-1", 1, &ns));
  EXPECT_FALSE(ParseDecimalToNs("1e30", 1'000'000'000, &ns));  // overflow
  EXPECT_FALSE(ParseDecimalToNs("1.", 1, &ns));
  EXPECT_FALSE(ParseDecimalToNs("", 1, &ns));
  EXPECT_FALSE(ParseDecimalToNs("12a", 1, &ns));
  // 30 significant digits overflowed mant x 1e9 (read as -1.4 s).
  ASSERT_TRUE(ParseDecimalToNs("2.00000000000000000000000000001", 1'000'000'000, &ns));
  EXPECT_EQ(ns, 2'000'000'000);
  ASSERT_TRUE(
      ParseDecimalToNs("9223372036.854775807000000000000001", 1'000'000'000, &ns));
  EXPECT_EQ(ns, 9'223'372'036'854'775'807);
  EXPECT_FALSE(ParseDecimalToNs("9223372036.8547758075", 1'000'000'000, &ns));
}

TEST(ParseUtilTest, IntegersMustFillTheField) {
  int64_t v;
  uint64_t u;
  EXPECT_TRUE(ParseInt64("-3", &v));
  EXPECT_EQ(v, -3);
  EXPECT_FALSE(ParseInt64("3 ", &v));
  EXPECT_FALSE(ParseInt64("+3", &v));
  EXPECT_FALSE(ParseInt64("99999999999999999999", &v));
  EXPECT_TRUE(ParseUint64("18446744073709551615", &u));
  EXPECT_FALSE(ParseUint64("-1", &u));
}

TEST(ParseUtilTest, CsvSplitHandlesQuotesAndEmptyCells) {
  std::vector<std::string_view> cells;
  std::vector<std::string> scratch;
  ASSERT_TRUE(SplitCsvLine("a,\"b,\"\"c\",,d,", cells, scratch));
  ASSERT_EQ(cells.size(), 5u);
  EXPECT_EQ(cells[0], "a");
  EXPECT_EQ(cells[1], "b,\"c");
  EXPECT_EQ(cells[2], "");
  EXPECT_EQ(cells[3], "d");
  EXPECT_EQ(cells[4], "");
  EXPECT_FALSE(SplitCsvLine("a,\"b", cells, scratch));
  EXPECT_FALSE(SplitCsvLine("a,\"b\"x,c", cells, scratch));
}

}  // namespace
}  // namespace servesim
