#include "sim/base/read_file.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace servesim {
namespace {

using ::testing::HasSubstr;

TEST(ReadTextFileTest, ReadsAFileAndRefusesWhatIsNotOne) {
  const std::string dir = ::testing::TempDir() + "/read_file_test";
  std::filesystem::create_directories(dir);
  const std::string file = dir + "/a.textproto", empty = dir + "/empty.textproto";
  std::ofstream(file) << "device: \"l4\"\n";
  std::ofstream(empty).flush();

  absl::StatusOr<std::string> ok = ReadTextFile(file, "calibration profile");
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(*ok, "device: \"l4\"\n");

  absl::StatusOr<std::string> d = ReadTextFile(dir, "calibration profile");
  EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(d.status().message(),
            "calibration profile " + dir + ": is a directory, not a file");

  absl::StatusOr<std::string> e = ReadTextFile(empty, "--config");
  EXPECT_EQ(e.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(e.status().message(), "--config " + empty + ": the file is empty");

  absl::StatusOr<std::string> m = ReadTextFile(dir + "/missing", "grid");
  EXPECT_EQ(m.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(m.status().message(), HasSubstr("grid " + dir + "/missing: cannot open"));
  EXPECT_THAT(m.status().message(), HasSubstr("No such file or directory"));
}

// An endless source stops at the cap with an error, not an ever-growing
// read (a fit config pointed at /dev/zero grew 200 MB/s); the exact cap
// fits, one byte more does not.
TEST(ReadTextFileTest, StopsAtTheCap) {
  absl::StatusOr<std::string> z = ReadTextFile("/dev/zero", "fit config", 1 << 20);
  EXPECT_EQ(z.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      z.status().message(),
      "fit config /dev/zero: larger than 1048576 bytes (servesim's text formats are "
      "far smaller: is it the right file?)");
  const std::string path = ::testing::TempDir() + "/read_file_cap.textproto";
  { std::ofstream(path) << std::string(100, 'x'); }
  EXPECT_TRUE(ReadTextFile(path, "grid", 100).ok());
  EXPECT_FALSE(ReadTextFile(path, "grid", 99).ok());
  std::remove(path.c_str());
}

}  // namespace
}  // namespace servesim
