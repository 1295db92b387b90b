#include "sim/base/hash.h"

#include "gtest/gtest.h"
#include "sim/base/int_math.h"

namespace servesim {
namespace {

// Pinned values: every prefix key, RNG stream and trace hash derives from
// these functions, so a change here would change every result.
TEST(HashTest, Mix64IsSplitMix64) {
  // SplitMix64 seeded with 0: first two outputs.
  EXPECT_EQ(Mix64(0), 0xe220a8397b1dcdafULL);
  EXPECT_EQ(Mix64(kGoldenGamma), 0x6e789e6aa1b965f4ULL);
  EXPECT_EQ(Mix64(0), SplitMix64Finalize(kGoldenGamma));
}

TEST(HashTest, HashCombineIsOrderDependent) {
  EXPECT_NE(HashCombine(1, 2), HashCombine(2, 1));
  EXPECT_EQ(HashCombine(0, 0), SplitMix64Finalize(kGoldenGamma));
}

TEST(HashTest, Fnv1a64MatchesTheReferenceVectors) {
  // The FNV reference vectors (offset basis for ""; "a"; "foobar").
  EXPECT_EQ(Fnv1a64Hash(""), 0xcbf29ce484222325ULL);
  EXPECT_EQ(Fnv1a64Hash("a"), 0xaf63dc4c8601ec8cULL);
  EXPECT_EQ(Fnv1a64Hash("foobar"), 0x85944171f73967e8ULL);
  Fnv1a64 h;
  h.AddU64(0x6162);  // "ba" then six zero bytes, least significant first
  Fnv1a64 g;
  g.Add(std::string_view("ba\0\0\0\0\0\0", 8));
  EXPECT_EQ(h.value(), g.value());
}

TEST(IntMathTest, CeilDivKeepsSixtyFourBits) {
  EXPECT_EQ(CeilDiv(0, 16), 0);
  EXPECT_EQ(CeilDiv(16, 16), 1);
  EXPECT_EQ(CeilDiv(17, 16), 2);
  // Past int32: no narrowing.
  EXPECT_EQ(CeilDiv(int64_t{1} << 40, 16), int64_t{1} << 36);
}

}  // namespace
}  // namespace servesim
