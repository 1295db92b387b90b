// servesim trace: look at and reshape request traces.
//   servesim trace stats FILE [--trace-format F] [--json] [transforms]
//   servesim trace convert IN OUT [--to binary|csv|jsonl] [transforms]
//   servesim trace generate OUT [--to ...] [--num-prompts N --request-rate R
//       --arrival poisson|gamma|weibull|constant|all|spikes|schedule ...]
// Bad flags, files or records exit 2 with a message naming file:line.
#include <cmath>
#include <cstdio>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "experiments/cli.h"
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
};

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
  cmd->add_option("--window-end-s", f->window_end_s,
                  "keep arrivals before this time (s)");
  cmd->add_option("--sample", f->opts.sample_fraction,
                  "keep each request with this probability");
  cmd->add_option("--min-input", f->opts.lengths.min_input);
  cmd->add_option("--max-input", f->opts.lengths.max_input);
  cmd->add_option("--min-output", f->opts.lengths.min_output);
  cmd->add_option("--max-output", f->opts.lengths.max_output);
  cmd->add_option("--rate-scale", f->opts.rate_scale,
                  "multiply the request rate by this");
  cmd->add_option("--target-rate", f->opts.target_rate_per_s,
                  "rescale time so the mean request rate is this (req/s)");
  cmd->add_option("--loop-to", f->opts.loop_to_requests,
                  "replay the trace up to N requests");
  cmd->add_flag("!--loop-keep-hashes", f->opts.loop_distinct_hashes,
                "looped passes reuse the prefix hashes (they hit the cache)");
  cmd->add_option("--max-requests", f->opts.max_requests, "stop after N requests");
  cmd->add_option("--seed", f->opts.seed, "seed for sampling and arrivals");
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

absl::Status Resolve(TraceFlags& f) {
  if (!std::isfinite(f.window_start_s) || f.window_start_s < 0 ||
      f.window_start_s > 9e9) {
    return absl::InvalidArgumentError("--window-start-s: allowed 0..9e9");
  }
  f.opts.window_start_ns = static_cast<TimeNs>(std::llround(f.window_start_s * 1e9));
  if (f.window_end_s >= 0) {
    if (f.window_end_s > 9e9)
      return absl::InvalidArgumentError("--window-end-s: allowed 0..9e9");
    f.opts.window_end_ns = static_cast<TimeNs>(std::llround(f.window_end_s * 1e9));
  }
  auto kind = ArrivalKind(f.arrival);
  if (!kind.ok()) return kind.status();
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

int Fail(const absl::Status& st) {
  std::fprintf(stderr, "servesim trace: %s\n", std::string(st.message()).c_str());
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
      *exit_code = Fail(st);
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
      *exit_code = Fail(src.status());
      return;
    }
    auto stats = ComputeTraceStats(**src);
    if (!stats.ok()) {
      *exit_code = Fail(stats.status());
      return;
    }
    const std::string out =
        *json ? FormatTraceStatsJson(*stats) : FormatTraceStatsText(*stats);
    std::fwrite(out.data(), 1, out.size(), stdout);
    *exit_code = kExitOk;
  });
}

void RegisterConvert(CLI::App* trace, int* exit_code) {
  auto flags = std::make_shared<TraceFlags>();
  auto out = std::make_shared<std::string>();
  auto to = std::make_shared<std::string>();
  CLI::App* cmd = trace->add_subcommand(
      "convert", "copy a trace (with transforms) to servesim binary, CSV or JSONL");
  cmd->add_option("input", flags->opts.path, "trace file")->required();
  cmd->add_option("output", *out, "file to write")->required();
  cmd->add_option("--to", *to, "binary|csv|jsonl (default: by the output's extension)");
  AddTraceFlags(cmd, flags.get());
  cmd->callback([flags, out, to, exit_code] {
    if (auto st = Resolve(*flags); !st.ok()) {
      *exit_code = Fail(st);
      return;
    }
    OutputFormat format = OutputFormatForPath(*out);
    if (!to->empty()) {
      auto f = ParseOutputFormat(*to);
      if (!f.ok()) {
        *exit_code = Fail(f.status());
        return;
      }
      format = *f;
    }
    auto src = OpenTrace(flags->opts);
    if (!src.ok()) {
      *exit_code = Fail(src.status());
      return;
    }
    auto n = ConvertTrace(**src, *out, format);
    if (!n.ok()) {
      *exit_code = Fail(n.status());
      return;
    }
    std::fprintf(stderr, "wrote %lld requests to %s (%s)\n", static_cast<long long>(*n),
                 out->c_str(), (*src)->Describe().c_str());
    *exit_code = kExitOk;
  });
}

struct GenerateFlags {
  std::string out, to;
  SyntheticOptions syn;
  std::string arrival = "poisson";
  double request_rate = 1.0;
  std::string schedule;
  std::string lengths_from;
  std::string lengths_from_format;
};

