// servesim trace: look at and reshape request traces.
//   servesim trace stats FILE [--trace-format F] [--json] [transforms]
//   servesim trace convert IN OUT [--to binary|csv|jsonl] [--json] [transforms]
//   servesim trace generate OUT [--to ...] [--json] [--num-prompts N --request-rate R
//       --arrival poisson|gamma|weibull|constant|all|spikes|schedule ...]
// Bad flags, files or records exit 2 with a message naming file:line.
// --json prints one JSON object on stdout; other human text goes to stderr.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "experiments/cli/cli.h"
#include "experiments/cli/output_files.h"
#include "experiments/cli/server_flags.h"
#include "sim/base/json_writer.h"
#include "traces/open_trace.h"
#include "traces/synthetic.h"
#include "traces/trace_stats.h"
#include "traces/trace_writer.h"

namespace servesim::cli {
namespace {

// Flags shared by stats and convert (reader options and transforms).
struct TraceFlags {
  TraceOptions opts;
  double window_start_s = 0;
  double window_end_s = -1;
  std::string arrival = "all";
  double request_rate = 0;
  double burstiness = 1;
  std::string seed;
  CLI::Option* window_end_opt = nullptr;
};

absl::Status OutOfRange(absl::string_view flag, double value, absl::string_view range) {
  return absl::InvalidArgumentError(
      absl::StrCat(flag, ": ", value, " is out of range ", range));
}
absl::Status OutOfRange(absl::string_view flag, int64_t value, absl::string_view range) {
  return absl::InvalidArgumentError(
      absl::StrCat(flag, ": ", value, " is out of range ", range));
}
absl::Status OutOfRange(absl::string_view flag, int32_t value, absl::string_view range) {
  return OutOfRange(flag, int64_t{value}, range);
}

// Where the JSON summary of convert/generate goes: one object on stdout.
void PrintJsonSummary(JsonWriter& w) {
  std::string out = w.Take();
  out.push_back('\n');
  std::fwrite(out.data(), 1, out.size(), stdout);
}

void WriteSummaryFields(JsonWriter& w, const ConvertSummary& s, const std::string& out,
                        OutputFormat format) {
  w.KV("output", out);
  w.KV("output_format", format == OutputFormat::kBinary ? "binary"
                        : format == OutputFormat::kCsv  ? "csv"
                                                        : "jsonl");
  w.KV("requests_written", s.requests);
  w.KV("unmeasured_left_out", s.unmeasured_left_out);
  w.KV("first_arrival_s", s.first_arrival_ns / 1e9);
  w.KV("last_arrival_s", s.last_arrival_ns / 1e9);
  w.KV("span_s", (s.last_arrival_ns - s.first_arrival_ns) / 1e9);
  w.KV("mean_rate_per_s",
       s.requests > 1 && s.last_arrival_ns > s.first_arrival_ns
           ? static_cast<double>(s.requests - 1) * 1e9 /
                 static_cast<double>(s.last_arrival_ns - s.first_arrival_ns)
           : 0.0);
  w.KV("source", s.source);
}

void AddTraceFlags(CLI::App* cmd, TraceFlags* f) {
  cmd->add_option(
      "--trace-format", f->opts.format,
      "azure|mooncake|burstgpt|bailian|vllm-bench|lengths|binary (default: detect)");
  cmd->add_option(
      "--hash-block", f->opts.hash_block_tokens,
      "tokens per prefix hash (default: the format's, Mooncake 512, Bailian 16)");
  cmd->add_flag("--skip-bad-rows", f->opts.skip_bad_rows,
                "skip malformed rows and count them by reason instead of failing");
  cmd->add_flag(
      "!--keep-failed", f->opts.skip_failed_requests,
      "treat BurstGPT/bench failed requests as bad rows instead of skipping them");
  cmd->add_option("--model", f->opts.model_filter, "BurstGPT: keep only this Model");
  cmd->add_option("--window-start-s", f->window_start_s,
                  "keep arrivals from this time (s)");
  f->window_end_opt = cmd->add_option("--window-end-s", f->window_end_s,
                                      "keep arrivals before this time (s)");
  cmd->add_option("--sample", f->opts.sample_fraction,
                  "keep each request with this probability");
  cmd->add_option("--min-input", f->opts.lengths.min_input,
                  "keep requests of at least this many prompt tokens");
  cmd->add_option("--max-input", f->opts.lengths.max_input,
                  "keep requests of at most this many prompt tokens");
  cmd->add_option("--min-output", f->opts.lengths.min_output,
                  "keep requests of at least this many output tokens");
  cmd->add_option("--max-output", f->opts.lengths.max_output,
                  "keep requests of at most this many output tokens");
  cmd->add_option("--rate-scale", f->opts.rate_scale,
                  "multiply the request rate by this");
  cmd->add_option("--target-rate", f->opts.target_rate_per_s,
                  "rescale time so the mean request rate is this (req/s)");
  cmd->add_option("--loop-to", f->opts.loop_to_requests,
                  "replay the trace up to N requests");
  cmd->add_flag("!--loop-keep-hashes", f->opts.loop_distinct_hashes,
                "looped passes reuse the prefix hashes (they hit the cache)");
  cmd->add_option("--max-requests,--num-prompts", f->opts.max_requests,
                  "stop after N requests (as simulate's --num-prompts with a trace: the "
                  "first N)");
  cmd->add_option("--seed", f->seed,
                  WithDefault("seed for sampling and arrivals", TraceOptions{}.seed));
  cmd->add_option("--arrival", f->arrival,
                  "arrivals for files without timestamps: all|poisson|gamma|constant");
  cmd->add_option("--request-rate", f->request_rate, "rate of --arrival (req/s)");
  cmd->add_option("--burstiness", f->burstiness, "Gamma shape of --arrival gamma");
}

absl::StatusOr<ArrivalSpec::Kind> ArrivalKind(const std::string& name) {
  using K = ArrivalSpec::Kind;
  if (name == "all" || name == "inf") return K::kAllAtOnce;
  if (name == "constant") return K::kConstant;
  if (name == "poisson") return K::kPoisson;
  if (name == "gamma") return K::kGamma;
  if (name == "weibull") return K::kWeibull;
  if (name == "schedule") return K::kSchedule;
  if (name == "spikes") return K::kSpikes;
  return absl::InvalidArgumentError(
      absl::StrCat("--arrival ", name,
                   ": allowed all, constant, poisson, gamma, weibull, schedule, spikes"));
}

// Checks every flag's range, whether or not it applies to this file (an
// arrival process for a trace with timestamps is refused when the file is
// opened, OpenTrace; a bad rate is an error here first).
absl::Status Resolve(TraceFlags& f) {
  if (!std::isfinite(f.window_start_s) || f.window_start_s < 0 ||
      f.window_start_s > 9e9) {
    return OutOfRange("--window-start-s", f.window_start_s, "[0, 9e9]");
  }
  f.opts.window_start_ns = static_cast<TimeNs>(std::llround(f.window_start_s * 1e9));
  if (f.window_end_opt != nullptr && f.window_end_opt->count() > 0) {
    if (!std::isfinite(f.window_end_s) || f.window_end_s < 0 || f.window_end_s > 9e9) {
      return OutOfRange("--window-end-s", f.window_end_s, "[0, 9e9]");
    }
    if (f.window_end_s < f.window_start_s) {
      return absl::InvalidArgumentError(
          absl::StrCat("--window-end-s ", f.window_end_s, " is before --window-start-s ",
                       f.window_start_s, " (allowed: end >= start)"));
    }
    f.opts.window_end_ns = static_cast<TimeNs>(std::llround(f.window_end_s * 1e9));
  }
  if (!(f.opts.sample_fraction > 0 && f.opts.sample_fraction <= 1)) {
    return OutOfRange("--sample", f.opts.sample_fraction, "(0, 1]");
  }
  if (!(f.opts.rate_scale >= 1e-9 && f.opts.rate_scale <= 1e9)) {
    return OutOfRange("--rate-scale", f.opts.rate_scale, "[1e-9, 1e9]");
  }
  if (!(f.opts.target_rate_per_s == 0 ||
        (f.opts.target_rate_per_s >= 1e-9 && f.opts.target_rate_per_s <= 1e9))) {
    return OutOfRange("--target-rate", f.opts.target_rate_per_s, "[1e-9, 1e9] (0: off)");
  }
  // Unbounded, a file without timestamps looped 9.2e18 times.
  if (f.opts.loop_to_requests < 0 || f.opts.loop_to_requests > 2147483647) {
    return OutOfRange("--loop-to", f.opts.loop_to_requests,
                      "[0, 2147483647] (0: off; as --num-prompts)");
  }
  if (f.opts.max_requests < 0) {
    return OutOfRange("--max-requests (--num-prompts)", f.opts.max_requests,
                      "[0, 2^63) (0: all)");
  }
  const LengthFilter& lf = f.opts.lengths;
  for (const auto& [flag, v] :
       {std::pair<const char*, int32_t>{"--min-input", lf.min_input},
        {"--max-input", lf.max_input},
        {"--min-output", lf.min_output},
        {"--max-output", lf.max_output}}) {
    if (v < 0) return OutOfRange(flag, v, "[0, 2147483647]");
  }
  if (lf.min_input > lf.max_input) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--min-input ", lf.min_input, " is above --max-input ", lf.max_input));
  }
  if (lf.min_output > lf.max_output) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--min-output ", lf.min_output, " is above --max-output ", lf.max_output));
  }
  if (!f.seed.empty()) {
    auto seed = ParseSeed(f.seed);
    if (!seed.ok()) return seed.status();
    f.opts.seed = *seed;
  }
  if (!(f.request_rate >= 0 && (f.request_rate <= 1e9 || std::isinf(f.request_rate)))) {
    return OutOfRange("--request-rate", f.request_rate, "[0, 1e9] or inf (0: unset)");
  }
  if (!(f.burstiness >= 0.001 && f.burstiness <= 1000)) {
    return OutOfRange("--burstiness", f.burstiness, "[0.001, 1000]");
  }
  if (f.arrival == "weibull" && !(f.burstiness >= 0.01)) {
    return OutOfRange("--burstiness", f.burstiness,
                      "[0.01, 1000] with --arrival weibull");
  }
  auto kind = ArrivalKind(f.arrival);
  if (!kind.ok()) return kind.status();
  using K = ArrivalSpec::Kind;
  if (*kind == K::kSchedule || *kind == K::kSpikes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--arrival ", f.arrival,
        ": allowed here all, constant, poisson, gamma, weibull (a schedule or spikes: "
        "servesim trace generate)"));
  }
  if (*kind != K::kAllAtOnce && !(f.request_rate > 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--arrival ", f.arrival, " needs --request-rate R (requests/s, in (0, 1e9])"));
  }
  // The Gamma shape only shapes Gamma (or Weibull) gaps, or picks Gamma for
  // --arrival all with a rate, as vllm bench serve does.
  if (f.burstiness != 1.0 && *kind != ArrivalSpec::Kind::kGamma &&
      *kind != ArrivalSpec::Kind::kWeibull && *kind != ArrivalSpec::Kind::kAllAtOnce) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--burstiness ", f.burstiness, " does not apply to --arrival ", f.arrival,
        " (allowed with gamma, or with all and a --request-rate)"));
  }
  f.opts.arrivals.kind = *kind;
  if (*kind == ArrivalSpec::Kind::kAllAtOnce && f.request_rate > 0 &&
      !std::isinf(f.request_rate)) {
    f.opts.arrivals.kind =
        f.burstiness == 1 ? ArrivalSpec::Kind::kPoisson : ArrivalSpec::Kind::kGamma;
  }
  f.opts.arrivals.rate_per_s = f.request_rate;
  f.opts.arrivals.shape = f.burstiness;
  return absl::OkStatus();
}

