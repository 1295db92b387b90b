#include "traces/json.h"

#include <cmath>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace servesim {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using Kind = FlatJsonField::Kind;

TEST(JsonTest, ParsesNestedDocumentAndDecodesEscapes) {
  auto v =
      ParseJson(R"({"a": [1, -2.5e3, true, null], "s": "x\u00e9\ud83d\ude00\n"})", "t");
  ASSERT_TRUE(v.ok()) << v.status();
  const JsonValue* a = v->Find("a");
  ASSERT_NE(a, nullptr);
  ASSERT_EQ(a->items.size(), 4u);
  EXPECT_EQ(a->items[1].number, -2500);
  EXPECT_TRUE(a->items[2].bool_value);
  EXPECT_EQ(v->Find("s")->str, "x\xC3\xA9\xF0\x9F\x98\x80\n");
}

// A bench file's per-request arrays: numbers kept 8 bytes each (a JsonValue
// per number took ~60x the file's text in memory); any other item leaves
// the array as items, numbers included, in order.
TEST(JsonTest, PackedNumberArraysHoldNumbersAndUnpackOnAnyOtherItem) {
  const JsonParseOptions packed{.pack_number_arrays = true};
  auto v =
      ParseJson(R"({"n": [1, 2.5, -3e2], "m": [1, 2, "x", 4], "e": [], "z": [1, null],
                        "nested": [[7, 8], [9]]})",
                "t", packed);
  ASSERT_TRUE(v.ok()) << v.status();
  const JsonValue* n = v->Find("n");
  ASSERT_TRUE(n->packed);
  EXPECT_TRUE(n->items.empty());
  EXPECT_EQ(n->numbers, (std::vector<double>{1, 2.5, -300}));
  const JsonValue* m = v->Find("m");
  EXPECT_FALSE(m->packed);
  ASSERT_EQ(m->items.size(), 4u);
  EXPECT_EQ(m->items[1].number, 2);
  EXPECT_EQ(m->items[2].str, "x");
  EXPECT_EQ(m->items[3].number, 4);
  EXPECT_TRUE(v->Find("e")->items.empty());  // empty: neither
  EXPECT_TRUE(v->Find("e")->numbers.empty());
  const JsonValue* z = v->Find("z");
  EXPECT_FALSE(z->packed);  // null is no number
  EXPECT_EQ(z->items[1].type, JsonValue::Type::kNull);
  const JsonValue* nested = v->Find("nested");
  ASSERT_FALSE(nested->packed);
  ASSERT_EQ(nested->items.size(), 2u);
  EXPECT_EQ(nested->items[0].numbers, (std::vector<double>{7, 8}));
  // Without the option, arrays are items as before.
  auto plain = ParseJson("[1, 2]", "t");
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE(plain->packed);
  EXPECT_EQ(plain->items.size(), 2u);
}

TEST(JsonTest, RejectsTrailingGarbageAndBadNumbers) {
  EXPECT_FALSE(ParseJson("{} x", "t").ok());
  EXPECT_FALSE(ParseJson("[01]", "t").ok());
  EXPECT_FALSE(ParseJson("[1.]", "t").ok());
  EXPECT_FALSE(ParseJson("[-]", "t").ok());
  EXPECT_FALSE(ParseJson("\"\\x\"", "t").ok());
  EXPECT_FALSE(ParseJson("\"\\ud800\"", "t").ok());  // lone surrogate
}

TEST(JsonTest, RejectsDeepNestingWithoutCrashing) {
  std::string deep(100000, '[');
  auto v = ParseJson(deep, "t");
  ASSERT_FALSE(v.ok());
  EXPECT_THAT(v.status().message(), HasSubstr("nesting"));
}

TEST(JsonTest, ErrorNamesLineAndColumn) {
  auto v = ParseJson("{\n  \"a\": tru }", "f.json");
  ASSERT_FALSE(v.ok());
  EXPECT_THAT(v.status().message(), HasSubstr("f.json:2:8"));
}

