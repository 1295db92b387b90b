#include "experiments/capacity/sweep.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "experiments/capacity/sweep_test_util.h"
#include "experiments/runner/config.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "sim/base/version.h"

namespace servesim {
namespace {

namespace fs = std::filesystem;
using sweep_test::ParseGrid;
using sweep_test::ReadFile;
using ::testing::HasSubstr;

fs::path FreshDir(const std::string& name) {
  return sweep_test::FreshDir("sweep_test", name);
}

// 5 x 10 x 10 = 500 cheap points; one device value makes the runner fail.
proto::SweepGrid Grid500() {
  return ParseGrid(R"pb(
    name: "fake500"
    base {
      server { device: "l4" model: "gemma-4-e2b" }
      client { num_prompts: 8 random_input_len: 128 random_output_len: 16 }
    }
    axes {
      path: "server.device"
      values: [ "t4", "l4", "mi300x", "tpu-v5e", "nofit" ]
    }
    axes {
      path: "client.max_concurrency"
      values: [ "1", "2", "3", "4", "5", "6", "7", "8", "9", "10" ]
    }
    axes {
      path: "client.random_input_len"
      name: "input_len"
      values: [ "64", "128", "256", "512", "1024", "2048", "4096", "8192", "16", "32" ]
    }
  )pb");
}

// A deterministic fake of the simulator: metrics from the config, a tiny
// hash-dependent delay so points finish out of order with several jobs.
class FakeRunner {
 public:
  explicit FakeRunner(int delay_us = 50) : delay_us_(delay_us) {}

  PointRunner Runner() {
    PointRunner r;
    r.metric_names = {"output_throughput", "p99_ttft_ms", "ratio"};
    r.run =
        [this](const proto::ExperimentConfig& c) -> absl::StatusOr<std::vector<double>> {
      const uint64_t h = ConfigHash(c);
      {
        std::lock_guard<std::mutex> lock(mu_);
        ++calls_[ConfigHashHex(c)];
      }
      std::this_thread::sleep_for(std::chrono::microseconds(delay_us_ * (h % 7)));
      if (c.server().device() == "nofit") {
        return absl::ResourceExhaustedError("model does not fit, \"quoted\"");
      }
      if (c.server().device() == "toolong") {
        return absl::OutOfRangeError("input + output exceeds max_model_len");
      }
      if (c.server().device() == "broken") {
        return absl::InvalidArgumentError("trace.csv:3: bad record");
      }
      const double conc = c.client().max_concurrency();
      return std::vector<double>{conc * 100.0 / 3.0, c.client().random_input_len() / 7.0,
                                 static_cast<double>(h % 1000) / 11.0};
    };
    return r;
  }
  std::map<std::string, int> calls() {
    std::lock_guard<std::mutex> lock(mu_);
    return calls_;
  }

