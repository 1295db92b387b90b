// The result file of vLLM's benchmark client (`vllm bench serve
// --save-result`, and the older benchmarks/benchmark_serving.py): summary
// metrics plus, when saved, per-request arrays. Plain .json or .json.gz.
#ifndef SERVESIM_TRACES_BENCH_RESULT_H_
#define SERVESIM_TRACES_BENCH_RESULT_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace servesim {

struct BenchResult {
  // Every numeric top-level key (mean_ttft_ms, output_throughput, duration,
  // completed, num_prompts, request_rate when numeric, ...). A trailing
  // colon in a key ("request_goodput:") is dropped. Values are kept as
  // written (NaN, Infinity, negatives): ranges are the caller's to check
  // (calibration's ImportBenchFile does, for the keys it uses).
  std::map<std::string, double> metrics;
  // Every string or boolean top-level key (model_id, date, backend,
  // request_rate when written as "inf"; booleans as "true"/"false").
  // Null values are left out of both maps.
  std::map<std::string, std::string> strings;
  // Every other top-level array or object but the per-request arrays below
  // (generated_texts, a nested config), as "an array" / "an object", so a
  // caller that expects a number at that key can say what it found.
  std::map<std::string, std::string> others;
  // Per-request arrays, present only when the file has them.
  std::optional<std::vector<double>> input_lens;
  std::optional<std::vector<double>> output_lens;
  std::optional<std::vector<double>> ttfts;              // seconds, as the client writes
  std::optional<std::vector<std::vector<double>>> itls;  // seconds
  std::optional<std::vector<double>> start_times;        // seconds
  std::optional<std::vector<std::string>> errors;        // "" = success
  // Every top-level key of the file, in file order (so a caller can say
  // which keys a given client version wrote).
  std::vector<std::string> keys_used;

  // metrics[key] or `fallback` when absent.
  double MetricOr(const std::string& key, double fallback) const;
};

// Reads and validates a bench result. Core keys (required): "completed"
// and "duration" as numbers. Everything else is optional. Per-request
// arrays must be arrays of numbers (itls: of arrays of numbers), and all
// present ones must have the same length. Errors name the file, and the
// key (and index) at fault.
absl::StatusOr<BenchResult> ReadBenchResult(const std::string& path);

}  // namespace servesim

#endif  // SERVESIM_TRACES_BENCH_RESULT_H_