// The error of `servesim trace SUB` (stats, convert, generate), prefixed as
// every subcommand's: "servesim trace SUB: error: ...".
int Fail(const char* sub, const absl::Status& st) {
  std::fprintf(stderr, "servesim trace %s: error: %s\n", sub,
               std::string(st.message()).c_str());
  return kExitBadInput;
}

// "600:2,300:10" -> phases.
absl::StatusOr<std::vector<RatePhase>> ParseSchedule(const std::string& text) {
  std::vector<RatePhase> phases;
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    std::vector<absl::string_view> kv = absl::StrSplit(part, ':');
    RatePhase p;
    if (kv.size() != 2 || !absl::SimpleAtod(kv[0], &p.duration_s) ||
        !absl::SimpleAtod(kv[1], &p.rate_per_s)) {
      return absl::InvalidArgumentError(absl::StrCat("--schedule: \"", std::string(part),
                                                     "\" is not DURATION_S:RATE_PER_S"));
    }
    // Ranges named by the flag (the arrival process would name its field).
    if (!(p.duration_s > 0 && p.duration_s <= 1e8) ||
        !(p.rate_per_s >= 0 && p.rate_per_s <= 1e9)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--schedule: phase ", phases.size() + 1, " \"", std::string(part),
                       "\": allowed DURATION_S in (0, 1e8] and RATE_PER_S in [0, 1e9]"));
    }
    phases.push_back(p);
  }
  return phases;
}

