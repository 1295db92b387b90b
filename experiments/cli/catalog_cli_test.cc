// The catalog through the built binary: a user's own device file, written
// to a temp folder, simulates, plans and calibrates with no rebuild; bad
// files and unsupported weight formats are exit 2 naming what is wrong;
// `devices` / `models` list the catalog.
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/cli_run.h"
#include "traces/json.h"

namespace servesim {
namespace {

using cli_test::CliRun;
using cli_test::ReadText;
using cli_test::Scratch;
using cli_test::Servesim;
using ::testing::HasSubstr;
using ::testing::Not;

// The shipped `id` file (from `devices show`) with `from` replaced by `to`,
// written to a temp folder outside the repository.
std::string UserDeviceFile(const std::string& id, const std::string& from,
                           const std::string& to, const std::string& name) {
  CliRun show = Servesim("devices show " + id);
  EXPECT_EQ(show.exit_code, 0) << show.err;
  std::string text = show.out;
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  std::string path = Scratch(name);
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

const char kSmallRun[] =
    " --model gemma-4-e2b --max-model-len 4096 --max-concurrency 4 --request-rate inf "
    "--num-prompts 8 --random-input-len 256 --random-output-len 32 --ignore-eos";

TEST(CatalogCliTest, UserDeviceFileSimulatesWithNoRebuildAndSaysItIsUncalibrated) {
  const std::string dev = UserDeviceFile("h100-sxm", "id: \"h100-sxm\"",
                                         "id: \"my-h100\"", "my-h100.textproto");
  CliRun r = Servesim("simulate --device '" + dev + "'" + kSmallRun + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("device my-h100 (" + dev + ") is not calibrated"));
  EXPECT_THAT(r.err, HasSubstr("calibrated nvidia devices l4, t4"));
  EXPECT_THAT(r.err, HasSubstr("expected error: throughput "));
  EXPECT_THAT(r.err, HasSubstr("(leave-one-device-out MAPE of `servesim validate`"));
  // The JSON provenance says so too.
  EXPECT_THAT(r.out, HasSubstr("Uncalibrated: device my-h100"));
  // A shipped uncalibrated device says so as well; a calibrated one does not.
  CliRun shipped = Servesim(std::string("simulate --device h100-sxm") + kSmallRun);
  ASSERT_EQ(shipped.exit_code, 0) << shipped.err;
  EXPECT_THAT(shipped.err,
              HasSubstr("device h100-sxm (hwmodels/devices/h100-sxm.textproto)"
                        " is not calibrated"));
  CliRun calibrated = Servesim(std::string("simulate --device l4") + kSmallRun);
  ASSERT_EQ(calibrated.exit_code, 0) << calibrated.err;
  EXPECT_THAT(calibrated.err, Not(HasSubstr("not calibrated")));
}

TEST(CatalogCliTest, BadUserDeviceFileIsExit2NamingFileLineAndField) {
  const std::string dev = UserDeviceFile("h100-sxm", "memory_bytes: 85899345920",
                                         "memory_bytes: -1", "neg.textproto");
  CliRun r = Servesim("memory --device '" + dev + "' --model gemma-4-e2b");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_THAT(r.err, HasSubstr(dev + ":"));
  EXPECT_THAT(r.err, HasSubstr(": field memory_bytes: -1 is out of range"));
  const std::string typo =
      UserDeviceFile("l4", "board_power_w", "board_powr_w", "typo.textproto");
  CliRun t = Servesim("simulate --device '" + typo + "'" + kSmallRun);
  EXPECT_EQ(t.exit_code, 2) << t.out;
  EXPECT_THAT(t.err, HasSubstr("board_powr_w"));
}

TEST(CatalogCliTest, UnsupportedWeightFormatsAreExit2NamingDeviceAndAllowed) {
  struct Case {
    const char* device;
    const char* q;
    const char* allowed;
  };
  for (const Case& c : {Case{"tpu-v6e", "w4a16", "allowed: none, w8a8"},
                        Case{"mi300x", "w4a16", "allowed: none, fp8, w8a8"},
                        Case{"t4", "fp8", "allowed: none, w8a8, w4a16, w4a16-emb4"}}) {
    for (const char* cmd : {"memory", "simulate"}) {
      CliRun r =
          Servesim(std::string(cmd) + " --device " + c.device + " --quantization " + c.q +
                   (std::string(cmd) == "memory" ? " --model gemma-4-e2b"
                                                 : std::string(kSmallRun)));
      EXPECT_EQ(r.exit_code, 2) << cmd << " " << c.device << " " << c.q << "\n" << r.out;
      EXPECT_THAT(r.err, HasSubstr(std::string("--quantization: ") + c.q +
                                   " is not supported on " + c.device));
      EXPECT_THAT(r.err, HasSubstr(c.allowed));
    }
  }
}

// mxfp4 on a dense model quantizes nothing: refused, not labelled mxfp4
// with 16-bit numbers. A measured -0 GiB reads as 0.
TEST(CatalogCliTest, Mxfp4OnADenseModelIsRefusedAndMinusZeroReadsAsZero) {
  CliRun r = Servesim("memory --device l4 --model gemma-4-e2b --quantization mxfp4");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_THAT(r.err, HasSubstr("quantizes MoE experts only, and gemma-4-e2b is dense"));
  CliRun z =
      Servesim("memory --device l4 --model gemma-4-e2b --measured-cuda-graph-gib -0");
  ASSERT_EQ(z.exit_code, 0) << z.err;
  EXPECT_THAT(z.out, HasSubstr("graph capture         0.00 GiB"));
  EXPECT_THAT(z.out, ::testing::Not(HasSubstr("-0.00")));
}

TEST(CatalogCliTest, PlanSkipsDevicesThatCannotRunTheFormatAndSaysSo) {
  CliRun r = Servesim(
      "plan --rate 2 --random-input-len 256 --random-output-len 32 --num-prompts 40 "
      "--model gemma-4-e2b --max-model-len 4096 --quantization w4a16 --slo "
      "'ttft_p99<=5s' "
      "--devices l4,tpu-v6e --max-replicas 1 --no-mixed");
  EXPECT_THAT(r.err,
              HasSubstr("skipping tpu-v6e: --quantization: w4a16 is not supported"));
  EXPECT_THAT(r.out, HasSubstr("l4"));
  EXPECT_THAT(r.out, Not(HasSubstr("tpu-v6e")));
  CliRun none = Servesim(
      "plan --rate 2 --model gemma-4-e2b --quantization w4a16 --slo 'ttft_p99<=5s' "
      "--devices tpu-v5e,tpu-v6e");
  EXPECT_EQ(none.exit_code, 2) << none.out;
  EXPECT_THAT(none.err, HasSubstr("no device to plan on can run it"));
}

TEST(CatalogCliTest, DevicesAndModelsListAsTextAndJson) {
  CliRun text = Servesim("devices");
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_THAT(text.out, HasSubstr("h100-sxm"));
  EXPECT_THAT(text.out, HasSubstr("16 devices"));
  CliRun json = Servesim("devices --json");
  ASSERT_EQ(json.exit_code, 0) << json.err;
  auto v = ParseJson(json.out, "stdout");
  ASSERT_TRUE(v.ok()) << v.status();
  const JsonValue* devices = v->Find("devices");
  ASSERT_NE(devices, nullptr);
  ASSERT_EQ(devices->items.size(), 16u);
  for (const JsonValue& d : devices->items) {
    for (const char* key : {"id", "vendor", "usable_memory_gib", "bandwidth_bytes_per_s",
                            "peak_flops", "prices", "source", "weight_formats"})
      EXPECT_NE(d.Find(key), nullptr) << key;
  }
  CliRun show = Servesim("devices show t4");
  ASSERT_EQ(show.exit_code, 0) << show.err;
  EXPECT_EQ(show.out, ReadText(std::string(SERVESIM_SOURCE_DIR) +
                               "/hwmodels/devices/t4.textproto"));
  CliRun unknown = Servesim("devices show h900");
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_THAT(unknown.err, HasSubstr("unknown device 'h900'"));
  CliRun models = Servesim("models --json");
  ASSERT_EQ(models.exit_code, 0) << models.err;
  auto mv = ParseJson(models.out, "stdout");
  ASSERT_TRUE(mv.ok()) << mv.status();
  ASSERT_NE(mv->Find("models"), nullptr);
  EXPECT_EQ(mv->Find("models")->items.size(), 5u);
  CliRun mshow = Servesim("models show gemma-4-e2b");
  ASSERT_EQ(mshow.exit_code, 0) << mshow.err;
  EXPECT_THAT(mshow.out, HasSubstr("id: \"gemma-4-e2b\""));
}

// calibrate --device PATH: the profile names the file's content hash, and
// is refused on any other device file.
TEST(CatalogCliTest, CalibrateUserDeviceFileBindsTheProfileToItsHash) {
  const std::string dev = UserDeviceFile("mi300x", "id: \"mi300x\"", "id: \"my-mi300x\"",
                                         "my-mi300x.textproto");
  const std::string cells =
      std::string(SERVESIM_DATA_DIR) + "/bench/mi300x-gemma4-e2b-2026-09-17";
  const std::string prof = Scratch("my-mi300x-profile.textproto");
  CliRun cal = Servesim("calibrate --device '" + dev + "' --model gemma-4-e2b --bench '" +
                        cells + "/c1-in128-out128.json' '" + cells +
                        "/c1-in1024-out128.json' --out '" + prof + "' -j 1");
  ASSERT_NE(cal.exit_code, 2) << cal.err;
  EXPECT_THAT(cal.out, HasSubstr("my-mi300x has no entry: mi300x's user entry"));
  const std::string written = ReadText(prof);
  EXPECT_THAT(written, HasSubstr("device: \"my-mi300x\""));
  CliRun show = Servesim("devices show '" + dev + "'");
  ASSERT_EQ(show.exit_code, 0) << show.err;
  EXPECT_THAT(written, HasSubstr("device_content_hash: \"perf-fnv1a64:"));

  CliRun ok = Servesim("simulate --device '" + dev + "' --calibration '" + prof + "'" +
                       kSmallRun);
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_THAT(ok.err, Not(HasSubstr("not calibrated")));
  // A comment or a space changed in the device file: the same hardware.
  const std::string spaced =
      UserDeviceFile("mi300x", "id: \"mi300x\"", "id: \"my-mi300x\"  # mine",
                     "my-mi300x-spaced.textproto");
  CliRun same = Servesim("simulate --device '" + spaced + "' --calibration '" + prof +
                         "'" + kSmallRun);
  EXPECT_EQ(same.exit_code, 0) << same.err;
  // One figure of the hardware changed: the profile is refused.
  std::string edited = ReadText(dev);
  const size_t power = edited.find("board_power_w: 750");
  ASSERT_NE(power, std::string::npos);
  edited.replace(power, 18, "board_power_w: 751");
  const std::string other = Scratch("my-mi300x-edited.textproto");
  std::ofstream(other, std::ios::binary) << edited;
  CliRun refused = Servesim("simulate --device '" + other + "' --calibration '" + prof +
                            "'" + kSmallRun);
  EXPECT_EQ(refused.exit_code, 2) << refused.out;
  EXPECT_THAT(refused.err, HasSubstr("the profile was fitted on device 'my-mi300x'"));
  EXPECT_THAT(refused.err, HasSubstr("not on this device file " + other));
  // And on the shipped MI300X.
  CliRun shipped =
      Servesim("simulate --device mi300x --calibration '" + prof + "'" + kSmallRun);
  EXPECT_EQ(shipped.exit_code, 2) << shipped.out;
}

// A single-value flag given twice is an error naming the flag and both
// values (it read "--num-prompts: At Most 1 required but received 2").
TEST(CliErrorTest, AFlagGivenTwiceNamesItsValues) {
  CliRun r = Servesim(
      "simulate --device l4 --model gemma-4-e2b --num-prompts 10 "
      "--num-prompts=20");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("servesim simulate: error: --num-prompts: given 2 times "
                               "(10, 20); give it once"));
}

// Standard output that cannot be written (here /dev/full: a full disk)
// fails the run with exit 2 and says so, whatever the subcommand, instead
// of leaving a script an empty file and exit 0.
TEST(CliOutputTest, UnwritableStandardOutputFailsTheRun) {
  if (!std::filesystem::exists("/dev/full")) GTEST_SKIP() << "no /dev/full here";
  for (const std::string args :
       {"devices --json", "memory --device l4 --model gemma-4-e2b --json", "models",
        "--help"}) {
    const std::string err = Scratch("stderr.txt");
    const std::string cmd =
        std::string("'") + SERVESIM_BINARY + "' " + args + " >/dev/full 2>'" + err + "'";
    const int status = std::system(cmd.c_str());
    ASSERT_TRUE(WIFEXITED(status)) << args;
    EXPECT_EQ(WEXITSTATUS(status), 2) << args;
    // Named by its subcommand, as every other error ("servesim: " for --help).
    const std::string who =
        args == "--help" ? "servesim" : "servesim " + args.substr(0, args.find(' '));
    EXPECT_THAT(ReadText(err),
                HasSubstr(who + ": error: could not write standard output"))
        << args;
    // Written normally, the same command exits 0.
    EXPECT_EQ(Servesim(args).exit_code, 0) << args;
  }
}

// A mistyped --calibration path (a folder, an empty file) is an error, not
// a silently uncalibrated prediction; so is --fit-config or a sweep grid.
TEST(CliInputFilesTest, FolderOrEmptyFileWhereAFileIsExpectedIsExit2) {
  const std::string dir = Scratch("folder");
  std::filesystem::create_directories(dir);
  const std::string empty = Scratch("empty.textproto");
  std::ofstream(empty).flush();
  const std::string base = "simulate --device l4 --model gemma-4-e2b --num-prompts 5 ";
  CliRun r = Servesim(base + "--calibration '" + dir + "'");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err,
              HasSubstr("calibration profile " + dir + ": is a directory, not a file"));
  r = Servesim(base + "--calibration '" + empty + "'");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("calibration profile " + empty + ": the file is empty"));
  r = Servesim("sweep --grid '" + dir + "' --out '" + Scratch("out") + "' --no-progress");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("grid file " + dir + ": is a directory, not a file"));
  r = Servesim("validate --device t4 --no-held-out --fit-config '" + empty + "'");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("fit config " + empty + ": the file is empty"));
  // Control: the shipped profile, no --calibration.
  EXPECT_EQ(Servesim(base).exit_code, 0);
}

// `show` has --json like every subcommand (after show or before it), an
// empty id is an error, and errors take the "servesim CMD: error:" form.
TEST(CatalogCliTest, ShowHasJsonAndRefusesAnEmptyId) {
  for (const auto& [args, id] : std::vector<std::pair<std::string, std::string>>{
           {"devices show l4 --json", "l4"},
           {"models --json show gemma-4-e2b", "gemma-4-e2b"}}) {
    CliRun r = Servesim(args);
    ASSERT_EQ(r.exit_code, 0) << args << r.err;
    auto v = ParseJson(r.out, "stdout");
    ASSERT_TRUE(v.ok()) << args << v.status();
    ASSERT_NE(v->Find("id"), nullptr) << args;
    EXPECT_EQ(v->Find("id")->str, id) << args;
  }
  CliRun e = Servesim("devices show ''");
  EXPECT_EQ(e.exit_code, 2);
  EXPECT_THAT(e.err, HasSubstr("servesim devices show: error: id: empty"));
  e = Servesim("models show nope-model");
  EXPECT_EQ(e.exit_code, 2);
  EXPECT_THAT(e.err, HasSubstr("servesim models show: error: "));
}

}  // namespace
}  // namespace servesim