 private:
  int delay_us_;
  std::mutex mu_;
  std::map<std::string, int> calls_;
};

TEST(SetFieldByPathTest, SetsNestedScalarsOfEachType) {
  proto::ExperimentConfig c;
  ASSERT_TRUE(SetFieldByPath(c, "server.device", "l4").ok());
  ASSERT_TRUE(SetFieldByPath(c, "client.max_concurrency", "16").ok());
  ASSERT_TRUE(SetFieldByPath(c, "client.request_rate", "2.5").ok());
  ASSERT_TRUE(SetFieldByPath(c, "client.seed", "7").ok());
  ASSERT_TRUE(SetFieldByPath(c, "server.enable_prefix_caching", "false").ok());
  ASSERT_TRUE(SetFieldByPath(c, "server.gpu_memory_utilization", "0.95").ok());
  EXPECT_EQ(c.server().device(), "l4");
  EXPECT_EQ(c.client().max_concurrency(), 16);
  EXPECT_EQ(c.client().request_rate(), 2.5);
  EXPECT_EQ(c.client().seed(), 7u);
  EXPECT_TRUE(c.server().has_enable_prefix_caching());
  EXPECT_FALSE(c.server().enable_prefix_caching());
  EXPECT_EQ(c.server().gpu_memory_utilization(), 0.95);
}

TEST(SetFieldByPathTest, RepeatedIndexPastTheEndAddsElements) {
  proto::ExperimentConfig c;
  ASSERT_TRUE(SetFieldByPath(c, "fleet.replicas[1].count", "3").ok());
  ASSERT_EQ(c.fleet().replicas_size(), 2);
  EXPECT_EQ(c.fleet().replicas(1).count(), 3);
  ASSERT_TRUE(SetFieldByPath(c, "fleet.replicas[0].server.device", "t4").ok());
  EXPECT_EQ(c.fleet().replicas(0).server().device(), "t4");
}

TEST(SetFieldByPathTest, MessageFieldTakesTextFormatAndReplaces) {
  proto::ExperimentConfig c;
  c.mutable_fleet()->set_router("round-robin");
  ASSERT_TRUE(SetFieldByPath(c, "fleet",
                             "replicas { server { device: 'l4' } count: 2 } "
                             "replicas { server { device: 't4' } count: 1 }")
                  .ok());
  EXPECT_EQ(c.fleet().router(), "");  // replaced, not merged
  ASSERT_EQ(c.fleet().replicas_size(), 2);
  EXPECT_EQ(c.fleet().replicas(1).server().device(), "t4");
}

TEST(SetFieldByPathTest, UnknownFieldIsAnErrorListingTheFields) {
  proto::ExperimentConfig c;
  absl::Status st = SetFieldByPath(c, "client.max_concurency", "4");
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(st.message(), HasSubstr("max_concurency"));
  EXPECT_THAT(st.message(), HasSubstr("max_concurrency"));  // the list of fields
}

TEST(SetFieldByPathTest, ValueOfTheWrongTypeIsAnError) {
  proto::ExperimentConfig c;
  EXPECT_THAT(SetFieldByPath(c, "client.max_concurrency", "many").message(),
              HasSubstr("'many' is not an int32"));
  EXPECT_THAT(SetFieldByPath(c, "client.max_concurrency", "3000000000").message(),
              HasSubstr("not an int32"));
  EXPECT_THAT(SetFieldByPath(c, "server.enable_prefix_caching", "yes").message(),
              HasSubstr("true or false"));
  EXPECT_FALSE(SetFieldByPath(c, "fleet.replicas.count", "1").ok());  // needs [i]
  EXPECT_FALSE(SetFieldByPath(c, "server[0].device", "l4").ok());     // not repeated
  EXPECT_FALSE(SetFieldByPath(c, "server.device.x", "l4").ok());      // scalar
  EXPECT_FALSE(SetFieldByPath(c, "fleet", "replicas {").ok());        // bad text
}

TEST(ExpandGridTest, FirstAxisIsOutermostAndIdsAreIndices) {
  auto points = ExpandGrid(ParseGrid(R"pb(
    axes {
      path: "server.device"
      values: [ "t4", "l4" ]
    }
    axes {
      path: "client.max_concurrency"
      values: [ "1", "4", "16" ]
    }
  )pb"));
  ASSERT_TRUE(points.ok()) << points.status();
  ASSERT_EQ(points->size(), 6u);
  const char* devices[] = {"t4", "t4", "t4", "l4", "l4", "l4"};
  const int conc[] = {1, 4, 16, 1, 4, 16};
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ((*points)[i].id, i);
    EXPECT_EQ((*points)[i].config.server().device(), devices[i]);
    EXPECT_EQ((*points)[i].config.client().max_concurrency(), conc[i]);
  }
}

TEST(ExpandGridTest, ZippedAxesMoveTogether) {
  auto points = ExpandGrid(ParseGrid(R"pb(
    axes {
      path: "client.random_input_len"
      zip: "ctx"
      values: [ "128", "1024" ]
    }
    axes {
      path: "client.max_concurrency"
      values: [ "1", "4" ]
    }
    axes {
      path: "client.num_prompts"
      zip: "ctx"
      values: [ "8", "16" ]
    }
  )pb"));
  ASSERT_TRUE(points.ok()) << points.status();
  ASSERT_EQ(points->size(), 4u);
  for (const auto& p : *points) {
    EXPECT_EQ(p.config.client().num_prompts(),
              p.config.client().random_input_len() == 128 ? 8 : 16);
  }
  EXPECT_EQ((*points)[1].config.client().max_concurrency(), 4);
  EXPECT_EQ((*points)[2].config.client().random_input_len(), 1024);
}

// An axis value the config reads as unset (an empty string the defaults
// fill) would run the default under the value's label: an error naming the
// axis and value. A 0 of a field whose presence is tracked stays a 0, and
// the range check (run on every point before a sweep starts) names the
// flag. A value the defaults keep (0 seeds, ratio 0) is fine.
TEST(ExpandGridTest, AxisValueTheDefaultsWouldReplaceIsAnError) {
  auto points = ExpandGrid(ParseGrid(
      R"pb(base { server { device: "l4" model: "gemma-4-e2b" } }
           axes {
             path: "server.dtype"
             values: [ "bf16", "" ]
           })pb"));
  EXPECT_EQ(points.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(points.status().message(),
              HasSubstr("axis 0 (server.dtype) value '': the config reads it as unset"));
  for (const char* path : {"client.num_prompts", "client.random_input_len"}) {
    auto zero = ExpandGrid(ParseGrid(absl::StrCat(
        "base { server { device: \"l4\" model: \"gemma-4-e2b\" } } axes { path: \"", path,
        "\" values: [ \"8\", \"0\" ] }")));
    ASSERT_TRUE(zero.ok()) << path << zero.status();
    proto::ExperimentConfig c = (*zero)[1].config;
    ApplyDefaults(c);
    const absl::Status st = ValidateRanges(c);
    EXPECT_THAT(st.message(), HasSubstr(": 0 is out of range")) << path;
  }
  auto fine = ExpandGrid(ParseGrid(R"pb(
    base { server { device: "l4" model: "gemma-4-e2b" } }
    axes {
      path: "client.random_range_ratio"
      values: [ "0", "0.5" ]
    }
    axes {
      path: "client.seed"
      values: [ "0", "3" ]
    }
  )pb"));
  EXPECT_TRUE(fine.ok()) << fine.status();
  // A whole message (server) is completed by the defaults, not replaced:
  // it was refused as "read as unset" whatever it held.
  auto message = ExpandGrid(ParseGrid(R"pb(
    axes {
      path: "server"
      values: [
        "device: \"t4\" model: \"gemma-4-e2b\"",
        "device: \"l4\" model: \"gemma-4-e2b\""
      ]
    }
  )pb"));
  ASSERT_TRUE(message.ok()) << message.status();
  EXPECT_EQ((*message)[1].config.server().device(), "l4");
}

// A 10^7-point grid (seven axes of 10 values) is decoded one point at a
// time from its id, in the order the points were expanded in (first axis
// outermost): the last point has every axis at its last value, and point
// 1234567 has digits 1..7 of its id.
TEST(GridPointsTest, TenMillionPointsAreDecodedFromTheirIdsWithoutExpanding) {
  proto::SweepGrid grid = ParseGrid(R"pb(
    base { server { device: "l4" model: "gemma-4-e2b" } }
  )pb");
  const char* paths[] = {"client.random_input_len",
                         "client.random_output_len",
                         "client.max_concurrency",
                         "client.num_prompts",
                         "server.max_num_seqs",
                         "server.block_size",
                         "client.seed"};
  for (const char* path : paths) {
    proto::SweepAxis* a = grid.add_axes();
    a->set_path(path);
    for (int v = 0; v < 10; ++v) a->add_values(std::to_string(16 * (v + 1)));
  }
  absl::StatusOr<GridPoints> points = GridPoints::Make(grid);
  ASSERT_TRUE(points.ok()) << points.status();
  EXPECT_EQ(points->size(), 10'000'000);
  absl::StatusOr<SweepPoint> last = points->Point(9'999'999);
  ASSERT_TRUE(last.ok());
  EXPECT_EQ(last->config.client().random_input_len(), 160);
  EXPECT_EQ(last->config.client().seed(), 160u);
  absl::StatusOr<SweepPoint> p = points->Point(1'234'567);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->axis_values,
            (std::vector<std::string>{"32", "48", "64", "80", "96", "112", "128"}));
  EXPECT_EQ(p->config_hash, ConfigHashHex(p->config));
}

// Point(i) is ExpandGrid's point i (zipped axes included).
TEST(GridPointsTest, EachPointIsExpandGridsPoint) {
  const proto::SweepGrid grid = ParseGrid(R"pb(
    axes {
      path: "client.random_input_len"
      zip: "ctx"
      values: [ "128", "1024", "4096" ]
    }
    axes {
      path: "client.max_concurrency"
      values: [ "1", "4" ]
    }
    axes {
      path: "client.num_prompts"
      zip: "ctx"
      values: [ "8", "16", "32" ]
    }
  )pb");
  absl::StatusOr<std::vector<SweepPoint>> all = ExpandGrid(grid);
  absl::StatusOr<GridPoints> points = GridPoints::Make(grid);
  ASSERT_TRUE(all.ok() && points.ok());
  ASSERT_EQ(points->size(), 6);
  for (int64_t i = 5; i >= 0; --i) {
    absl::StatusOr<SweepPoint> p = points->Point(i);
    ASSERT_TRUE(p.ok());
    EXPECT_EQ(p->axis_values, (*all)[i].axis_values);
    EXPECT_EQ(p->config_hash, (*all)[i].config_hash);
  }
}

TEST(ExpandGridTest, DistinctPointsHaveDistinctHashes) {
  auto points = ExpandGrid(Grid500());
  ASSERT_TRUE(points.ok());
  std::map<std::string, int> seen;
  for (const auto& p : *points) ++seen[p.config_hash];
  EXPECT_EQ(seen.size(), points->size());
}

TEST(ExpandGridTest, BadValueErrorNamesTheAxisAndValue) {
  auto points = ExpandGrid(ParseGrid(R"pb(
    axes {
      path: "server.device"
      values: [ "t4" ]
    }
    axes {
      path: "client.max_concurrency"
      values: [ "1", "x16" ]
    }
  )pb"));
  EXPECT_EQ(points.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(points.status().message(), HasSubstr("axis 1 (client.max_concurrency)"));
  EXPECT_THAT(points.status().message(), HasSubstr("'x16'"));
}

TEST(ExpandGridTest, UnequalZippedAxesAreAnError) {
  auto points = ExpandGrid(ParseGrid(R"pb(
    axes {
      path: "client.random_input_len"
      zip: "z"
      values: [ "1", "2" ]
    }
    axes {
      path: "client.num_prompts"
      zip: "z"
      values: [ "8" ]
    }
  )pb"));
  EXPECT_THAT(points.status().message(), HasSubstr("equal lengths"));
}

TEST(ExpandGridTest, TwoAxesOnOneFieldOrOneNameAreAnError) {
  proto::SweepGrid grid;
  auto* a = grid.add_axes();
  a->set_path("client.random_input_len");
  a->add_values("128");
  auto* b = grid.add_axes();
  b->set_path("client.random_input_len");
  b->add_values("256");
  EXPECT_THAT(ExpandGrid(grid).status().message(), HasSubstr("the same path as axis 0"));
  b->set_path("client.random_output_len");
  a->set_name("x");
  b->set_name("x");
  EXPECT_THAT(ExpandGrid(grid).status().message(),
              HasSubstr("column name 'x' is already used by axis 0"));
  b->set_name("y");
  EXPECT_TRUE(ExpandGrid(grid).ok());
}

TEST(ExpandGridTest, AxisWithoutValuesIsAnError) {
  auto points = ExpandGrid(ParseGrid(R"pb(axes { path: "server.device" })pb"));
  EXPECT_THAT(points.status().message(), HasSubstr("no values"));
}

absl::StatusOr<SweepSummary> Sweep(const proto::SweepGrid& g, const fs::path& dir,
                                   FakeRunner& fake, int jobs, int64_t stop_after = -1,
                                   bool overwrite = false) {
  SweepOptions o;
  o.jobs = jobs;
  o.progress = 0;
  o.stop_after = stop_after;
  o.replace_other_results = overwrite;
  return RunSweep(g, dir.string(), fake.Runner(), o);
}

TEST(RunSweepTest, FiveHundredPointsWithTwoJobsAreByteIdenticalToOneJob) {
  const fs::path d1 = FreshDir("j1"), d2 = FreshDir("j2");
  FakeRunner f1, f2;
  auto s1 = Sweep(Grid500(), d1, f1, 1);
  auto s2 = Sweep(Grid500(), d2, f2, 2);
  ASSERT_TRUE(s1.ok()) << s1.status();
  ASSERT_TRUE(s2.ok()) << s2.status();
  EXPECT_EQ(s1->num_points, 500);
  EXPECT_TRUE(s1->complete && s2->complete);
  EXPECT_EQ(s1->num_infeasible, 100);  // the "nofit" device
  EXPECT_EQ(s1->num_failed, 0);
  for (const char* f : {"results.jsonl", "results.csv", "grid.textproto"}) {
    const std::string a = ReadFile(d1 / f), b = ReadFile(d2 / f);
    EXPECT_FALSE(a.empty()) << f;
    EXPECT_EQ(a, b) << f;
  }
  // Point order in the files.
  std::vector<std::string> lines = absl::StrSplit(ReadFile(d2 / "results.jsonl"), '\n');
  EXPECT_EQ(lines[0].substr(0, 11), "{\"point\":0,");
  EXPECT_EQ(lines[499].substr(0, 13), "{\"point\":499,");
  fs::remove_all(d1);
  fs::remove_all(d2);
}

TEST(RunSweepTest, EveryRowNamesTheServesimVersionAndCommit) {
  const fs::path d = FreshDir("version");
  FakeRunner f;
  auto s = Sweep(Grid500(), d, f, 2);
  ASSERT_TRUE(s.ok()) << s.status();
  const std::string version = VersionString(), commit = CommitString();
  ASSERT_FALSE(commit.empty());
  const std::string jsonl_key =
      absl::StrCat("\",\"servesim_version\":\"", version, "\",\"servesim_commit\":\"",
                   commit, "\",\"axes\":");
  const std::string csv_tail = absl::StrCat(",", version, ",", commit);
  std::vector<std::string> jl = absl::StrSplit(ReadFile(d / "results.jsonl"), '\n');
  std::vector<std::string> cl = absl::StrSplit(ReadFile(d / "results.csv"), '\n');
  ASSERT_EQ(jl.size(), 501u);  // 500 lines and the empty tail
  ASSERT_EQ(cl.size(), 502u);  // the header too
  EXPECT_TRUE(absl::EndsWith(cl[0], ",servesim_version,servesim_commit")) << cl[0];
  for (size_t i = 0; i < 500; ++i) {
    EXPECT_NE(jl[i].find(jsonl_key), std::string::npos) << jl[i];
    EXPECT_TRUE(absl::EndsWith(cl[i + 1], csv_tail)) << cl[i + 1];
  }
  // A resume with the same build keeps every row and the same bytes.
  const std::string jsonl = ReadFile(d / "results.jsonl"),
                    csv = ReadFile(d / "results.csv");
  FakeRunner again;
  auto r = Sweep(Grid500(), d, again, 1);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->num_resumed, 500);
  EXPECT_EQ(ReadFile(d / "results.jsonl"), jsonl);
  EXPECT_EQ(ReadFile(d / "results.csv"), csv);
  fs::remove_all(d);
}

TEST(RunSweepTest, InfeasiblePointsAreRecordedWithTheirMessage) {
  const fs::path d = FreshDir("err");
  FakeRunner f;
  ASSERT_TRUE(Sweep(Grid500(), d, f, 1).ok());
  const std::string csv = ReadFile(d / "results.csv");
  EXPECT_THAT(csv, HasSubstr(absl::StrCat(
                       ",infeasible,\"model does not fit, \"\"quoted\"\"\",,,,",
                       VersionString(), ",", CommitString(), "\n")));
  EXPECT_THAT(ReadFile(d / "results.jsonl"),
              HasSubstr("\"status\":\"infeasible\",\"error\":\"model does not fit, "
                        "\\\"quoted\\\"\",\"metrics\":{\"output_throughput\":null"));
  fs::remove_all(d);
}

// An error that is not "does not fit" is invalid input, counted apart from
// the infeasible points (the CLI exits non-zero on it).
TEST(RunSweepTest, InvalidPointsAreErrorsNotInfeasible) {
  const fs::path d = FreshDir("invalid");
  FakeRunner f;
  proto::SweepGrid g = Grid500();
  g.mutable_axes(0)->set_values(3, "broken");  // 100 points
  auto s = Sweep(g, d, f, 2);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->num_failed, 100);
  EXPECT_EQ(s->num_infeasible, 100);
  EXPECT_THAT(ReadFile(d / "results.csv"),
              HasSubstr(absl::StrCat(",error,trace.csv:3: bad record,,,,",
                                     VersionString(), ",", CommitString(), "\n")));
  // A resume reruns the error points (their cause, a missing trace or a bad
  // file, may be fixed) and keeps the answered ones (ok, infeasible).
  auto again = Sweep(g, d, f, 2);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->num_run, 100);
  EXPECT_EQ(again->num_resumed, 400);
  EXPECT_EQ(again->num_failed, 100);
  fs::remove_all(d);
}

// Counts how often each point id appears in results.jsonl.
std::map<int64_t, int> IdsInJsonl(const fs::path& p) {
  std::map<int64_t, int> ids;
  for (absl::string_view line : absl::StrSplit(ReadFile(p), '\n', absl::SkipEmpty())) {
    line.remove_prefix(9);  // {"point":
    int64_t id;
    EXPECT_TRUE(absl::SimpleAtoi(line.substr(0, line.find(',')), &id));
    ++ids[id];
  }
  return ids;
}

TEST(RunSweepTest, StoppedAfterKPointsThenResumedRunsEveryPointExactlyOnce) {
  const fs::path ref = FreshDir("ref"), d = FreshDir("resume");
  FakeRunner fr;
  ASSERT_TRUE(Sweep(Grid500(), ref, fr, 1).ok());
  FakeRunner f;
  auto first = Sweep(Grid500(), d, f, 2, /*stop_after=*/137);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_FALSE(first->complete);
  EXPECT_GE(first->num_run, 137);
  EXPECT_LE(first->num_run, 138);  // at most one more in flight with 2 jobs
  auto second = Sweep(Grid500(), d, f, 2);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_TRUE(second->complete);
  EXPECT_EQ(second->num_resumed, first->num_run);
  EXPECT_EQ(second->num_resumed + second->num_run, 500);
  const auto calls = f.calls();
  EXPECT_EQ(calls.size(), 500u);
  for (const auto& [hash, n] : calls) EXPECT_EQ(n, 1) << hash;
  EXPECT_EQ(ReadFile(d / "results.jsonl"), ReadFile(ref / "results.jsonl"));
  EXPECT_EQ(ReadFile(d / "results.csv"), ReadFile(ref / "results.csv"));
  fs::remove_all(ref);
  fs::remove_all(d);
}

// The CLI's SIGINT / SIGTERM handler sets SweepOptions::interrupt: no new
// point is taken, the one in flight is written, and a rerun finishes the
// rest exactly once.
TEST(RunSweepTest, AnInterruptTakesNoNewPointAndARerunResumes) {
  const fs::path ref = FreshDir("iref"), d = FreshDir("interrupt");
  FakeRunner fr;
  ASSERT_TRUE(Sweep(Grid500(), ref, fr, 1).ok());
  std::atomic<bool> interrupt{false};
  std::atomic<int> ran{0};
  FakeRunner f;
  PointRunner inner = f.Runner();
  PointRunner runner = inner;
  runner.run = [&](const proto::ExperimentConfig& c) {
    if (++ran == 50) interrupt.store(true);  // a signal while point 50 runs
    return inner.run(c);
  };
  SweepOptions o;
  o.jobs = 1;
  o.progress = 0;
  o.interrupt = &interrupt;
  auto first = RunSweep(Grid500(), d.string(), runner, o);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_FALSE(first->complete);
  EXPECT_EQ(first->num_run, 50);
  EXPECT_EQ(IdsInJsonl(d / "results.jsonl").size(), 50u);
  interrupt.store(false);
  auto second = RunSweep(Grid500(), d.string(), runner, o);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_TRUE(second->complete);
  EXPECT_EQ(second->num_resumed, 50);
  for (const auto& [hash, n] : f.calls()) EXPECT_EQ(n, 1) << hash;
  EXPECT_EQ(ReadFile(d / "results.jsonl"), ReadFile(ref / "results.jsonl"));
  fs::remove_all(ref);
  fs::remove_all(d);
}

TEST(RunSweepTest, SigkillMidwayThenResumeFinishesEveryPointExactlyOnce) {
  const fs::path ref = FreshDir("kref"), d = FreshDir("kill");
  FakeRunner fr(0);
  ASSERT_TRUE(Sweep(Grid500(), ref, fr, 1).ok());
  fs::create_directories(d);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    FakeRunner slow(400);  // up to 2.4 ms a point: ~0.4 s for the sweep
    (void)Sweep(Grid500(), d, slow, 2);
    _exit(0);
  }
  // Kill it once some, but not all, points are in the file.
  size_t lines = 0;
  for (int i = 0; i < 20000 && lines < 60; ++i) {
    std::this_thread::sleep_for(std::chrono::microseconds(200));
    const std::string j = ReadFile(d / "results.jsonl");
    lines = static_cast<size_t>(std::count(j.begin(), j.end(), '\n'));
  }
  kill(pid, SIGKILL);
  int wstatus = 0;
  waitpid(pid, &wstatus, 0);
  ASSERT_TRUE(WIFSIGNALED(wstatus)) << "the sweep finished before the kill";
  const auto before = IdsInJsonl(d / "results.jsonl");
  EXPECT_GE(before.size(), 60u);
  EXPECT_LT(before.size(), 500u);

  FakeRunner f(0);
  auto s = Sweep(Grid500(), d, f, 2);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE(s->complete);
  EXPECT_GE(s->num_resumed, 59);  // a torn or CSV-less last point is rerun
  EXPECT_EQ(s->num_resumed + s->num_run, 500);
  for (const auto& [hash, n] : f.calls()) EXPECT_EQ(n, 1) << hash;
  const auto after = IdsInJsonl(d / "results.jsonl");
  EXPECT_EQ(after.size(), 500u);
  for (const auto& [id, n] : after) EXPECT_EQ(n, 1) << id;
  EXPECT_EQ(ReadFile(d / "results.jsonl"), ReadFile(ref / "results.jsonl"));
  EXPECT_EQ(ReadFile(d / "results.csv"), ReadFile(ref / "results.csv"));
  fs::remove_all(ref);
  fs::remove_all(d);
}

TEST(RunSweepTest, TornLastLineIsRerunNotKept) {
  const fs::path ref = FreshDir("tref"), d = FreshDir("torn");
  FakeRunner fr;
  ASSERT_TRUE(Sweep(Grid500(), ref, fr, 1).ok());
  FakeRunner f;
  ASSERT_TRUE(Sweep(Grid500(), d, f, 1, /*stop_after=*/10).ok());
  {
    std::ofstream j(d / "results.jsonl", std::ios::app | std::ios::binary);
    j << "{\"point\":10,\"config_hash\":\"";  // killed mid-write
  }
  auto s = Sweep(Grid500(), d, f, 1);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->num_resumed, 10);
  EXPECT_EQ(ReadFile(d / "results.jsonl"), ReadFile(ref / "results.jsonl"));
  fs::remove_all(ref);
  fs::remove_all(d);
}

// An edited grid keeps its unchanged points, but the finished results it
// would drop (here the 100 points of the replaced axis value) are dropped
// only when asked: without --overwrite the run is refused, files untouched.
TEST(RunSweepTest, ChangedBaseConfigRerunsThePointsItChanges) {
  const fs::path d = FreshDir("changed");
  FakeRunner f;
  ASSERT_TRUE(Sweep(Grid500(), d, f, 1).ok());
  const std::string before = ReadFile(d / "results.jsonl");
  proto::SweepGrid g = Grid500();
  g.mutable_axes(0)->set_values(4, "tpu-v6e");  // replaces "nofit": 100 points
  FakeRunner f2;
  auto refused = Sweep(g, d, f2, 2);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(refused.status().message(),
              HasSubstr("holds 100 results this run would discard (100 of points this "
                        "grid does not have as they were run"));
  EXPECT_THAT(refused.status().message(),
              HasSubstr("400 finished points would be resumed"));
  EXPECT_EQ(ReadFile(d / "results.jsonl"), before);
  auto s = Sweep(g, d, f2, 2, /*stop_after=*/-1, /*overwrite=*/true);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->num_resumed, 400);
  EXPECT_EQ(s->num_run, 100);
  EXPECT_EQ(s->num_failed, 0);
  fs::remove_all(d);
}

// Another grid's results in the directory were replaced silently.
TEST(RunSweepTest, AnotherGridsResultsAreNotReplacedUnlessAsked) {
  const fs::path d = FreshDir("other");
  FakeRunner f;
  ASSERT_TRUE(Sweep(Grid500(), d, f, 1).ok());
  const std::string before = ReadFile(d / "results.jsonl");
  const std::string grid_before = ReadFile(d / "grid.textproto");
  proto::SweepGrid other = Grid500();
  other.mutable_base()->mutable_client()->set_num_prompts(77);  // every hash changes
  auto refused = Sweep(other, d, f, 1);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kAlreadyExists)
      << refused.status();
  EXPECT_THAT(refused.status().message(), HasSubstr("holds 500 results of another grid"));
  EXPECT_EQ(ReadFile(d / "results.jsonl"), before);
  EXPECT_EQ(ReadFile(d / "grid.textproto"), grid_before);
  auto s = Sweep(other, d, f, 1, /*stop_after=*/-1, /*overwrite=*/true);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->num_run, 500);
  fs::remove_all(d);
}

// Finished results were dropped without a word when the CSV's columns
// changed (--interval added, an axis renamed) or a shard ran into a folder
// holding the whole grid: both are refused, files untouched.
TEST(RunSweepTest, ChangedCsvColumnsOrAShardIntoAFullRunAreRefused) {
  const fs::path d = FreshDir("columns");
  FakeRunner f;
  ASSERT_TRUE(Sweep(Grid500(), d, f, 1).ok());
  const std::string before = ReadFile(d / "results.jsonl");
  std::string csv = ReadFile(d / "results.csv");
  csv.replace(0, csv.find('\n'), "point,renamed");
  {
    std::ofstream o(d / "results.csv", std::ios::binary | std::ios::trunc);
    o << csv;
  }
  auto refused = Sweep(Grid500(), d, f, 1);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(
      refused.status().message(),
      HasSubstr("holds 500 results this run would discard (500 of this grid whose "
                "results.csv has other columns or is missing"));
  EXPECT_EQ(ReadFile(d / "results.jsonl"), before);
  EXPECT_EQ(ReadFile(d / "results.csv"), csv);

  const fs::path full = FreshDir("fullshard");
  ASSERT_TRUE(Sweep(Grid500(), full, f, 1).ok());
  const std::string all = ReadFile(full / "results.jsonl");
  SweepOptions shard;
  shard.jobs = 1;
  shard.progress = 0;
  shard.shard_index = 0;
  shard.shard_count = 2;
  auto s = RunSweep(Grid500(), full.string(), f.Runner(), shard);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kAlreadyExists) << s.status();
  EXPECT_THAT(s.status().message(), HasSubstr("another shard's"));
  EXPECT_EQ(ReadFile(full / "results.jsonl"), all);
  fs::remove_all(d);
  fs::remove_all(full);
}