// A key twice in one object is an error in both parsers (Python's json
// keeps the last value, these would read the first: the row is ambiguous);
// the same key in two different objects is fine.
TEST(JsonTest, DuplicateKeyInAnObjectIsAnError) {
  auto dom = ParseJson("{\"a\": 1,\n \"b\": {\"c\": 1, \"c\": 2}}", "f.json");
  EXPECT_EQ(dom.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(dom.status().message(),
            "f.json:2:19: invalid JSON: duplicate key \"c\" in an object");
  EXPECT_TRUE(ParseJson(R"({"a": {"c": 1}, "b": {"c": 2}})", "f.json").ok());
  FlatJsonParser flat;
  const absl::Status st = flat.Parse(R"({"input_length": 10, "input_length": 99999})");
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(st.message(),
            "invalid JSON at column 43: duplicate key \"input_length\" in an "
            "object");
  EXPECT_TRUE(flat.Parse(R"({"input_length": 10, "output_length": 10})").ok());
}

TEST(JsonTest, Utf8ValidatorRejectsOverlongsSurrogatesAndCutSequences) {
  EXPECT_TRUE(IsValidUtf8("plain \xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80"));
  EXPECT_FALSE(IsValidUtf8("\xC0\xAF"));          // overlong '/'
  EXPECT_FALSE(IsValidUtf8("\xED\xA0\x80"));      // surrogate
  EXPECT_FALSE(IsValidUtf8("\xF4\x90\x80\x80"));  // > U+10FFFF
  EXPECT_FALSE(IsValidUtf8("ab\xE2\x82"));        // cut
  EXPECT_FALSE(IsValidUtf8("\xFF"));
}

TEST(FlatJsonParserTest, ParsesMooncakeLine) {
  FlatJsonParser p;
  ASSERT_TRUE(
      p.Parse(R"({"timestamp": 27, "input_length": 6758, "hash_ids": [0, 1, 22]})").ok());
  ASSERT_EQ(p.fields().size(), 3u);
  const FlatJsonField* h = p.Find("hash_ids");
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(h->kind, Kind::kNumberArray);
  EXPECT_EQ(h->array_end - h->array_begin, 3u);
  EXPECT_EQ(p.numbers()[h->array_begin + 2].raw, "22");
  EXPECT_EQ(p.numbers()[h->array_begin + 2].value, 22u);
  EXPECT_TRUE(p.numbers()[h->array_begin + 2].is_uint);
  EXPECT_EQ(p.Find("timestamp")->raw, "27");
}

TEST(FlatJsonParserTest, ArrayNumbersThatAreNotPlainUint64AreFlagged) {
  FlatJsonParser p;
  ASSERT_TRUE(
      p.Parse(R"({"a": [1.5, -2, 18446744073709551616, 18446744073709551615, 0]})").ok());
  const auto& n = p.numbers();
  ASSERT_EQ(p.num_numbers(), 5u);
  EXPECT_FALSE(n[0].is_uint);
  EXPECT_EQ(n[0].raw, "1.5");
  EXPECT_FALSE(n[1].is_uint);
  EXPECT_FALSE(n[2].is_uint);  // 2^64 overflows
  EXPECT_TRUE(n[3].is_uint);
  EXPECT_EQ(n[3].value, 18446744073709551615u);
  EXPECT_TRUE(n[4].is_uint);
  EXPECT_FALSE(p.Parse(R"({"a": [01]})").ok());
}

TEST(FlatJsonParserTest, NestedValuesBecomeOtherButAreValidated) {
  FlatJsonParser p;
  ASSERT_TRUE(
      p.Parse(R"({"a": {"b": [1, 2]}, "c": ["x", 1], "d": "v", "e": null})").ok());
  EXPECT_EQ(p.Find("a")->kind, Kind::kOther);
  EXPECT_EQ(p.Find("c")->kind, Kind::kOther);
  EXPECT_EQ(p.Find("d")->kind, Kind::kString);
  EXPECT_EQ(p.Find("e")->kind, Kind::kNull);
  EXPECT_FALSE(p.Parse(R"({"a": {"b": [1, 2}})").ok());
  EXPECT_FALSE(p.Parse(R"({"c": ["x", 1})").ok());
}

TEST(FlatJsonParserTest, TruncatedLineSaysTruncated) {
  FlatJsonParser p;
  auto st = p.Parse(R"({"timestamp": 27, "input_length": 6758, "hash_ids": [0, 1)");
  ASSERT_FALSE(st.ok());
  EXPECT_THAT(st.message(), HasSubstr("truncated"));
}

// A byte-order mark is named, in both parsers, when the parse fails at it.
TEST(JsonTest, LeadingByteOrderMarkIsNamed) {
  auto dom = ParseJson("\xEF\xBB\xBF{\"a\": 1}", "f.json");
  ASSERT_FALSE(dom.ok());
  EXPECT_THAT(dom.status().message(), HasSubstr("f.json:1:1"));
  EXPECT_THAT(dom.status().message(), HasSubstr("UTF-8 byte-order mark"));
  FlatJsonParser flat;
  const absl::Status st = flat.Parse("\xEF\xBB\xBF{\"input_length\": 10}");
  EXPECT_THAT(st.message(), HasSubstr("invalid JSON at column 1"));
  EXPECT_THAT(st.message(), HasSubstr("UTF-8 byte-order mark"));
  // Any other bad first byte says nothing of a BOM.
  EXPECT_THAT(flat.Parse("x{}").message(), Not(HasSubstr("byte-order")));
}

TEST(FlatJsonParserTest, RejectsInvalidUtf8InStrings) {
  FlatJsonParser p;
  auto st = p.Parse("{\"type\": \"te\xFFxt\"}");
  ASSERT_FALSE(st.ok());
  EXPECT_THAT(st.message(), HasSubstr("UTF-8"));
}

}  // namespace
}  // namespace servesim

namespace servesim {
namespace {

// Found by the JSON fuzzer: the flat parser accepted a number whose
// magnitude overflows a double, the DOM parser rejected it. Both accept it
// now (as Python's json does: +-inf / 0); readers reject it by range.
TEST(JsonTest, DomAndFlatParsersAgreeOnOverflowingNumbers) {
  const std::string text = "{\"ch\":\r\r [144e839, -1e-999]}\n";
  auto doc = ParseJson(text, "fuzz");
  ASSERT_TRUE(doc.ok()) << doc.status();
  FlatJsonParser flat;
  EXPECT_TRUE(flat.Parse(text).ok());
  const JsonValue* ch = doc->Find("ch");
  ASSERT_NE(ch, nullptr);
  ASSERT_EQ(ch->items.size(), 2u);
  EXPECT_TRUE(std::isinf(ch->items[0].number));
  EXPECT_EQ(ch->items[1].number, 0.0);
}

}  // namespace
}  // namespace servesim
