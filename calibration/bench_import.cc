#include "calibration/bench_import.h"

#include <cmath>
#include <filesystem>
#include <limits>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "calibration/measurements.h"
#include "sim/status_macros.h"

namespace servesim {
namespace {

using servesim::proto::ClientMethod;
using servesim::proto::Measurement;

bool AllEqual(const std::vector<double>& v) {
  for (double x : v) {
    if (x != v.front()) return false;
  }
  return true;
}

double Mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0 : s / v.size();
}

}  // namespace

absl::StatusOr<ImportedCell> ImportBenchFile(const std::string& path) {
  ASSIGN_OR_RETURN(BenchResult r, ReadBenchResult(path));
  ImportedCell c;
  c.path = path;
  if (auto it = r.strings.find("model_id"); it != r.strings.end())
    c.model_id = it->second;
  const double completed = r.MetricOr("completed", 0);
  if (!(completed >= 1)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: key completed: %g, need at least one completed request", path, completed));
  }
  c.num_prompts = static_cast<int64_t>(completed);
  std::vector<std::string> how;
  // Concurrency and arrival rate.
  c.max_concurrency = static_cast<int32_t>(r.MetricOr("max_concurrency", 0));
  if (auto it = r.strings.find("request_rate");
      it != r.strings.end() && it->second == "inf") {
    c.request_rate = std::numeric_limits<double>::infinity();
  } else {
    c.request_rate = r.MetricOr("request_rate", std::numeric_limits<double>::infinity());
  }
  how.push_back(c.max_concurrency > 0 ? "max_concurrency" : "no max_concurrency key");
  // Lengths: per-request arrays when present, else totals / completed.
  if (r.input_lens && r.output_lens && !r.input_lens->empty()) {
    c.has_per_request = true;
    c.input_tokens = Mean(*r.input_lens);
    c.output_tokens = Mean(*r.output_lens);
    c.fixed_lengths = AllEqual(*r.input_lens) && AllEqual(*r.output_lens);
    how.push_back("lengths from input_lens/output_lens");
  } else {
    const double in = r.MetricOr("total_input_tokens", std::nan(""));
    const double out = r.MetricOr("total_output_tokens", std::nan(""));
    if (!std::isfinite(in) || !std::isfinite(out)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: keys total_input_tokens/total_output_tokens (or per-request input_lens/"
          "output_lens) are needed to infer the request lengths",
          path));
    }
    c.input_tokens = in / completed;
    c.output_tokens = out / completed;
    c.fixed_lengths = c.input_tokens == std::floor(c.input_tokens) &&
                      c.output_tokens == std::floor(c.output_tokens);
    how.push_back("lengths from total_*_tokens / completed");
  }
  if (r.ttfts) c.has_per_request = true;
  c.output_throughput = r.MetricOr("output_throughput", 0);
  c.total_throughput = r.MetricOr("total_token_throughput", 0);
  c.median_ttft_ms = r.MetricOr("median_ttft_ms", 0);
  c.median_tpot_ms = r.MetricOr("median_tpot_ms", 0);
  if (c.output_throughput <= 0) {
    const double duration = r.MetricOr("duration", 0);
    if (duration > 0) {
      c.output_throughput = c.output_tokens * completed / duration;
      how.push_back("output_throughput from total_output_tokens / duration");
    }
  }
  c.inferred = absl::StrJoin(how, "; ");
  return c;
}

absl::StatusOr<std::vector<Measurement>> CellMeasurements(const ImportedCell& cell,
                                                          const std::string& run_id,
                                                          double tolerance_pct) {
  if (std::isfinite(cell.request_rate)) {
    return absl::FailedPreconditionError(
        absl::StrFormat("%s: request_rate %g is an open-loop (Poisson/Gamma) run; "
                        "calibrate fits closed-loop "
                        "cells (--request-rate inf --max-concurrency c) only",
                        cell.path, cell.request_rate));
  }
  if (!cell.fixed_lengths) {
    return absl::FailedPreconditionError(
        absl::StrFormat("%s: request lengths vary (mean %.1f in / %.1f out); calibrate "
                        "needs fixed-length cells "
                        "(random dataset, range ratio 0, --ignore-eos)",
                        cell.path, cell.input_tokens, cell.output_tokens));
  }
  const int32_t c = cell.max_concurrency > 0 ? cell.max_concurrency
                                             : static_cast<int32_t>(cell.num_prompts);
  ClientMethod client;
  client.set_kind(ClientMethod::BENCH_SERVE_CLOSED_LOOP);
  client.set_max_concurrency(c);
  client.set_num_prompts(static_cast<int32_t>(cell.num_prompts));
  client.set_input_tokens(static_cast<int32_t>(cell.input_tokens));
  client.set_output_tokens(static_cast<int32_t>(cell.output_tokens));
  client.set_ignore_eos(true);
  client.set_dataset("random (from the result file)");
  client.set_client_version("vllm bench serve");
  const std::string stem = std::filesystem::path(cell.path).filename().string();
  std::vector<Measurement> out;
  auto add = [&](servesim::proto::Metric metric, double value, const char* unit,
                 const char* key, double sigma) {
    if (!(value > 0)) return;
    Measurement m;
    m.set_id(absl::StrFormat("%s/%s", stem, MetricName(metric)));
    m.set_run(run_id);
    m.set_metric(metric);
    m.set_value(value);
    m.set_unit(unit);
    *m.mutable_client() = client;
    m.mutable_provenance()->set_writeup("user bench file");
    m.mutable_provenance()->set_section(cell.path);
    m.mutable_provenance()->set_cell(key);
    m.mutable_provenance()->set_note(cell.inferred);
    m.set_tolerance_pct(tolerance_pct);
    m.set_tolerance_rule(absl::StrFormat("calibrate: within %g%%", tolerance_pct));
    m.set_fit(true);
    m.set_rel_sigma(sigma);
    out.push_back(std::move(m));
  };
  add(servesim::proto::OUTPUT_THROUGHPUT, cell.output_throughput, "tok/s",
      "output_throughput", 0.03);
  add(servesim::proto::MEDIAN_TTFT_MS, cell.median_ttft_ms, "ms", "median_ttft_ms", 0.03);
  add(servesim::proto::MEDIAN_TPOT_MS, cell.median_tpot_ms, "ms", "median_tpot_ms", 0.03);
  return out;
}

}  // namespace servesim