// An axis named like a fixed or metric column gave the CSV two columns of
// one name; a newline in a name or value split a results line, so its
// point reran on every resume. Both are refused before anything runs.
TEST(RunSweepTest, ReservedColumnNamesAndControlCharactersAreRefused) {
  const fs::path d = FreshDir("names");
  FakeRunner f;
  for (const char* name : {"status", "point", "p99_ttft_ms", "ratio_lo"}) {
    proto::SweepGrid g = Grid500();
    g.mutable_axes(1)->set_name(name);
    auto s = Sweep(g, d, f, 1);
    ASSERT_FALSE(s.ok()) << name;
    EXPECT_THAT(s.status().message(),
                HasSubstr(absl::StrCat("column name '", name,
                                       "' is a fixed or metric column of the results")));
  }
  proto::SweepGrid g = Grid500();
  g.mutable_axes(1)->set_name("a\nb");
  EXPECT_THAT(Sweep(g, d, f, 1).status().message(),
              HasSubstr("axis 1 (client.max_concurrency): name has a control character"));
  g = Grid500();
  g.mutable_axes(0)->set_values(1, "l4\n");
  EXPECT_THAT(Sweep(g, d, f, 1).status().message(),
              HasSubstr("axis 0 (server.device): value 1 has a control character"));
  g = Grid500();
  g.mutable_axes(1)->set_values(3, "1");  // 1, 2, 3, 1, ...: point runs twice
  EXPECT_THAT(
      Sweep(g, d, f, 1).status().message(),
      HasSubstr("axis 1 (client.max_concurrency): value '1' is given twice (0 and 3)"));
  EXPECT_FALSE(fs::exists(d / "results.jsonl"));
  fs::remove_all(d);
}

