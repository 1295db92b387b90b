// Test support shared by the sweep tests (sweep_test, sweep_shard_test,
// capacity_sim_test): whole-file reads, a fresh temporary directory per
// test, and grids from text format. Header-only; tests only.
#ifndef SERVESIM_EXPERIMENTS_CAPACITY_SWEEP_TEST_UTIL_H_
#define SERVESIM_EXPERIMENTS_CAPACITY_SWEEP_TEST_UTIL_H_

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "proto/sweep.pb.h"

namespace servesim::sweep_test {

// The bytes of `p` ("" when it cannot be read).
inline std::string ReadFile(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// TMPDIR/servesim_<suite>_<pid>_<name>, removed if it exists (not created):
// `suite` keeps test binaries that run at once apart, the pid their reruns.
inline std::filesystem::path FreshDir(const std::string& suite, const std::string& name) {
  std::filesystem::path dir = std::filesystem::temp_directory_path() /
                              absl::StrCat("servesim_", suite, "_", getpid(), "_", name);
  std::filesystem::remove_all(dir);
  return dir;
}

// A grid from text format; a parse failure fails the calling test.
inline proto::SweepGrid ParseGrid(const std::string& text) {
  proto::SweepGrid g;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &g)) << text;
  return g;
}

}  // namespace servesim::sweep_test

#endif  // SERVESIM_EXPERIMENTS_CAPACITY_SWEEP_TEST_UTIL_H_