void RegisterGenerate(CLI::App* trace, int* exit_code) {
  auto g = std::make_shared<GenerateFlags>();
  CLI::App* cmd =
      trace->add_subcommand("generate", "write a synthetic workload to a file");
  cmd->add_option("output", g->out, "file to write")->required();
  cmd->add_option("--to", g->to, "binary|csv|jsonl (default: by the output's extension)");
  cmd->add_option("--num-prompts", g->syn.num_requests,
                  "requests to generate (default 1000)");
  cmd->add_option("--seed", g->syn.seed, "random seed (default 0)");
  cmd->add_option("--arrival", g->arrival,
                  "poisson|gamma|weibull|constant|all|schedule|spikes (default poisson)");
  cmd->add_option("--request-rate", g->request_rate,
                  "mean requests (or sessions) per second");
  cmd->add_option("--burstiness", g->syn.arrival.shape,
                  "Gamma/Weibull shape (default 1)");
  cmd->add_option("--schedule", g->schedule, "schedule phases: DURATION_S:RATE,...");
  cmd->add_option("--spike-period-s", g->syn.arrival.spike_period_s);
  cmd->add_option("--spike-duration-s", g->syn.arrival.spike_duration_s);
  cmd->add_option("--spike-multiplier", g->syn.arrival.spike_multiplier);
  cmd->add_option("--random-input-len", g->syn.lengths.input_len, "default 1024");
  cmd->add_option("--random-output-len", g->syn.lengths.output_len, "default 128");
  cmd->add_option("--random-range-ratio", g->syn.lengths.range_ratio,
                  "uniform lengths within +-ratio (vLLM random dataset)");
  cmd->add_option("--lengths-from", g->lengths_from,
                  "draw (input, output) pairs from this trace's empirical distribution");
  cmd->add_option("--lengths-from-format", g->lengths_from_format);
  cmd->add_option("--min-turns", g->syn.sessions.min_turns,
                  "turns per session (default 1)");
  cmd->add_option("--max-turns", g->syn.sessions.max_turns,
                  "turns per session (default 1)");
  cmd->add_option("--think-time-s", g->syn.sessions.think_time_s,
                  "mean gap between turns");
  cmd->add_option("--shared-prefix", g->syn.sessions.shared_prefix_tokens,
                  "system-prompt tokens shared by every request");
  cmd->add_option("--max-input-tokens", g->syn.sessions.max_input_tokens,
                  "end a session before its prompt exceeds this");
  cmd->add_option("--hash-block", g->syn.hash_block_tokens,
                  "tokens per prefix hash (16)");
  cmd->callback([g, exit_code] {
    auto kind = ArrivalKind(g->arrival);
    if (!kind.ok()) {
      *exit_code = Fail(kind.status());
      return;
    }
    SyntheticOptions syn = g->syn;
    syn.arrival.kind = *kind;
    syn.arrival.rate_per_s = g->request_rate;
    if (syn.sessions.max_turns < syn.sessions.min_turns) {
      syn.sessions.max_turns = syn.sessions.min_turns;
    }
    if (!g->schedule.empty()) {
      auto phases = ParseSchedule(g->schedule);
      if (!phases.ok()) {
        *exit_code = Fail(phases.status());
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
        *exit_code = Fail(src.status());
        return;
      }
      auto pairs = SampleEmpiricalLengths(**src, 1'000'000, syn.seed);
      if (!pairs.ok()) {
        *exit_code = Fail(pairs.status());
        return;
      }
      syn.lengths.kind = LengthSpec::Kind::kEmpirical;
      syn.lengths.empirical = std::move(*pairs);
    }
    auto src = MakeSyntheticSource(syn);
    if (!src.ok()) {
      *exit_code = Fail(src.status());
      return;
    }
    OutputFormat format = OutputFormatForPath(g->out);
    if (!g->to.empty()) {
      auto f = ParseOutputFormat(g->to);
      if (!f.ok()) {
        *exit_code = Fail(f.status());
        return;
      }
      format = *f;
    }
    auto n = ConvertTrace(**src, g->out, format);
    if (!n.ok()) {
      *exit_code = Fail(n.status());
      return;
    }
    std::fprintf(stderr, "wrote %lld requests to %s (%s)\n", static_cast<long long>(*n),
                 g->out.c_str(), (*src)->Describe().c_str());
    *exit_code = kExitOk;
  });
}

}  // namespace

void RegisterTraceCommand(CLI::App& app, int* exit_code) {
  CLI::App* cmd = app.add_subcommand(
      "trace",
      "inspect, convert and generate request traces (Azure, Mooncake, BurstGPT, "
      "Qwen-Bailian, vllm bench results, length tables, servesim binary)");
  cmd->require_subcommand(1, 1);
  RegisterStats(cmd, exit_code);
  RegisterConvert(cmd, exit_code);
  RegisterGenerate(cmd, exit_code);
}

}  // namespace servesim::cli
