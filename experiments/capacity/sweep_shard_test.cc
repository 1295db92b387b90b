#include "experiments/capacity/sweep_shard.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "experiments/capacity/sweep.h"
#include "experiments/capacity/sweep_rows.h"
#include "experiments/capacity/sweep_test_util.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"

namespace servesim {
namespace {

namespace fs = std::filesystem;
using sweep_test::ReadFile;
using ::testing::HasSubstr;

fs::path FreshDir(const std::string& name) {
  return sweep_test::FreshDir("sweep_shard_test", name);
}

// 3 x 4 = 12 points; device "nofit" makes the runner fail (an error point).
constexpr char kGrid12[] = R"(
  name: "shard12"
  base { server { device: "l4" model: "gemma-4-e2b" } }
  axes { path: "server.device" values: [ "t4", "l4", "nofit" ] }
  axes { path: "client.max_concurrency" values: [ "1", "2", "3", "4" ] }
)";

proto::SweepGrid Grid12() { return sweep_test::ParseGrid(kGrid12); }

// Deterministic fake of the simulator, counting calls per config hash.
struct CountingRunner {
  std::map<std::string, int> calls;
  PointRunner Runner() {
    PointRunner r;
    r.metric_names = {"output_throughput", "ratio"};
    r.run =
        [this](const proto::ExperimentConfig& c) -> absl::StatusOr<std::vector<double>> {
      ++calls[ConfigHashHex(c)];
      if (c.server().device() == "nofit") return absl::FailedPreconditionError("no fit");
      return std::vector<double>{c.client().max_concurrency() * 100.0 / 3.0,
                                 static_cast<double>(ConfigHash(c) % 1000) / 7.0};
    };
    return r;
  }
};

// Both folders hold the same result files, byte for byte.
void ExpectSameResults(const fs::path& a, const fs::path& b) {
  for (const char* f : {"results.jsonl", "results.csv"}) {
    EXPECT_EQ(ReadFile(a / f), ReadFile(b / f)) << f;
  }
}

SweepOptions Shard(int k, int n) {
  SweepOptions o;
  o.progress = 0;
  o.shard_index = k;
  o.shard_count = n;
  return o;
}

TEST(OwnsPointTest, EveryPointBelongsToExactlyOneShard) {
  for (int n : {1, 2, 3, 4, 7}) {
    for (int64_t id = 0; id < 50; ++id) {
      int owners = 0;
      for (int k = 0; k < n; ++k) owners += OwnsPoint(k, n, id);
      EXPECT_EQ(owners, 1) << id << " of " << n;
    }
  }
}

TEST(ParseShardTest, AcceptsKOfNAndRejectsOutOfRange) {
  absl::StatusOr<ShardSpec> s = ParseShard("3/4");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->index, 3);
  EXPECT_EQ(s->count, 4);
  EXPECT_TRUE(ParseShard("0/1").ok());
  EXPECT_TRUE(ParseShard("99999/100000").ok());
  for (const char* bad : {"4/4", "-1/4", "1/0", "0/100001", "a/b", "1", "", "1/2/3"}) {
    absl::StatusOr<ShardSpec> r = ParseShard(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_THAT(r.status().message(), HasSubstr("--shard"));
    EXPECT_THAT(r.status().message(), HasSubstr("K in [0, N-1]"));
  }
}

TEST(SweepShardTest, ShardsRunTheirPointsOnceAndMergeToTheLocalBytes) {
  const proto::SweepGrid grid = Grid12();
  const fs::path root = FreshDir("merge");
  CountingRunner local_runner;
  ASSERT_TRUE(
      RunSweep(grid, (root / "local").string(), local_runner.Runner(), Shard(0, 1)).ok());
  CountingRunner runner;
  std::vector<std::string> dirs;
  for (int k = 0; k < 5; ++k) {  // 5 does not divide 12: uneven shards
    dirs.push_back((root / absl::StrCat("shard-", k)).string());
    absl::StatusOr<SweepSummary> s =
        RunSweep(grid, dirs.back(), runner.Runner(), Shard(k, 5));
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_TRUE(s->complete);
    EXPECT_EQ(s->num_points, k < 2 ? 3 : 2);
    EXPECT_EQ(ReadFile(fs::path(dirs.back()) / "shard.txt"), absl::StrCat(k, "/5\n"));
  }
  EXPECT_EQ(runner.calls.size(), 12u);
  for (const auto& [hash, n] : runner.calls) EXPECT_EQ(n, 1) << hash;
  absl::StatusOr<MergeSummary> m = MergeSweepShards(dirs, (root / "merged").string());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->num_points, 12);
  for (const char* f : {"grid.textproto", "results.jsonl", "results.csv"}) {
    EXPECT_EQ(ReadFile(root / "merged" / f), ReadFile(root / "local" / f)) << f;
  }
  fs::remove_all(root);
}