void RegisterStats(CLI::App* trace, int* exit_code) {
  auto flags = std::make_shared<TraceFlags>();
  auto json = std::make_shared<bool>(false);
  CLI::App* cmd = trace->add_subcommand(
      "stats", "rows, time span, rate, length percentiles, burstiness, prefix sharing");
  cmd->add_option("file", flags->opts.path, "trace file")->required();
  cmd->add_flag("--json", *json, "print one JSON object");
  AddTraceFlags(cmd, flags.get());
  cmd->callback([flags, json, exit_code] {
    if (auto st = Resolve(*flags); !st.ok()) {
      *exit_code = Fail("stats", st);
      return;
    }
    // Without transforms, read the reader itself so its skip counts show.
    const TraceOptions& o = flags->opts;
    const bool plain =
        o.window_start_ns == 0 && o.window_end_ns < 0 && o.sample_fraction == 1 &&
        o.rate_scale == 1 && o.target_rate_per_s == 0 && o.loop_to_requests == 0 &&
        o.max_requests == 0 && o.arrivals.kind == ArrivalSpec::Kind::kAllAtOnce;
    absl::StatusOr<std::unique_ptr<RequestSource>> src;
    if (plain) {
      auto reader = OpenTraceReaderFor(o);
      if (reader.ok()) {
        src = std::unique_ptr<RequestSource>(std::move(*reader));
      } else {
        src = reader.status();
      }
    } else {
      src = OpenTrace(o);
    }
    if (!src.ok()) {
      *exit_code = Fail("stats", src.status());
      return;
    }
    auto stats = ComputeTraceStats(**src);
    if (!stats.ok()) {
      *exit_code = Fail("stats", stats.status());
      return;
    }
    const std::string out =
        *json ? FormatTraceStatsJson(*stats) : FormatTraceStatsText(*stats);
    std::fwrite(out.data(), 1, out.size(), stdout);
    *exit_code = kExitOk;
  });
}