// A second sweep on a folder another one is writing would replace the
// files the first appends to: refused while the first holds the lock.
TEST(RunSweepTest, ASecondSweepOnABusyFolderIsRefused) {
  const fs::path d = FreshDir("busy");
  fs::create_directories(d);
  const int fd = open((d / ".lock").c_str(), O_RDWR | O_CREAT, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(flock(fd, LOCK_EX | LOCK_NB), 0);
  FakeRunner f;
  auto s = Sweep(Grid500(), d, f, 1);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.status().message(), HasSubstr("another servesim sweep is writing"));
  close(fd);  // the first one is done: the folder is free
  EXPECT_TRUE(Sweep(Grid500(), d, f, 1).ok());
  fs::remove_all(d);
}

TEST(RunSweepTest, GridFileIsWrittenAndReadsBack) {
  const fs::path d = FreshDir("gridfile");
  FakeRunner f;
  ASSERT_TRUE(Sweep(Grid500(), d, f, 1).ok());
  auto back = ReadGridFile((d / "grid.textproto").string());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->SerializeAsString(), Grid500().SerializeAsString());
  EXPECT_THAT(ReadFile(d / "grid.textproto"), HasSubstr("# point 499 "));
  fs::remove_all(d);
}

TEST(ReadGridFileTest, SyntaxErrorNamesFileAndLine) {
  const fs::path d = FreshDir("badgrid");
  fs::create_directories(d);
  {
    std::ofstream o(d / "g.textproto");
    o << "name: \"x\"\naxes { pth: \"server.device\" }\n";
  }
  auto g = ReadGridFile((d / "g.textproto").string());
  EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(g.status().message(), HasSubstr("g.textproto:2:"));
  fs::remove_all(d);
}

}  // namespace
}  // namespace servesim
