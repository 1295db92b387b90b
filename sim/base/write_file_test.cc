#include "sim/base/write_file.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace servesim {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Entries of `dir` (hidden temporaries included).
int NumEntries(const std::string& dir) {
  int n = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir)) ++n;
  return n;
}

TEST(WriteFileWholeTest, WritesAndReplacesKeepingTheModeAndNoTemporary) {
  const std::string dir = ::testing::TempDir() + "/write_file_test_a";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string path = dir + "/out.json";
  ASSERT_TRUE(WriteFileWhole(path, "first").ok());
  EXPECT_EQ(Slurp(path), "first");
  ASSERT_EQ(::chmod(path.c_str(), 0640), 0);
  ASSERT_TRUE(WriteFileWhole(path, "second, longer").ok());
  EXPECT_EQ(Slurp(path), "second, longer");
  struct stat st = {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0640u);
  EXPECT_EQ(NumEntries(dir), 1);  // no temporary left
  ASSERT_TRUE(WriteFileWhole(path, "").ok());
  EXPECT_EQ(Slurp(path), "");
  // Through a symlink: its target is replaced, the link stays.
  const std::string link = dir + "/link.json";
  fs::create_symlink(path, link);
  ASSERT_TRUE(WriteFileWhole(link, "via link").ok());
  EXPECT_TRUE(fs::is_symlink(link));
  EXPECT_EQ(Slurp(path), "via link");
}

// A full disk: the error says so, names the file, and leaves nothing.
// (/dev/full is not a regular file, so it is written in place: ENOSPC.)
TEST(WriteFileWholeTest, AFailedWriteNamesTheFileAndTheReason) {
  if (!fs::exists("/dev/full")) GTEST_SKIP() << "no /dev/full";
  const absl::Status full = WriteFileWhole("/dev/full", std::string(1 << 16, 'x'));
  EXPECT_EQ(full.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(full.message(),
              HasSubstr("/dev/full: cannot write: No space left on device"));

  const std::string dir = ::testing::TempDir() + "/write_file_test_b";
  fs::remove_all(dir);
  const absl::Status missing = WriteFileWhole(dir + "/no/such/folder/out.csv", "x");
  EXPECT_FALSE(missing.ok());
  EXPECT_THAT(missing.message(),
              HasSubstr(dir + "/no/such/folder/out.csv: cannot write"));
  EXPECT_THAT(missing.message(), HasSubstr("No such file or directory"));
}

// SIGTERM (or SIGINT) while a temporary exists removes it, and the process
// still dies of the signal. Run in a child.
TEST(WriteFileWholeTest, ASignalRemovesTheRegisteredTemporaries) {
  const std::string dir = ::testing::TempDir() + "/write_file_test_c";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    RemoveTemporariesOnSignals();
    TemporaryFile t;
    if (!CreateTemporaryBeside(dir + "/big.csv", &t).ok()) ::_exit(3);
    if (::write(t.fd, "partial", 7) != 7) ::_exit(4);
    ::raise(SIGTERM);
    ::_exit(5);  // not reached
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status)) << "exit " << WEXITSTATUS(status);
  EXPECT_EQ(WTERMSIG(status), SIGTERM);
  EXPECT_EQ(NumEntries(dir), 0);
}

// Without the handler the temporary stays (the test above is not vacuous).
TEST(WriteFileWholeTest, WithoutTheHandlerTheTemporaryStays) {
  const std::string dir = ::testing::TempDir() + "/write_file_test_d";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::signal(SIGTERM, SIG_DFL);
    TemporaryFile t;
    if (!CreateTemporaryBeside(dir + "/big.csv", &t).ok()) ::_exit(3);
    ::raise(SIGTERM);
    ::_exit(5);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(NumEntries(dir), 1);
}

}  // namespace
}  // namespace servesim