// The output format: --to, else the output's extension (.bin, .csv,
// .jsonl, .json); any other extension is an error (it was written as binary
// without a word).
absl::StatusOr<OutputFormat> OutputFormatFlag(const std::string& out,
                                              const std::string& to) {
  if (!to.empty()) return ParseOutputFormat(to);
  const std::string ext = std::filesystem::path(out).extension().string();
  if (ext == ".json") {
    // Written as JSONL, it was read back as a vllm bench result and refused.
    return absl::InvalidArgumentError(
        absl::StrCat("output ", out,
                     ": a .json name is read back as a `vllm bench serve` result; "
                     "end the name in .jsonl (or give --to jsonl)"));
  }
  if (ext == ".bin" || ext == ".csv" || ext == ".jsonl") {
    return OutputFormatForPath(out);
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "output ", out, ": ", ext.empty() ? "no extension" : "extension '" + ext + "'",
      " names no format; give --to binary|csv|jsonl or end the name in .bin, .csv or "
      ".jsonl"));
}

void RegisterConvert(CLI::App* trace, int* exit_code) {
  auto flags = std::make_shared<TraceFlags>();
  auto out = std::make_shared<std::string>();
  auto to = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);
  auto overwrite = std::make_shared<bool>(false);
  CLI::App* cmd = trace->add_subcommand(
      "convert", "copy a trace (with transforms) to servesim binary, CSV or JSONL");
  cmd->add_option("input", flags->opts.path, "trace file")->required();
  cmd->add_option("output", *out,
                  "file to write (an existing one only with --overwrite, and only when "
                  "the whole conversion succeeds)")
      ->required();
  cmd->add_flag("--overwrite", *overwrite, "replace an existing output file");
  cmd->add_option("--to", *to, "binary|csv|jsonl (default: by the output's extension)");
  cmd->add_flag("--json", *json,
                "print one JSON object (paths, formats, requests, time span) on stdout");
  AddTraceFlags(cmd, flags.get());
  cmd->callback([flags, out, to, json, overwrite, exit_code] {
    if (auto st = Resolve(*flags); !st.ok()) {
      *exit_code = Fail("convert", st);
      return;
    }
    absl::StatusOr<OutputFormat> format = OutputFormatFlag(*out, *to);
    if (!format.ok()) {
      *exit_code = Fail("convert", format.status());
      return;
    }
    namespace fs = std::filesystem;
    if (std::error_code ec; fs::equivalent(flags->opts.path, *out, ec)) {
      *exit_code = Fail(
          "convert", absl::InvalidArgumentError(absl::StrCat(
                         "output ", *out,
                         ": is the input file; write the conversion to another file")));
      return;
    }
    if (auto st = CheckOutputTarget(*out, "output", *overwrite); !st.ok()) {
      *exit_code = Fail("convert", st);
      return;
    }
    auto src = OpenTrace(flags->opts);
    if (!src.ok()) {
      *exit_code = Fail("convert", src.status());
      return;
    }
    // Written to a temporary beside the output and renamed into place
    // (TraceWriter); a conversion that leaves no request (a file every
    // reader refuses) replaces nothing. (A fixed staging name,
    // OUT.servesim-convert, overwrote a file of that name, or the input.)
    auto summary =
        ConvertTraceWithSummary(**src, *out, *format, /*write_when_empty=*/false);
    if (!summary.ok()) {
      *exit_code = Fail("convert", summary.status());
      return;
    }
    if (summary->requests == 0) {
      *exit_code = Fail(
          "convert", absl::InvalidArgumentError(absl::StrCat(
                         flags->opts.path, ": no request is left after the transforms; ",
                         *out, " was not written")));
      return;
    }
    if (summary->unmeasured_left_out > 0) {
      std::fprintf(
          stderr,
          "servesim trace convert: warning: left out %lld requests that streamed "
          "no token (a trace file has no field for load-only requests; "
          "`simulate --trace %s` replays them as load)\n",
          static_cast<long long>(summary->unmeasured_left_out), flags->opts.path.c_str());
    }
    if (*json) {
      auto in_format = ResolveTraceFormat(flags->opts);
      JsonWriter w(2);
      w.BeginObject();
      w.KV("command", "trace convert");
      w.KV("input", flags->opts.path);
      w.KV("input_format", in_format.ok() ? TraceFormatName(*in_format) : "unknown");
      WriteSummaryFields(w, *summary, *out, *format);
      w.EndObject();
      PrintJsonSummary(w);
    } else {
      std::fprintf(stderr, "wrote %lld requests to %s (%s)\n",
                   static_cast<long long>(summary->requests), out->c_str(),
                   summary->source.c_str());
    }
    *exit_code = kExitOk;
  });
}

