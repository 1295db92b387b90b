#include "sim/base/json_writer.h"

#include <cmath>
#include <cstdlib>
#include <limits>

#include "gtest/gtest.h"

namespace servesim {
namespace {

TEST(JsonWriterTest, WritesNestedObjectsAndArraysWithCommas) {
  JsonWriter w;
  w.BeginObject()
      .KV("a", int64_t{1})
      .Key("b")
      .BeginArray()
      .Int(2)
      .Double(0.5)
      .Null()
      .EndArray();
  w.Key("c").BeginObject().EndObject().KV("d", true).EndObject();
  EXPECT_EQ(w.str(), R"({"a":1,"b":[2,0.5,null],"c":{},"d":true})");
  EXPECT_TRUE(w.Complete());
}

TEST(JsonWriterTest, EscapesControlCharactersQuotesAndBackslashes) {
  JsonWriter w;
  w.String(std::string("a\"b\\c\n\x01", 7));
  EXPECT_EQ(w.str(), "\"a\\\"b\\\\c\\n\\u0001\"");
}

// A device name with a Latin-1 byte made `simulate --json` write invalid
// UTF-8: well-formed sequences pass through, every other byte (a lone
// continuation, a truncated sequence, an overlong form, a surrogate)
// becomes U+FFFD.
TEST(JsonWriterTest, InvalidUtf8BecomesReplacementCharacters) {
  auto json = [](std::string_view s) {
    JsonWriter w;
    w.String(s);
    return w.str();
  };
  EXPECT_EQ(json("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"),
            "\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"");
  EXPECT_EQ(json("caf\xe9"), "\"caf\\ufffd\"");                  // Latin-1 e-acute
  EXPECT_EQ(json("\x80x"), "\"\\ufffdx\"");                      // lone continuation
  EXPECT_EQ(json("\xe2\x82"), "\"\\ufffd\\ufffd\"");             // cut short
  EXPECT_EQ(json("\xc0\xaf"), "\"\\ufffd\\ufffd\"");             // overlong '/'
  EXPECT_EQ(json("\xed\xa0\x80"), "\"\\ufffd\\ufffd\\ufffd\"");  // a surrogate
  EXPECT_EQ(json("\xf4\x90\x80\x80"),
            "\"\\ufffd\\ufffd\\ufffd\\ufffd\"");  // above U+10FFFF
}

TEST(JsonWriterTest, DoublesAreShortestRoundTrip) {
  for (double v : {0.1, 1.0 / 3.0, 1e-300, 123456789.125, -2.5e20}) {
    const std::string s = FormatDouble(v);
    EXPECT_EQ(std::strtod(s.c_str(), nullptr), v) << s;
  }
  EXPECT_EQ(FormatDouble(0.1), "0.1");
  EXPECT_EQ(FormatDouble(3.0), "3");
  EXPECT_EQ(FormatDouble(-0.0), "0");
}

TEST(JsonWriterTest, NonFiniteDoublesBecomeNull) {
  JsonWriter w;
  w.BeginArray()
      .Double(std::numeric_limits<double>::infinity())
      .Double(std::nan(""))
      .EndArray();
  EXPECT_EQ(w.str(), "[null,null]");
  EXPECT_EQ(FormatDouble(std::nan(""), ""), "");
}

TEST(JsonWriterTest, PrettyPrintIndentsEachLevel) {
  JsonWriter w(2);
  w.BeginObject().Key("x").BeginArray().Int(1).EndArray().EndObject();
  EXPECT_EQ(w.str(), "{\n  \"x\": [\n    1\n  ]\n}");
}

TEST(JsonWriterTest, CsvCellsAreQuotedOnlyWhenNeeded) {
  std::string s;
  AppendCsvCell(s, "plain");
  s.push_back('|');
  AppendCsvCell(s, "a,\"b\"");
  EXPECT_EQ(s, "plain|\"a,\"\"b\"\"\"");
}

}  // namespace
}  // namespace servesim