TEST(SweepShardTest, UnfinishedShardIsNamedAndResumesToTheSameBytes) {
  const proto::SweepGrid grid = Grid12();
  const fs::path root = FreshDir("resume");
  CountingRunner runner;
  ASSERT_TRUE(
      RunSweep(grid, (root / "local").string(), runner.Runner(), Shard(0, 1)).ok());
  std::vector<std::string> dirs = {(root / "s0").string(), (root / "s1").string()};
  ASSERT_TRUE(RunSweep(grid, dirs[0], runner.Runner(), Shard(0, 2)).ok());
  SweepOptions stop = Shard(1, 2);
  stop.stop_after = 2;  // as a killed task leaves it
  absl::StatusOr<SweepSummary> s = RunSweep(grid, dirs[1], runner.Runner(), stop);
  ASSERT_TRUE(s.ok());
  EXPECT_FALSE(s->complete);
  absl::StatusOr<MergeSummary> m = MergeSweepShards(dirs, (root / "m").string());
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(), HasSubstr("is in no shard folder (its shard 1/2, "));
  EXPECT_THAT(m.status().message(), HasSubstr("rerun it to resume"));
  CountingRunner rerun;
  s = RunSweep(grid, dirs[1], rerun.Runner(), Shard(1, 2));
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->num_resumed, 2);
  EXPECT_EQ(s->num_run, 4);
  m = MergeSweepShards(dirs, (root / "m").string());
  ASSERT_TRUE(m.ok()) << m.status();
  ExpectSameResults(root / "m", root / "local");
  fs::remove_all(root);
}

// A line whose status was corrupted (the jsonl and the csv disagree, or
// the word is none of ok / infeasible / error) is not merged as it is: the
// merge names the point and folder, and rerunning the shard reruns that
// point alone, after which the merge gives the local bytes.
TEST(SweepShardTest, ACorruptedStatusIsNamedAndItsPointRerun) {
  const proto::SweepGrid grid = Grid12();
  const fs::path root = FreshDir("corrupt");
  CountingRunner runner;
  ASSERT_TRUE(
      RunSweep(grid, (root / "local").string(), runner.Runner(), Shard(0, 1)).ok());
  const std::vector<std::string> dirs = {(root / "s0").string(), (root / "s1").string()};
  ASSERT_TRUE(RunSweep(grid, dirs[0], runner.Runner(), Shard(0, 2)).ok());
  ASSERT_TRUE(RunSweep(grid, dirs[1], runner.Runner(), Shard(1, 2)).ok());
  const fs::path jsonl = fs::path(dirs[1]) / "results.jsonl";
  std::string text = ReadFile(jsonl);
  // A resume reruns the corrupted point and the shard's error points.
  int errors = 0;
  for (size_t e = text.find("\"status\":\"error\""); e != std::string::npos;
       e = text.find("\"status\":\"error\"", e + 1))
    ++errors;
  const size_t at = text.find("\"status\":\"ok\"");
  ASSERT_NE(at, std::string::npos);
  text.replace(at, 13, "\"status\":\"okk\"");
  std::ofstream(jsonl, std::ios::binary | std::ios::trunc) << text;
  absl::StatusOr<MergeSummary> m = MergeSweepShards(dirs, (root / "m").string());
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(), HasSubstr(absl::StrCat(" in ", dirs[1], ": ")));
  EXPECT_THAT(m.status().message(), HasSubstr("do not agree on a status"));
  CountingRunner rerun;
  absl::StatusOr<SweepSummary> s = RunSweep(grid, dirs[1], rerun.Runner(), Shard(1, 2));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->num_run, 1 + errors);
  m = MergeSweepShards(dirs, (root / "m").string());
  ASSERT_TRUE(m.ok()) << m.status();
  ExpectSameResults(root / "m", root / "local");
  fs::remove_all(root);
}

