#include "sim/base/read_file.h"

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

}  // namespace
}  // namespace servesim