struct GenerateFlags {
  std::string out, to;
  SyntheticOptions syn;
  std::string arrival = "poisson";
  double request_rate = ArrivalSpec{}.rate_per_s;
  std::string schedule;
  std::string lengths_from;
  std::string lengths_from_format;
  std::string seed;
  bool json = false;
  bool overwrite = false;
  CLI::Option* min_turns_opt = nullptr;
  CLI::Option* max_turns_opt = nullptr;
  CLI::Option* arrival_opt = nullptr;
  CLI::Option* burstiness_opt = nullptr;
  CLI::Option* rate_opt = nullptr;
  CLI::Option* schedule_opt = nullptr;
  std::vector<CLI::Option*> spike_opts;   // --spike-period-s, -duration-s, -multiplier
  std::vector<CLI::Option*> length_opts;  // --random-input-len, -output-len, -range-ratio
  CLI::Option* lengths_from_opt = nullptr;
};

// Ranges of generate's flags that MakeSyntheticSource cannot name, and
// combinations of flags that contradict each other.
absl::Status CheckGenerateFlags(const GenerateFlags& g) {
  const SyntheticOptions& syn = g.syn;
  if (syn.num_requests < 1 || syn.num_requests > std::numeric_limits<int32_t>::max()) {
    return OutOfRange("--num-prompts", syn.num_requests, "[1, 2147483647]");
  }
  // all and schedule take no rate (schedule has one per phase).
  if (g.arrival != "all" && g.arrival != "inf" && g.arrival != "schedule" &&
      !(g.request_rate > 0 && g.request_rate <= 1e9)) {
    return OutOfRange("--request-rate", g.request_rate, "(0, 1e9]");
  }
  if (!(syn.arrival.shape >= 0.001 && syn.arrival.shape <= 1000)) {
    return OutOfRange("--burstiness", syn.arrival.shape, "[0.001, 1000]");
  }
  if (g.arrival == "weibull" && !(syn.arrival.shape >= 0.01)) {
    return OutOfRange("--burstiness", syn.arrival.shape,
                      "[0.01, 1000] with --arrival weibull");
  }
  if (g.burstiness_opt->count() > 0 && g.arrival_opt->count() > 0 &&
      g.arrival != "gamma" && g.arrival != "weibull" && syn.arrival.shape != 1.0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--burstiness ", syn.arrival.shape, " does not apply to --arrival ", g.arrival,
        " (allowed with gamma or weibull; without --arrival it selects gamma, as in "
        "vllm bench serve)"));
  }
  // Flags of another arrival process or length source would be ignored.
  if (g.schedule_opt->count() > 0 && g.arrival != "schedule") {
    return absl::InvalidArgumentError(
        absl::StrCat("--schedule applies to --arrival schedule, not ", g.arrival,
                     " (give --arrival schedule, or leave --schedule out)"));
  }
  for (const CLI::Option* o : g.spike_opts) {
    if (o->count() > 0 && g.arrival != "spikes") {
      return absl::InvalidArgumentError(
          absl::StrCat(o->get_name(), " applies to --arrival spikes, not ", g.arrival));
    }
  }
  if (g.rate_opt->count() > 0 &&
      (g.arrival == "all" || g.arrival == "inf" || g.arrival == "schedule")) {
    return absl::InvalidArgumentError(
        absl::StrCat("--request-rate does not apply to --arrival ", g.arrival,
                     g.arrival == "schedule" ? " (each --schedule phase has its rate)"
                                             : " (every request is sent at t = 0)"));
  }
  // The synthetic source's own ranges, named by the flags.
  const LengthSpec& len = syn.lengths;
  if (len.input_len < 1 || len.input_len > 10'000'000) {
    return OutOfRange("--random-input-len", len.input_len, "[1, 10000000]");
  }
  if (len.output_len < 1 || len.output_len > 10'000'000) {
    return OutOfRange("--random-output-len", len.output_len, "[1, 10000000]");
  }
  if (!(len.range_ratio >= 0 && len.range_ratio < 1)) {
    return OutOfRange("--random-range-ratio", len.range_ratio, "[0, 1)");
  }
  if (syn.sessions.shared_prefix_tokens < 0 ||
      syn.sessions.shared_prefix_tokens > 10'000'000) {
    return OutOfRange("--random-prefix-len", syn.sessions.shared_prefix_tokens,
                      "[0, 10000000]");
  }
  if (!(syn.sessions.think_time_s >= 0 && syn.sessions.think_time_s <= 1e7)) {
    return OutOfRange("--think-time-s", syn.sessions.think_time_s, "[0, 1e7]");
  }
  if (g.lengths_from_opt->count() > 0) {
    for (const CLI::Option* o : g.length_opts) {
      if (o->count() > 0) {
        return absl::InvalidArgumentError(
            absl::StrCat(o->get_name(),
                         " does not apply with --lengths-from (its file's (input, "
                         "output) pairs give the lengths)"));
      }
    }
  }
  const SessionSpec& ss = syn.sessions;
  if (ss.min_turns < 1 || ss.min_turns > 10'000) {
    return OutOfRange("--min-turns", ss.min_turns, "[1, 10000]");
  }
  if (ss.max_turns < 1 || ss.max_turns > 10'000) {
    return OutOfRange("--max-turns", ss.max_turns, "[1, 10000]");
  }
  if (g.max_turns_opt->count() > 0 && ss.max_turns < ss.min_turns) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max-turns ", ss.max_turns, " is below --min-turns ", ss.min_turns,
                     " (allowed: --min-turns <= --max-turns)"));
  }
  if (ss.max_input_tokens < 0) {
    return OutOfRange("--max-input-tokens", ss.max_input_tokens,
                      "[0, 2147483647] (0: no limit)");
  }
  if (ss.max_input_tokens > 0 && g.lengths_from.empty()) {
    // The shortest first prompt the length flags can give.
    const LengthSpec& l = syn.lengths;
    const int64_t shortest_input =
        l.range_ratio > 0
            ? static_cast<int64_t>(std::floor(l.input_len * (1 - l.range_ratio)))
            : l.input_len;
    const int64_t first_prompt =
        int64_t{ss.shared_prefix_tokens} + std::max<int64_t>(1, shortest_input);
    if (first_prompt > ss.max_input_tokens) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--max-input-tokens ", ss.max_input_tokens,
          " is below the shortest first prompt, --random-prefix-len ",
          ss.shared_prefix_tokens, " + --random-input-len ", l.input_len,
          l.range_ratio > 0
              ? absl::StrCat(" x (1 - --random-range-ratio ", l.range_ratio, ")")
              : "",
          " = ", first_prompt, " (allowed: --max-input-tokens >= ", first_prompt,
          ", or 0 for no limit)"));
    }
  }
  return absl::OkStatus();
}