// A folder that held one shard and then the whole grid kept the shard's
// shard.txt, so merge took it for a shard: the whole run removes it, and
// resumes the shard's finished points.
TEST(SweepShardTest, AWholeGridRunIntoAShardFolderDropsTheShardMark) {
  const proto::SweepGrid grid = Grid12();
  const fs::path root = FreshDir("mark");
  CountingRunner runner;
  ASSERT_TRUE(RunSweep(grid, (root / "d").string(), runner.Runner(), Shard(0, 2)).ok());
  ASSERT_TRUE(fs::exists(root / "d" / "shard.txt"));
  absl::StatusOr<SweepSummary> s =
      RunSweep(grid, (root / "d").string(), runner.Runner(), Shard(0, 1));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_GT(s->num_resumed, 0);  // the shard's answered points (errors rerun)
  EXPECT_EQ(s->num_resumed + s->num_run, 12);
  EXPECT_FALSE(fs::exists(root / "d" / "shard.txt"));
  fs::remove_all(root);
}

TEST(SweepRowsTest, AgreedStatusReadsBothLines) {
  const std::string j =
      R"({"point":3,"config_hash":"0123456789abcdef","axes":{"a":"x\"},\"status\":\"ok"},)"
      R"("status":"infeasible","error":"e","metrics":{"m":null}})"
      "\n";
  EXPECT_EQ(AgreedStatus(j, "3,0123456789abcdef,\"x\"\"},,\",infeasible,e,\n", 1),
            "infeasible");
  EXPECT_EQ(AgreedStatus(j, "3,0123456789abcdef,y,ok,e,\n", 1), "");
  EXPECT_EQ(AgreedStatus(j, "3,0123456789abcdef,y\n", 1), "");  // too few cells
}

TEST(SweepShardTest, APointInTwoFoldersOrADifferentGridIsAnError) {
  const proto::SweepGrid grid = Grid12();
  const fs::path root = FreshDir("dup");
  CountingRunner runner;
  const std::string a = (root / "a").string(), b = (root / "b").string();
  ASSERT_TRUE(RunSweep(grid, a, runner.Runner(), Shard(0, 2)).ok());
  ASSERT_TRUE(RunSweep(grid, b, runner.Runner(), Shard(1, 2)).ok());
  absl::StatusOr<MergeSummary> m = MergeSweepShards({a, b, a}, (root / "m").string());
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(), HasSubstr("point 0 is in both"));
  proto::SweepGrid other = grid;
  other.mutable_base()->mutable_client()->set_num_prompts(9);
  const std::string c = (root / "c").string();
  ASSERT_TRUE(RunSweep(other, c, runner.Runner(), Shard(1, 2)).ok());
  m = MergeSweepShards({a, c}, (root / "m").string());
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(), HasSubstr("a different grid"));
  m = MergeSweepShards({(root / "missing").string()}, (root / "m").string());
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(), HasSubstr("missing/grid.textproto: cannot open"));
  fs::remove_all(root);
}

}  // namespace
}  // namespace servesim