void RegisterGenerate(CLI::App* trace, int* exit_code) {
  auto g = std::make_shared<GenerateFlags>();
  CLI::App* cmd =
      trace->add_subcommand("generate", "write a synthetic workload to a file");
  cmd->add_option("output", g->out,
                  "file to write (an existing one only with --overwrite)")
      ->required();
  cmd->add_flag("--overwrite", g->overwrite, "replace an existing output file");
  cmd->add_option("--to", g->to, "binary|csv|jsonl (default: by the output's extension)");
  // The defaults' one home: the initialisers of SyntheticOptions.
  const SyntheticOptions kSyn;
  cmd->add_option("--num-prompts", g->syn.num_requests,
                  WithDefault("requests to generate, 1..2147483647", kSyn.num_requests));
  cmd->add_option("--seed", g->seed, WithDefault("random seed", kSyn.seed));
  cmd->add_flag("--json", g->json,
                "print one JSON object (output, format, requests, time span) on stdout");
  g->arrival_opt = cmd->add_option(
      "--arrival", g->arrival,
      absl::StrCat("poisson|gamma|weibull|constant|all|schedule|spikes (default ",
                   g->arrival, ", or gamma when --burstiness is not 1)"));
  g->rate_opt =
      cmd->add_option("--request-rate", g->request_rate,
                      WithDefault("mean requests (or sessions) per second, (0, 1e9]",
                                  kSyn.arrival.rate_per_s));
  g->burstiness_opt = cmd->add_option(
      "--burstiness", g->syn.arrival.shape,
      WithDefault("Gamma/Weibull shape, [0.001, 1000]", kSyn.arrival.shape));
  g->schedule_opt =
      cmd->add_option("--schedule", g->schedule,
                      "schedule phases: DURATION_S:RATE,... (--arrival schedule)");
  g->spike_opts = {cmd->add_option("--spike-period-s", g->syn.arrival.spike_period_s,
                                   "(--arrival spikes)"),
                   cmd->add_option("--spike-duration-s", g->syn.arrival.spike_duration_s,
                                   "(--arrival spikes)"),
                   cmd->add_option("--spike-multiplier", g->syn.arrival.spike_multiplier,
                                   "(--arrival spikes)")};
  g->length_opts = {
      cmd->add_option("--random-input-len", g->syn.lengths.input_len,
                      WithDefault("", kSyn.lengths.input_len)),
      cmd->add_option("--random-output-len", g->syn.lengths.output_len,
                      WithDefault("", kSyn.lengths.output_len)),
      cmd->add_option("--random-range-ratio", g->syn.lengths.range_ratio,
                      "uniform lengths within +-ratio (vLLM random dataset)")};
  g->lengths_from_opt = cmd->add_option(
      "--lengths-from", g->lengths_from,
      "draw (input, output) pairs from this trace's empirical distribution");
  cmd->add_option("--lengths-from-format", g->lengths_from_format,
                  "format of the --lengths-from trace (default: detect)");
  g->min_turns_opt =
      cmd->add_option("--min-turns", g->syn.sessions.min_turns,
                      WithDefault("turns per session", kSyn.sessions.min_turns));
  g->max_turns_opt =
      cmd->add_option("--max-turns", g->syn.sessions.max_turns,
                      absl::StrCat("turns per session (default ", kSyn.sessions.max_turns,
                                   ", or --min-turns when only that is given)"));
  cmd->add_option("--think-time-s", g->syn.sessions.think_time_s,
                  WithDefault("mean gap from a turn's send to the next turn's, s (an "
                              "exponential draw; simulate never sends a turn before the "
                              "previous answer ends)",
                              kSyn.sessions.think_time_s));
  cmd->add_option("--random-prefix-len,--shared-prefix",
                  g->syn.sessions.shared_prefix_tokens,
                  "prefix tokens shared by every request (a system prompt; vllm bench "
                  "serve's --random-prefix-len)");
  cmd->add_option("--max-input-tokens", g->syn.sessions.max_input_tokens,
                  "end a session before its prompt exceeds this");
  cmd->add_option("--hash-block", g->syn.hash_block_tokens,
                  WithDefault("tokens per prefix hash", kSyn.hash_block_tokens));
  cmd->callback([g, exit_code] {
    auto kind = ArrivalKind(g->arrival);
    if (!kind.ok()) {
      *exit_code = Fail("generate", kind.status());
      return;
    }
    if (auto st = CheckGenerateFlags(*g); !st.ok()) {
      *exit_code = Fail("generate", st);
      return;
    }
    if (auto st = CheckOutputTarget(g->out, "output", g->overwrite); !st.ok()) {
      *exit_code = Fail("generate", st);
      return;
    }
    SyntheticOptions syn = g->syn;
    if (!g->seed.empty()) {
      auto seed = ParseSeed(g->seed);
      if (!seed.ok()) {
        *exit_code = Fail("generate", seed.status());
        return;
      }
      syn.seed = *seed;
    }
    syn.arrival.kind = *kind;
    // vllm bench serve: a burstiness other than 1 makes the gaps Gamma.
    if (g->arrival_opt->count() == 0 && syn.arrival.shape != 1.0) {
      syn.arrival.kind = ArrivalSpec::Kind::kGamma;
    }
    syn.arrival.rate_per_s = g->request_rate;
    // Only --min-turns given: the range is that many turns exactly.
    if (g->max_turns_opt->count() == 0 &&
        syn.sessions.max_turns < syn.sessions.min_turns) {
      syn.sessions.max_turns = syn.sessions.min_turns;
    }
    if (!g->schedule.empty()) {
      auto phases = ParseSchedule(g->schedule);
      if (!phases.ok()) {
        *exit_code = Fail("generate", phases.status());
        return;
      }
      syn.arrival.schedule = *phases;
    }
    if (syn.lengths.range_ratio > 0) syn.lengths.kind = LengthSpec::Kind::kUniform;
    if (!g->lengths_from.empty()) {
      TraceOptions t;
      t.path = g->lengths_from;
      t.format = g->lengths_from_format;
      auto src = OpenTrace(t);
      if (!src.ok()) {
        *exit_code = Fail("generate", src.status());
        return;
      }
      auto pairs = SampleEmpiricalLengths(**src, 1'000'000, syn.seed);
      if (!pairs.ok()) {
        *exit_code = Fail("generate", pairs.status());
        return;
      }
      syn.lengths.kind = LengthSpec::Kind::kEmpirical;
      syn.lengths.empirical = std::move(*pairs);
    }
    auto src = MakeSyntheticSource(syn);
    if (!src.ok()) {
      *exit_code = Fail("generate", src.status());
      return;
    }
    absl::StatusOr<OutputFormat> format_or = OutputFormatFlag(g->out, g->to);
    if (!format_or.ok()) {
      *exit_code = Fail("generate", format_or.status());
      return;
    }
    const OutputFormat format = *format_or;
    auto summary = ConvertTraceWithSummary(**src, g->out, format);
    if (!summary.ok()) {
      *exit_code = Fail("generate", summary.status());
      return;
    }
    if (g->json) {
      JsonWriter w(2);
      w.BeginObject();
      w.KV("command", "trace generate");
      w.KV("seed", static_cast<int64_t>(syn.seed));
      if (!g->lengths_from.empty()) w.KV("lengths_from", g->lengths_from);
      WriteSummaryFields(w, *summary, g->out, format);
      w.EndObject();
      PrintJsonSummary(w);
    } else {
      std::fprintf(stderr, "wrote %lld requests to %s (%s)\n",
                   static_cast<long long>(summary->requests), g->out.c_str(),
                   summary->source.c_str());
    }
    *exit_code = kExitOk;
  });
}

}  // namespace

void RegisterTraceCommand(CLI::App& app, int* exit_code) {
  CLI::App* cmd = app.add_subcommand(
      "trace",
      "summarize (stats), convert and generate request traces (Azure, Mooncake, "
      "BurstGPT, "
      "Qwen-Bailian, vllm bench results, length tables, servesim binary)");
  cmd->require_subcommand(1, 1);
  RegisterStats(cmd, exit_code);
  RegisterConvert(cmd, exit_code);
  RegisterGenerate(cmd, exit_code);
}

}  // namespace servesim::cli
